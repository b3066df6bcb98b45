"""`torch.tpu.pallas`: the reference backend's name for running JAX / Pallas
kernels as torch ops; `jax_op` is torch_tpu.jax_op (torch_tpu/jax_op.py)."""

from .jax_op import JaxOp, jax_op

__all__ = ["jax_op", "JaxOp"]
