"""`torch.tpu`: the device module, a drop-in for the parts of `torch.cuda`
that a training script uses."""

from __future__ import annotations

import enum
import importlib
import os
import sys
import types
from typing import Any

import torch

from . import _C

__all__ = [
    "is_available", "device_count", "current_device", "set_device", "device", "device_of",
    "synchronize", "get_device_name", "get_device_properties", "manual_seed",
    "manual_seed_all", "seed", "initial_seed", "get_rng_state", "set_rng_state", "default_generators",
    "memory_allocated", "max_memory_allocated", "memory_reserved",
    "max_memory_reserved", "memory_stats", "empty_cache",
    "reset_peak_memory_stats", "reset_accumulated_memory_stats", "memory_summary", "is_initialized", "init",
    "memory_stats_as_nested_dict", "reset_max_memory_allocated", "reset_max_memory_cached", "memory_cached",
    "max_memory_cached", "ipc_collect", "set_sync_debug_mode", "get_sync_debug_mode",
    "is_bf16_supported", "seed_all", "platform",
    "set_per_process_memory_fraction", "get_per_process_memory_fraction", "mem_get_info", "OutOfMemoryError",
    "get_amp_supported_dtype", "amp", "precision", "get_precision", "Precision",
    "Stream", "Event", "current_stream", "default_stream", "set_stream", "stream", "StreamContext",
    "eager_mode", "get_eager_mode", "set_eager_mode", "EagerMode", "mark_step",
    "compile_cache_stats", "clear_compile_cache", "pallas", "topology_aware_mesh",
    "is_current_stream_capturing", "random", "nvtx",
    "BFloat16Tensor", "BoolTensor", "ByteTensor", "CharTensor", "DoubleTensor",
    "FloatTensor", "HalfTensor", "IntTensor", "LongTensor", "ShortTensor",
]

from .amp import get_amp_supported_dtype  # noqa: E402
from . import amp  # noqa: E402
from . import modes as _modes  # noqa: E402
from . import xla_options as _xla_options  # noqa: E402
from .modes import EagerMode, get_eager_mode, mark_step, set_eager_mode  # noqa: E402
from .streams import (  # noqa: E402
    Event, Stream, StreamContext, current_stream, default_stream, set_stream, stream,
)
from .legacy_tensor_types import (  # noqa: E402
    BFloat16Tensor, BoolTensor, ByteTensor, CharTensor, DoubleTensor,
    FloatTensor, HalfTensor, IntTensor, LongTensor, ShortTensor,
)


def is_current_stream_capturing() -> bool:
    """False: a tpu stream is never being captured into a graph, as torch.cuda's
    answer outside CUDA graph capture (torch.compile's replay is how a tpu
    program is captured, docs/design.md "Capture and replay")."""
    return False


OutOfMemoryError = torch.OutOfMemoryError


def _named_index(device: Any = None) -> int:
    """The index `device` names, as given (-1 for the current device)."""
    if device is None:
        return -1
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "tpu":
            raise ValueError(f"expected a tpu device, got {device}")
        return -1 if device.index is None else device.index
    if isinstance(device, int):
        return device
    raise TypeError(f"expected a device, int or str, got {type(device).__name__}")


def _index(device: Any = None) -> int:
    index = _named_index(device)
    if index < 0:
        return _C._current_device()
    # In a job the local rank also names tpu:0, as cuda:LOCAL_RANK a
    # process's GPU (own_index in csrc/device/guard.h).
    return index if index == 0 else _C._own_index(index)


def _get_device_index(device: Any, optional: bool = False, allow_cpu: bool = False) -> int:
    """torch.cuda._utils._get_device_index for tpu, with the local rank naming
    tpu:0 in a job. torch.load asks `torch.tpu._utils` for it, so
    `map_location=f"tpu:{local_rank}"` loads onto this process's device."""
    index = torch._utils._get_device_index(device, optional, allow_cpu)
    return index if index <= 0 else _C._own_index(index)


