"""`torch.tpu.pallas`: the reference backend's name for running JAX / Pallas
kernels as torch ops; `jax_op` is torch_tpu.jax_op (torch_tpu/jax_op.py)."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from .jax_op import JaxOp, jax_op

__all__ = ["jax_op", "JaxOp", "get_pallas_mesh"]


def get_pallas_mesh(axis_names: "Sequence[str] | str", mesh_shape: Optional[Sequence[int]] = None,
                    process_group: Any = None):
    """A `jax.sharding.Mesh` whose i-th position is the device of the
    group's i-th rank (the world without a group; this process's one device
    outside a job). `mesh_shape` is needed for more than one axis and must
    multiply to the group's size. jax_op runs kernels over a one-device
    mesh; one spanning several ranks raises there (torch_tpu/jax_op.py)."""
    import jax
    import numpy as np
    import torch.distributed as dist

    from . import _C

    names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
    if dist.is_available() and dist.is_initialized():
        ranks = dist.get_process_group_ranks(process_group or dist.group.WORLD)
    elif process_group is not None:
        raise RuntimeError("torch.tpu.pallas.get_pallas_mesh: a process_group was given but torch.distributed is "
                           "not initialized")
    else:
        ranks = [0]
    if mesh_shape is None:
        if len(names) != 1:
            raise ValueError(f"torch.tpu.pallas.get_pallas_mesh: {len(names)} axis names {names} need a mesh_shape")
        mesh_shape = (len(ranks),)
    mesh_shape = tuple(int(s) for s in mesh_shape)
    if len(mesh_shape) != len(names) or int(np.prod(mesh_shape)) != len(ranks):
        raise ValueError(f"torch.tpu.pallas.get_pallas_mesh: mesh_shape {mesh_shape} with axes {names} does not "
                         f"lay out {len(ranks)} rank(s)")
    by_process = {}
    for d in jax.devices(_C._platform()[0]):
        by_process.setdefault(d.process_index, d)
    try:
        devices = [by_process[r] for r in ranks]
    except KeyError as e:
        raise RuntimeError(f"torch.tpu.pallas.get_pallas_mesh: rank {e.args[0]} has no device in this job") from None
    return jax.sharding.Mesh(np.array(devices, dtype=object).reshape(mesh_shape), names)
