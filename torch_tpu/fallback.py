"""The opt-in CPU fallback (docs/design.md, "CPU fallback").

An op with no tpu lowering raises NotImplementedError by default. With the
fallback on (`torch_tpu.cpu_fallback(True)`, or TORCH_TPU_CPU_FALLBACK=1 in
the environment) it runs on the CPU instead: PyTorch's own
at::native::cpu_fallback copies its tensors to the host, runs the CPU
kernel and copies the results back (in-place and out= results are written
through the original tensors, views included). The first call of each such
op warns (a UserWarning); `cpu_fallback_stats()` counts the calls per op.
"""

from __future__ import annotations

from . import _C

__all__ = ["cpu_fallback", "cpu_fallback_enabled", "cpu_fallback_stats", "reset_cpu_fallback_stats"]


def cpu_fallback_enabled() -> bool:
    """Whether ops without a lowering run on the CPU."""
    return _C._cpu_fallback_enabled()


class cpu_fallback:
    """Turns the CPU fallback on (or off) now; as a context manager,
    restores the previous setting on exit."""

    def __init__(self, enabled: bool = True):
        self.prev = _C._cpu_fallback_enabled()
        self.enabled = bool(enabled)
        _C._set_cpu_fallback(self.enabled)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_cpu_fallback(self.prev)
        return False

    def __repr__(self):
        return f"torch_tpu.cpu_fallback({self.enabled})"


def cpu_fallback_stats() -> dict:
    """{"aten::op.overload": calls} for every op that ran on the CPU."""
    return dict(_C._cpu_fallback_stats())


def reset_cpu_fallback_stats() -> None:
    """Clears the counts (each op warns again on its next fallback)."""
    _C._reset_cpu_fallback_stats()