_utils = types.SimpleNamespace(_get_device_index=_get_device_index)


def topology_aware_mesh(mesh_shape, dcn_mesh_shape=None, *, mesh_dim_names=None):
    """A DeviceMesh("tpu") laid out on the chips' interconnect (torch_tpu/distributed/mesh.py)."""
    from .distributed.mesh import topology_aware_mesh as make

    return make(mesh_shape, dcn_mesh_shape, mesh_dim_names=mesh_dim_names)


def is_available() -> bool:
    try:
        return _C._device_count() > 0
    except Exception:  # XLA could not start: no device, not a crash
        return False


def is_initialized() -> bool:
    return _C._runtime_started()


def init() -> None:
    """Starts the runtime now instead of at the first device use (as
    torch.cuda.init); does nothing once started."""
    _C._device_count()


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """bfloat16 is native on TPU and GPU; XLA:CPU computes it through float32,
    which counts only with `including_emulation` (as torch.cuda's)."""
    return including_emulation or platform() != "cpu"


def device_count() -> int:
    return _C._device_count()


def current_device() -> int:
    return _C._current_device()


def set_device(device: Any) -> None:
    # The index as named: a spawned worker's set_device(rank) must not start
    # the runtime before init_process_group tells it the job (guard.cpp).
    index = _named_index(device)
    if index >= 0:
        _C._set_device(index)


class device:
    """Context manager that makes `device` the current tpu device."""

    def __init__(self, device: Any):
        self.idx = -1 if device is None else _index(device)
        self.prev = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev = _C._current_device()
            _C._set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0:
            _C._set_device(self.prev)
        return False


class device_of(device):
    """Context manager that makes the device of tensor `obj` current when it
    is a tpu tensor (as torch.cuda.device_of); does nothing otherwise."""

    def __init__(self, obj: torch.Tensor):
        super().__init__(obj.get_device() if obj.device.type == "tpu" else -1)


def synchronize(device: Any = None) -> None:
    """Waits for every program queued on the device."""
    _C._synchronize(_index(device))


_SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode: int | str) -> None:
    """As torch.cuda's: "default" (0) does nothing, "warn" (1) warns and
    "error" (2) raises where an op makes the host wait for the device: a
    copy to the host (`.cpu()`, `.tolist()`, printing; also with
    `non_blocking=True`, which waits here), `item()`, and ops whose result's
    shape depends on the data (`nonzero`, boolean-mask indexing). Explicit
    `torch.tpu.synchronize()` is not reported."""
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_DEBUG_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = _SYNC_DEBUG_MODES[debug_mode]
    _C._set_sync_debug_mode(int(debug_mode))


def get_sync_debug_mode() -> int:
    return _C._get_sync_debug_mode()


def platform() -> str:
    """The XLA platform behind the tpu devices: "tpu", "gpu" or "cpu"."""
    return _C._platform()[0]


def get_device_name(device: Any = None) -> str:
    _index(device)
    plat, kind, virtual = _C._platform()
    if virtual:
        return f"virtual TPU on XLA:CPU ({kind})"
    return kind


class _DeviceProperties:
    def __init__(self, name: str, total_memory: int, index: int):
        self.name = name
        self.total_memory = total_memory
        self.index = index

    def __repr__(self):
        return f"_TpuDeviceProperties(name='{self.name}', total_memory={self.total_memory // (1 << 20)}MB)"


def get_device_properties(device: Any = None) -> _DeviceProperties:
    idx = _index(device)
    return _DeviceProperties(get_device_name(idx), _total_memory(idx), idx)


def _host_memory_bytes() -> int:
    import os

    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


# ---- random numbers -------------------------------------------------------

def _is_in_bad_fork() -> bool:
    # A child forked after the parent started the runtime cannot use it
    # (runtime::get raises there); a child forked before starts its own.
    return _C._in_bad_fork()


def _generator(device: Any = None) -> torch.Generator:
    return _C._default_generator(_index(device))


