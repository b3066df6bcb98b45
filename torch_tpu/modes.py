"""Execution modes: Strict, Debug and Fused Eager (docs/design.md).

`eager_mode("fused")` sets the mode for the process; used as a context
manager (`with torch_tpu.eager_mode("debug"): ...`) it restores the previous
mode on exit. Leaving fused mode runs the deferred ops. The initial mode comes
from the environment: TPU_LAUNCH_BLOCKING=1 (debug) or TPU_DEFER_AND_FUSE=1
(fused), or the reference backend's TORCH_TPU_LAUNCH_BLOCKING /
TORCH_TPU_DEFER_AND_FUSE; strict otherwise.

The reference backend's names work too: `EagerMode.DEFER_NEVER` ("strict"),
`DEFER_NEVER_AND_LAUNCH_BLOCKING` ("debug"), `DEFER_AND_FUSE` ("fused"),
accepted wherever a mode name is, and `set_eager_mode(m)`.
"""

from __future__ import annotations

import enum

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from . import _C

__all__ = ["EagerMode", "eager_mode", "set_eager_mode", "get_eager_mode", "mark_step", "fusion_stats"]

_MODES = ("strict", "debug", "fused")


class EagerMode(str, enum.Enum):
    """The execution modes under the reference backend's names. Each member
    is equal to our name for it (`EagerMode.DEFER_AND_FUSE == "fused"`)."""

    DEFER_NEVER = "strict"
    DEFER_NEVER_AND_LAUNCH_BLOCKING = "debug"
    DEFER_AND_FUSE = "fused"

    def __str__(self):
        return self.value

    def __call__(self, mode: "str | EagerMode") -> "eager_mode":
        # `torch.tpu.eager_mode` reads as the current EagerMode; calling it
        # keeps our `torch.tpu.eager_mode("fused")` API working.
        return eager_mode(mode)


def get_eager_mode() -> str:
    """The current execution mode: "strict", "debug" or "fused"."""
    return _MODES[_C._get_eager_mode()]


class eager_mode:
    """Sets the execution mode now; as a context manager, restores the
    previous one on exit.

    - "strict": every op is queued on the device as it is called (the
      default); reading a value (.item(), .cpu(), printing) waits.
    - "debug": every op also waits for its result, so a device error is
      raised by the line that caused it.
    - "fused": ops are deferred and run as one compiled program when a value
      is read, at `mark_step()`, at `torch.tpu.synchronize()`, after each
      optimizer step, or every TPU_FUSE_MAX_OPS ops (2000).
    """

    def __init__(self, mode: "str | EagerMode"):
        if isinstance(mode, EagerMode):
            mode = mode.value
        if mode not in _MODES:
            raise ValueError(f"eager_mode: expected one of {', '.join(_MODES)} "
                             f"(or a torch.tpu.EagerMode), got {mode!r}")
        self.prev = get_eager_mode()
        self.mode = mode
        _C._set_eager_mode(_MODES.index(mode))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_eager_mode(_MODES.index(self.prev))
        return False

    def __repr__(self):
        return f"torch_tpu.eager_mode({self.mode!r})"


set_eager_mode = eager_mode  # the reference backend's name: same setter / context manager


def mark_step() -> None:
    """Runs the ops deferred in fused mode (on every device); a no-op in the
    other modes. Call it once per training step when no value is read."""
    _C._mark_step()


def fusion_stats() -> dict:
    """Counters of fused mode: traces run (flushes), ops they held, fused
    programs compiled, cache hits, traces skipped (no live result), ops
    deferred now, buffers donated / copied, and `chained_replays` (compiled
    graph replays appended to a pending trace: one program per training
    step, docs/design.md) and `split_traces` (recurring traces run split
    around the few ops whose programs changed: a decode step over growing
    buffers, docs/design.md "Bounded dynamism")."""
    return _C._fusion_stats()


def _after_optimizer_step(optimizer, args, kwargs):
    # An optimizer step ends a training step: flushing here gives every step
    # the same trace, so its fused program is compiled once. A step compiled
    # by torch.compile already runs as its own fused program; the check keeps
    # Dynamo from breaking the graph on the (untraceable) C call.
    if torch.compiler.is_compiling():
        return
    if _C._get_eager_mode() == 2:
        _C._mark_step()


register_optimizer_step_post_hook(_after_optimizer_step)
