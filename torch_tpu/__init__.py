"""torch_tpu: a native PyTorch backend for TPUs, through StableHLO and XLA.

Importing the package (PyTorch does it at `import torch` through the
`torch.backends` entry point) loads the C++ extension, which registers the
kernels, device guard, hooks and generator for PrivateUse1, renames that
backend to "tpu" and installs `torch.tpu`. XLA (through jax) starts only on
first device use.
"""


def _autoload():
    """Entry point PyTorch calls at `import torch`; importing did the work.

    Defined before `import torch` so that `import torch_tpu` as the first
    import works: torch then autoloads this half-initialised module and only
    needs this function to exist."""


import torch  # noqa: E402

from . import _C  # noqa: F401  (registers the C++ backend)

if torch._C._get_privateuse1_backend_name() != "tpu":
    torch.utils.rename_privateuse1_backend("tpu")

from . import device_module as tpu  # noqa: E402
from .modes import eager_mode, fusion_stats, get_eager_mode, mark_step  # noqa: E402
from .fallback import cpu_fallback, cpu_fallback_enabled, cpu_fallback_stats, reset_cpu_fallback_stats  # noqa: E402

torch._register_device_module("tpu", tpu)
tpu.amp._set_default_dtype()
tpu.amp._let_higher_order_ops_through()
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
)


def _format_on_host(tensor_str):
    # Printing formats values with a dozen small tensor ops (isfinite,
    # masked_select, ...); on tpu each would compile a program. One transfer
    # to the host does the same for the cost of a copy, as PyTorch already
    # does for XLA tensors. The device suffix still comes from the tpu tensor.
    def _tensor_str(self, indent):
        if self.device.type == "tpu":
            self = self.cpu()
        return tensor_str(self, indent)

    return _tensor_str


torch._tensor_str._tensor_str = _format_on_host(torch._tensor_str._tensor_str)

from . import safetensors_compat  # noqa: E402

safetensors_compat.install()  # safetensors' loaders accept device="tpu"

from . import dynamo_backend  # noqa: E402
from .dynamo_backend import compile_stats  # noqa: E402
from .bounded_tensor import mark_dynamic  # noqa: E402
from . import auto_bucket  # noqa: E402,F401  (hands the tpu cat kernel its bucketing hook, TPU_FUSE_BUCKET)
from .compile_log import recompile_log  # noqa: E402

dynamo_backend.install()  # torch.compile(..., backend="tpu")

from .jax_op import jax_op  # noqa: E402
from . import control_flow  # noqa: E402,F401  (scan and while_loop on tpu as one stablehlo.while)
from .stablehlo_export import export  # noqa: E402
from .roofline import estimate  # noqa: E402
from . import profiler  # noqa: E402  (torch_tpu.profiler.trace)
from . import distributed  # noqa: E402,F401  (registers the tpu_dist c10d backend)
from . import huggingface  # noqa: E402

huggingface.install()  # accelerate / Transformers choose tpu where their device lists stop short

from . import flex_attention  # noqa: E402

flex_attention.install()  # torch's flex_attention accepts tpu tensors, autocast included

from . import process_sharing  # noqa: E402

process_sharing.install()  # tpu tensors through multiprocessing queues travel as copies

from . import data_parallel  # noqa: E402

data_parallel.install()  # nn.DataParallel's scatter/gather (CUDA-only in torch's C++) on tpu

__all__ = ["tpu", "eager_mode", "get_eager_mode", "mark_step", "fusion_stats", "compile_stats", "mark_dynamic",
           "recompile_log", "jax_op", "export", "estimate", "profiler",
           "cpu_fallback", "cpu_fallback_enabled", "cpu_fallback_stats", "reset_cpu_fallback_stats"]
