"""`torch.tpu.pallas`, the reference backend's module for JAX / Pallas
kernels as torch ops (torch.tpu's `__path__` is this folder;
torch_tpu/device_module.py). Implemented in torch_tpu/pallas.py."""

from torch_tpu.pallas import JaxOp, get_pallas_mesh, jax_op  # noqa: F401

__all__ = ["jax_op", "JaxOp", "get_pallas_mesh"]
