"""`torch.tpu.compiler`, the reference backend's module of XLA compile
options (torch.tpu's `__path__` is this folder; torch_tpu/device_module.py).
The implementation is torch_tpu/xla_options.py."""

from torch_tpu.xla_options import custom_compiler_options  # noqa: F401

__all__ = ["custom_compiler_options"]
