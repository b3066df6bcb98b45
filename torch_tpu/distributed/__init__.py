"""torch.distributed on tpu: the ``tpu_dist`` backend.

``tpu_dist`` is a C++ ``c10d::Backend`` (csrc/distributed/) whose
collectives are StableHLO programs run by XLA over the job's devices (on
XLA:CPU through XLA's gloo collectives, on a TPU pod over the chips'
interconnect). It is registered for the ``tpu`` device at import, so
``init_process_group()`` in a torchrun job gives tpu tensors to tpu_dist
and cpu tensors to Gloo, as ``"cpu:gloo,tpu:tpu_dist"`` does.

The runtime joins the job (``jax.distributed.initialize``) when it starts,
whatever starts it first; see docs/design.md, "Distributed".
"""

import os

import torch
import torch.distributed as dist

from .. import _C

BACKEND = "tpu_dist"


def _set_collective_timeout(seconds):
    # XLA:CPU reads its flags when its backend starts: a collective whose
    # peers never come then fails after `seconds` instead of waiting forever.
    if _C._runtime_started():
        return
    flags = os.environ.get("XLA_FLAGS", "")
    if "--xla_cpu_collective_timeout_seconds" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_collective_timeout_seconds={max(1, int(seconds))}".strip()


def _create_backend(opts, backend_options):
    """The creator torch.distributed calls (extended API) for a tpu_dist group."""
    timeout = opts.timeout.total_seconds()
    _set_collective_timeout(timeout)
    return _C._distributed.create_backend(
        opts.store, opts.group_rank, opts.group_size, list(opts.global_ranks_in_group), timeout, opts.group_id
    )


def job_from_env():
    """(active, rank, world_size, local_rank, coordinator) read from the environment."""
    return _C._distributed.job_from_env()


def _register():
    if not dist.is_available() or BACKEND.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True, devices=["tpu"])


_register()
