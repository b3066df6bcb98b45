"""`torch.tpu.topology_aware_mesh`: a DeviceMesh("tpu") whose ranks are laid
out on the chips' interconnect.

jax knows the topology (on a TPU slice each device has physical
coordinates; `mesh_utils.create_device_mesh` orders them so that each mesh
dimension runs along the torus's rings), and every rank of a job owns one
jax device (its process's), so the mesh is jax's device mesh with each
device replaced by its process's rank. Across slices (`dcn_mesh_shape`,
the data-center network between them) jax's hybrid mesh puts the slices on
the outer part of each dimension. Where devices carry no coordinates (XLA:CPU
here) jax lays them out in rank order, and slices are consecutive blocks of
ranks.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
import torch.distributed as dist


def topology_aware_mesh(mesh_shape: Sequence[int], dcn_mesh_shape: Sequence[int] | None = None, *,
                        mesh_dim_names: Sequence[str] | None = None):
    """A DeviceMesh of shape mesh_shape (times dcn_mesh_shape, dimension by
    dimension, over several slices) for the job's ranks. Starts the default
    process group if there is none."""
    import jax
    from jax.experimental import mesh_utils
    from torch.distributed.device_mesh import DeviceMesh

    mesh_shape = tuple(int(d) for d in mesh_shape)
    dcn = tuple(int(d) for d in dcn_mesh_shape) if dcn_mesh_shape is not None else (1,) * len(mesh_shape)
    if len(dcn) != len(mesh_shape):
        raise ValueError(f"topology_aware_mesh: dcn_mesh_shape {dcn} and mesh_shape {mesh_shape} differ in length")
    if not dist.is_initialized():
        dist.init_process_group()
    world = dist.get_world_size()
    shape = tuple(m * d for m, d in zip(mesh_shape, dcn))
    if math.prod(shape) != world:
        raise ValueError(f"topology_aware_mesh: a mesh of shape {shape} needs {math.prod(shape)} ranks, the job has "
                         f"{world}")
    devices = jax.devices()
    if len({d.process_index for d in devices}) != world:
        raise RuntimeError(f"topology_aware_mesh: {len(devices)} jax devices over "
                           f"{len({d.process_index for d in devices})} processes for {world} ranks (each rank of a "
                           f"job owns one device)")
    if math.prod(dcn) == 1:
        layout = mesh_utils.create_device_mesh(mesh_shape, devices)
    elif len({getattr(d, "slice_index", 0) for d in devices}) == math.prod(dcn):
        layout = mesh_utils.create_hybrid_device_mesh(mesh_shape, dcn, devices)
    else:  # no slices known (XLA:CPU says 1): each slice a consecutive block of ranks, outer in each dimension
        blocks = np.arange(world).reshape(dcn + mesh_shape)
        n = len(shape)
        order = [ax for k in range(n) for ax in (k, n + k)]
        return DeviceMesh("tpu", torch.tensor(blocks.transpose(order).reshape(shape)),
                          mesh_dim_names=tuple(mesh_dim_names) if mesh_dim_names else None)
    ranks = np.vectorize(lambda d: d.process_index)(layout)
    return DeviceMesh("tpu", torch.tensor(ranks), mesh_dim_names=tuple(mesh_dim_names) if mesh_dim_names else None)
