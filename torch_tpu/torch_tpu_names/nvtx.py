"""`torch.tpu.nvtx`, as torch.cuda.nvtx, for scripts written for CUDA
(torch.tpu's `__path__` is this folder; torch_tpu/device_module.py).

A tpu has no NVTX, so the ranges are torch.profiler's: each is a
RecordFunction range (what `torch.autograd.profiler.record_function`
opens), named by its message, and shows in `prof.key_averages()` and the
exported trace beside the tpu programs run inside it. While no profiler is
on, a call records nothing and costs one check of the profiler's flag
(plus the bookkeeping that keeps push/pop depths right).

`range_push` / `range_pop` keep one stack per thread and return zero-based
depths as NVTX does; `range_pop` with nothing pushed returns -1 (NVTX's
error value) rather than raising. `range_start` / `range_end` may start and
end on different threads. `mark` records a zero-length range.
"""

from __future__ import annotations

import itertools
import threading
from contextlib import contextmanager

import torch

__all__ = ["range_push", "range_pop", "range_start", "range_end", "mark", "range"]

_profiler_enabled = torch.autograd._profiler_enabled
_local = threading.local()
_ids = itertools.count(1)  # next() on a count is atomic under the GIL
_started: dict[int, object] = {}  # range_start's open ranges, by id


def _begin(msg) -> object:
    """A RecordFunction range named msg, open, or None without a profiler."""
    if not _profiler_enabled():
        return None
    return torch.ops.profiler._record_function_enter_new(str(msg), None)


def _end(handle) -> None:
    if handle is not None:
        with torch._C.DisableTorchFunctionSubclass():
            torch.ops.profiler._record_function_exit._RecordFunction(handle)


def _stack() -> list:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def range_push(msg) -> int:
    """Opens a nested range named msg on this thread; returns its zero-based depth."""
    stack = _stack()
    stack.append(_begin(msg))
    return len(stack) - 1


def range_pop() -> int:
    """Closes this thread's innermost range; returns its zero-based depth,
    or -1 if none is open."""
    stack = _stack()
    if not stack:
        return -1
    _end(stack.pop())
    return len(stack)


def range_start(msg) -> int:
    """Opens a range named msg that range_end(id) closes, on any thread;
    returns its id."""
    range_id = next(_ids)
    handle = _begin(msg)
    if handle is not None:
        _started[range_id] = handle
    return range_id


def range_end(range_id) -> None:
    """Closes the range range_start returned range_id for (an unknown id is ignored)."""
    _end(_started.pop(range_id, None))


def mark(msg) -> None:
    """An instant event named msg: a zero-length range."""
    _end(_begin(msg))


@contextmanager
def range(msg, *args, **kwargs):
    """Context manager / decorator: a range named `msg.format(*args, **kwargs)`
    around its block or function."""
    range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        range_pop()