def manual_seed(seed: int) -> None:
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    # Does not start XLA: generators made later take the seed too.
    _C._manual_seed_all(int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def seed() -> None:
    _generator().seed()


def seed_all() -> None:
    """One random seed for every device (as torch.cuda.seed_all)."""
    _generator(0).seed()
    manual_seed_all(_generator(0).initial_seed())


def initial_seed() -> int:
    return _generator().initial_seed()


def get_rng_state(device: Any = "tpu") -> torch.Tensor:
    return _generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "tpu") -> None:
    _generator(device).set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for i, s in enumerate(new_states):
        set_rng_state(s, i)


# ---- memory ---------------------------------------------------------------

# The device memory limit: TORCH_TPU_HBM_BYTES (default half the host's
# memory on XLA:CPU). Allocations past it raise torch.OutOfMemoryError.
_total_limits: dict[int, int] = {}
_fractions: dict[int, float] = {}


def _total_memory(idx: int) -> int:
    if idx not in _total_limits:
        _total_limits[idx] = _C._memory_stats(idx)["limit"]
    return _total_limits[idx]


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    """Limits this process to `fraction` of the device memory (as
    torch.cuda.set_per_process_memory_fraction)."""
    idx = _index(device)
    if not isinstance(fraction, (int, float)):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    total = _total_memory(idx)
    _fractions[idx] = float(fraction)
    _C._set_memory_limit(idx, int(total * fraction))


def get_per_process_memory_fraction(device: Any = None) -> float:
    return _fractions.get(_index(device), 1.0)


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of the device, as torch.cuda.mem_get_info."""
    idx = _index(device)
    s = _C._memory_stats(idx)
    return max(s["limit"] - s["allocated_bytes.all.current"], 0), _total_memory(idx)


def memory_stats(device: Any = None) -> dict[str, int]:
    """CUDA-style counters. Reserved is allocated plus the freed buffers kept
    for reuse (empty_cache() releases them)."""
    idx = _index(device)
    raw = _C._memory_stats(idx)
    cur, peak = raw["allocated_bytes.all.current"], raw["allocated_bytes.all.peak"]
    kept = _C._recycled_bytes(idx)
    stats = {
        "allocated_bytes.all.current": cur,
        "allocated_bytes.all.peak": peak,
        "allocated_bytes.all.allocated": raw["allocated_bytes.all.allocated"],
        "allocated_bytes.all.freed": raw["allocated_bytes.all.freed"],
        "allocation.all.current": raw["allocation.all.current"],
        "allocation.all.allocated": raw["allocation.all.allocated"],
        "allocation.all.freed": raw["allocation.all.freed"],
        "reserved_bytes.all.current": cur + kept,
        "reserved_bytes.all.peak": peak,
        "active_bytes.all.current": cur,
        "active_bytes.all.peak": peak,
        "num_ooms": raw["num_ooms"],
        "num_alloc_retries": 0,
    }
    return dict(sorted(stats.items()))


def memory_allocated(device: Any = None) -> int:
    return _C._memory_stats(_index(device))["allocated_bytes.all.current"]


def max_memory_allocated(device: Any = None) -> int:
    return _C._memory_stats(_index(device))["allocated_bytes.all.peak"]


def memory_reserved(device: Any = None) -> int:
    """Allocated memory plus freed buffers kept for fused programs to write
    their large results into (empty_cache() releases those)."""
    return memory_allocated(device) + _C._recycled_bytes(_index(device))


def max_memory_reserved(device: Any = None) -> int:
    return max_memory_allocated(device)


def reset_peak_memory_stats(device: Any = None) -> None:
    _C._reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    _C._reset_accumulated_memory_stats(_index(device))


def memory_stats_as_nested_dict(device: Any = None) -> dict[str, Any]:
    """memory_stats() nested at each "." ({"allocated_bytes": {"all": {...}}}),
    as torch.cuda's."""
    nested: dict[str, Any] = {}
    for key, value in memory_stats(device).items():
        *path, last = key.split(".")
        node = nested
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return nested


