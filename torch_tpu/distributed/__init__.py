"""torch.distributed on tpu: the ``tpu_dist`` backend.

``tpu_dist`` is a C++ ``c10d::Backend`` (csrc/distributed/) whose
collectives are StableHLO programs run by XLA over the job's devices (on
XLA:CPU through XLA's gloo collectives, on a TPU pod over the chips'
interconnect). It is registered for the ``tpu`` device at import.

torch's default for a device is a single backend name, and a group created
without a backend (``init_process_group()``, what a script written for CUDA
calls) gets that device's backend alone, with Gloo named as its default
backend although no Gloo exists (fine for NCCL, which torch special-cases;
DDP fails on anything else). So the ``tpu`` default is ``tpu_dist_gloo``,
whose creator returns the whole group (torch's supported path for a creator
that builds a ``ProcessGroup``): tpu tensors to tpu_dist, cpu tensors
(object collectives, DCP metadata) to Gloo, as ``"cpu:gloo,tpu:tpu_dist"``
does. ``tpu_dist`` alone, or inside a ``"device:backend"`` string, is the
tpu backend only.

The runtime joins the job (``jax.distributed.initialize``) when it starts,
whatever starts it first; see docs/design.md, "Distributed".
"""

import os

import torch
import torch.distributed as dist

from .. import _C

BACKEND = "tpu_dist"
DEFAULT_BACKEND = "tpu_dist_gloo"  # what torch picks for "tpu" (see above)


def _set_collective_timeout(seconds):
    # XLA:CPU reads its flags when its backend starts: a collective whose
    # peers never come then fails after `seconds` instead of waiting forever.
    if _C._runtime_started():
        return
    flags = os.environ.get("XLA_FLAGS", "")
    if "--xla_cpu_collective_timeout_seconds" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_collective_timeout_seconds={max(1, int(seconds))}".strip()


def tpu_is_accelerator() -> bool:
    """tpu is the process's accelerator (torch_tpu holds PrivateUse1's name;
    CUDA is absent). Starts nothing: torch._C._get_accelerator() would start
    the runtime, before a spawned worker has told it its job (join_job)."""
    return not torch.cuda.is_available() and torch._C._get_privateuse1_backend_name() == "tpu"


def _store_address(store):
    """(host, port) of the TCPStore under `store`'s prefixes, or None."""
    while store is not None:
        if isinstance(store, dist.TCPStore):
            return store.host, store.port
        store = getattr(store, "underlying_store", None)
    return None


def join_job(rank, world_size, address=None):
    """A process started without torchrun's variables (torch.multiprocessing.spawn,
    whose function gets its rank as an argument) learns its job from
    init_process_group's arguments, or from its first group of several
    ranks, before the runtime starts: the runtime reads RANK, WORLD_SIZE,
    LOCAL_RANK and the coordinator's address (MASTER_ADDR, MASTER_PORT + 1)
    from the environment when it starts (docs/design.md, "Distributed")."""
    if _C._runtime_started() or "RANK" in os.environ or world_size < 2 or rank < 0:
        return
    os.environ["RANK"] = str(rank)
    os.environ["WORLD_SIZE"] = str(world_size)
    # a node's workers are consecutive ranks (set_tpu_launch_env's
    # LOCAL_WORLD_SIZE); without it, one machine, as spawn starts them
    os.environ.setdefault("LOCAL_RANK", str(rank % int(os.environ.get("LOCAL_WORLD_SIZE") or world_size)))
    if address is not None:  # init_method="tcp://..." sets no MASTER_* variables
        os.environ.setdefault("MASTER_ADDR", str(address[0]))
        os.environ.setdefault("MASTER_PORT", str(address[1]))


def _create_backend(opts, backend_options):
    """The creator torch.distributed calls (extended API) for a tpu_dist group."""
    if not dist.is_initialized():  # the default group: its ranks are the job's
        join_job(opts.group_rank, opts.group_size, _store_address(opts.store))
    timeout = opts.timeout.total_seconds()
    _set_collective_timeout(timeout)
    return _C._distributed.create_backend(
        opts.store, opts.group_rank, opts.group_size, list(opts.global_ranks_in_group), timeout, opts.group_id
    )


def _create_default_group(opts, backend_options):
    """The creator of a ``tpu_dist_gloo`` group: a ProcessGroup with Gloo for
    cpu tensors and tpu_dist for tpu tensors, tpu_dist its default backend."""
    from torch._C._distributed_c10d import PrefixStore, ProcessGroupGloo

    group_store = opts.store.underlying_store  # torch gave us PrefixStore("<device>/", group's store)
    rank, size = opts.group_rank, opts.group_size
    pg = dist.ProcessGroup(group_store, rank, size)
    # A group made again after destroy_process_group() has the same name and,
    # under torchrun, the same store (the agent's), where Gloo would read the
    # addresses its last incarnation published: connection refused, or a
    # hang (torch's own "gloo" fails so). Each incarnation gets its own keys;
    # every member adds before its Gloo waits for the others, so all agree.
    incarnation = (group_store.add("tpu_dist_gloo/incarnations", 1) - 1) // size
    gloo = ProcessGroupGloo(PrefixStore(f"cpu/{incarnation}/", group_store), rank, size, timeout=opts.timeout)
    gloo.options.global_ranks_in_group = list(opts.global_ranks_in_group)
    gloo.options.group_name = opts.group_id
    gloo._set_sequence_number_for_group()
    opts.store = PrefixStore("tpu/", group_store)
    tpu = _create_backend(opts, backend_options)
    pg._set_default_backend(dist.ProcessGroup.BackendType.CUSTOM)
    pg._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, gloo)
    pg._register_backend(torch.device("tpu"), dist.ProcessGroup.BackendType.CUSTOM, tpu)
    return pg


def job_from_env():
    """(active, rank, world_size, local_rank, coordinator) read from the environment."""
    return _C._distributed.job_from_env()


def _register():
    if not dist.is_available() or BACKEND.upper() in dist.Backend._plugins:
        return
    # The first registration for a device becomes its default (torch keeps it).
    dist.Backend.register_backend(DEFAULT_BACKEND, _create_default_group, extended_api=True, devices=["tpu", "cpu"])
    dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True, devices=["tpu"])


_register()

if dist.is_available():
    from . import device_ids as _device_ids

    _device_ids.install()  # DDP and barrier with device_ids=[local_rank], as CUDA scripts write them
    from . import group_args as _group_args

    _group_args.install()  # backend="nccl" and device_id=<local_rank>, as CUDA scripts pass them
