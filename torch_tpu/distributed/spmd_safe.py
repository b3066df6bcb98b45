"""`torch.tpu.distributed.spmd_safe`, the reference backend's decorator for
code that every rank runs alike (the same ops and collectives, in the same
order, on the same shapes).

The reference runs an eager collective in a graph of its own unless the
code around it is marked safe, when it may fuse with its neighbours. Here
an eager collective in Fused Eager always runs its pending trace first and
then runs as its own program (docs/design.md, Distributed, "Program
order and Fused Eager"): that is always deadlock-free, so the mark changes no result and
nothing is fused across it. The decorator keeps its other effect: the
function's work starts in a trace of its own, and its results' ops do not
join the caller's later ops. Under torch.compile it adds nothing to the
graph."""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import torch

from ..modes import mark_step

_F = TypeVar("_F", bound=Callable[..., Any])


def spmd_safe(func: _F) -> _F:
    """Marks `func` as run identically on every rank; returns a wrapper with
    its signature and result."""
    if not callable(func):
        raise TypeError(f"torch.tpu.distributed.spmd_safe decorates a function, got {type(func).__name__}")

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():
            return func(*args, **kwargs)
        mark_step()  # a no-op before the device starts
        result = func(*args, **kwargs)
        mark_step()
        return result

    return wrapper  # type: ignore[return-value]