# torch.cuda's older names, which CUDA scripts still call.
def reset_max_memory_allocated(device: Any = None) -> None:
    reset_peak_memory_stats(device)


reset_max_memory_cached = reset_max_memory_allocated
memory_cached = memory_reserved
max_memory_cached = max_memory_reserved


def ipc_collect() -> None:
    """Nothing to collect: a tpu tensor sent to another process travels as a
    copy (torch_tpu/process_sharing.py), so no device memory waits for other
    processes to let go of it."""


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """memory_stats() as a readable table (as torch.cuda.memory_summary;
    `abbreviated` is accepted for it and changes nothing: there are no
    per-pool rows to leave out)."""
    del abbreviated
    idx = _index(device)
    st = memory_stats(idx)

    def size(n: int) -> str:
        for unit in ("B", "KiB", "MiB", "GiB"):
            if abs(n) < 1024 or unit == "GiB":
                return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
            n /= 1024

    def row(name: str, key: str, fmt) -> str:
        cells = [fmt(st[f"{key}.all.{c}"]) if f"{key}.all.{c}" in st else "-"
                 for c in ("current", "peak", "allocated", "freed")]
        return f"| {name:<20}" + "".join(f"| {c:>14} " for c in cells) + "|"

    rule = "|" + "=" * 21 + ("|" + "=" * 16) * 4 + "|"
    lines = [
        rule,
        f"| torch_tpu memory summary, device {idx} ({get_device_name(idx)}, limit {size(_total_memory(idx))})",
        rule,
        f"| {'':<20}" + "".join(f"| {c:>14} " for c in ("Current", "Peak", "Tot. alloc", "Tot. freed")) + "|",
        rule,
        row("Allocated memory", "allocated_bytes", size),
        row("Active memory", "active_bytes", size),
        row("Reserved memory", "reserved_bytes", size),
        row("Allocations", "allocation", str),
        rule,
        f"| OOMs: {st['num_ooms']}",
        rule,
    ]
    return "\n".join(lines) + "\n"


def empty_cache() -> None:
    """Releases the freed buffers kept for reuse: large buffers (64 KiB and
    up, TORCH_TPU_RECYCLE_BYTES in all, default 2 GiB on XLA:CPU and none on
    accelerators) that fused programs write results of the same type into
    instead of fresh memory."""
    _C._empty_cache()


# ---- compilation caches ----------------------------------------------------

def compile_cache_stats() -> dict[str, Any]:
    """Counters of this process's compilation caches.

    Persistent (disk) cache, TORCH_TPU_CACHE_DIR: `hits` (programs loaded
    instead of compiled), `misses`, `corrupt` (damaged entries removed and
    rebuilt), `stores`, `store_errors`, `evicted` (past the size cap
    `max_bytes`), `load_seconds`, and `entries` / `bytes` on disk now, `dir`,
    `enabled`. In-memory program cache:
    `program_hits`, `program_misses`, `programs`; `host_fills`: whole-tensor
    constant fills (zeros, ones, full, `zero_`) made on the host, with no
    program. XLA: `compiles` and
    `compile_seconds` (time spent compiling, not loading)."""
    stats = dict(_C._compile_cache_stats())
    programs, hits, misses = _C._program_cache_stats()
    stats.update(programs=programs, program_hits=hits, program_misses=misses, host_fills=_C._host_fills(),
                 compiles=_C._compile_count(), compile_seconds=_C._compile_seconds())
    return stats


def clear_compile_cache() -> int:
    """Deletes the compiled programs stored in TORCH_TPU_CACHE_DIR (only this
    cache's own files) and returns how many files were removed. Programs
    already loaded in this process stay usable."""
    return _C._clear_compile_cache()


# ---- fp32 matmul precision -------------------------------------------------

class Precision(str, enum.Enum):
    """TPU matmul precision for float32 inputs: DEFAULT (one bfloat16 pass),
    HIGH (three bfloat16 passes), HIGHEST (float32). Each member equals its
    name, so `precision(Precision.HIGH)` and `precision("HIGH")` are one."""

    DEFAULT = "DEFAULT"
    HIGH = "HIGH"
    HIGHEST = "HIGHEST"


