"""`torch.tpu.ops`, the reference backend's custom ops (torch.tpu's
`__path__` is this folder; torch_tpu/device_module.py). Implemented in
torch_tpu/reference_ops/, one file per family; the SparseCore ones raise
NotImplementedError (reference_ops/sparsecore.py)."""

from torch_tpu.reference_ops import *  # noqa: F401,F403
from torch_tpu.reference_ops import __all__  # noqa: F401
