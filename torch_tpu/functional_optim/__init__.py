"""The reference backend's functional optimizers and single-program
trainer (`torch.tpu.optimizers`, torch_tpu/torch_tpu_names/optimizers.py):
one file per optimizer, the stateless base in base.py, the trainer in
single_trace_trainer.py."""

from .adamw import AdamW
from .base import Optimizer
from .muon import Muon
from .sgd import Sgd
from .single_trace_trainer import SingleTraceTrainer

__all__ = ["AdamW", "Muon", "Optimizer", "Sgd", "SingleTraceTrainer"]