_TO_TORCH = {"DEFAULT": "medium", "HIGH": "high", "HIGHEST": "highest"}
_FROM_TORCH = {v: k for k, v in _TO_TORCH.items()}


def get_precision() -> str:
    """The current fp32 matmul precision ("DEFAULT", "HIGH" or "HIGHEST");
    torch.get_float32_matmul_precision() under TPU names."""
    return _FROM_TORCH[torch.get_float32_matmul_precision()]


def _set_precision(value: str) -> None:
    if not isinstance(value, str) or value.upper() not in _TO_TORCH:
        raise ValueError(f"torch.tpu.precision: expected one of DEFAULT, HIGH, HIGHEST, got {value!r}")
    torch.set_float32_matmul_precision(_TO_TORCH[str.upper(value)])


class precision:
    """Sets the fp32 matmul precision, for good or for a `with` block:

        torch.tpu.precision("DEFAULT")          # from now on
        with torch.tpu.precision("HIGHEST"):    # inside the block only
            ...

    It is PyTorch's float32 matmul precision: torch.set_float32_matmul_precision
    ("medium" = DEFAULT, "high" = HIGH, "highest" = HIGHEST) sets the same."""

    def __init__(self, value: str):
        self.prev = get_precision()
        _set_precision(value)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _set_precision(self.prev)
        return False



# ---- module properties -------------------------------------------------------

# torch.tpu's submodules (the reference's `torch.tpu.distributed`), so that
# `import torch.tpu.distributed` and `python -m torch.tpu.distributed` work.
__path__ = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_tpu_names")]


# The reference's submodules of torch.tpu, each a file in torch_tpu_names/.
# `random` and `nvtx` are torch.cuda's, for scripts written for CUDA.
_SUBMODULES = ("distributed", "compiler", "ops", "optimizers", "pallas", "profiler", "random", "nvtx")


def __getattr__(name: str):
    # `torch.tpu.ops.ragged_dot(...)` without importing torch.tpu.ops first.
    if name in _SUBMODULES:
        return importlib.import_module(f"torch.tpu.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _DeviceModule(types.ModuleType):
    """`torch.tpu`'s module type: a few of the reference backend's names are
    properties, computed when read (so importing starts no device)."""

    @property
    def eager_mode(self) -> EagerMode:
        """The current mode as an EagerMode (equal to "strict", "debug" or
        "fused"). Assigning sets it: `torch.tpu.eager_mode = EagerMode.DEFER_AND_FUSE`.
        Calling it sets a mode too, and restores the previous one when used as
        a context manager: `with torch.tpu.eager_mode("fused"): ...`."""
        return EagerMode(get_eager_mode())

    @eager_mode.setter
    def eager_mode(self, mode: "str | EagerMode") -> None:
        _modes.eager_mode(mode)

    @property
    def allow_excess_precision(self) -> bool:
        """Whether XLA may compute in a wider type than a program says
        (torch_tpu/xla_options.py). Assigning True or False sets it for
        every later compile; None restores the default."""
        return _xla_options.get_allow_excess_precision()

    @allow_excess_precision.setter
    def allow_excess_precision(self, value: "bool | None") -> None:
        _xla_options.set_allow_excess_precision(value)

    @property
    def _initialized(self) -> bool:
        """torch.cuda's flag, read by torch.utils.checkpoint: only when it is
        true does checkpointing stash the device's RNG state and restore it for
        the recomputation. Without it, dropout under activation checkpointing
        drew a new mask in the recomputed forward: silently wrong gradients."""
        return _C._runtime_started()

    @property
    def default_generators(self) -> tuple[torch.Generator, ...]:
        """Each device's default generator, as torch.cuda.default_generators."""
        return tuple(_C._default_generator(i) for i in range(device_count()))


sys.modules[__name__].__class__ = _DeviceModule
