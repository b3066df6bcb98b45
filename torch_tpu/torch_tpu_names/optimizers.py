"""`torch.tpu.optimizers`, the reference backend's functional optimizers
and SingleTraceTrainer (torch.tpu's `__path__` is this folder;
torch_tpu/device_module.py). Implemented in torch_tpu/functional_optim/."""

from torch_tpu.functional_optim import AdamW, Muon, Optimizer, Sgd, SingleTraceTrainer  # noqa: F401

__all__ = ["AdamW", "Muon", "Optimizer", "Sgd", "SingleTraceTrainer"]
