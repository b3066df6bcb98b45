"""Profiling tpu work.

`torch.profiler` needs nothing from here: every program the runtime runs (a
Strict Eager op, a fused trace, a replayed graph) is a RecordFunction range
named `tpu: <op>` or `tpu: fused program of N ops: ...`
(csrc/runtime/profiling.h), so `torch.profiler.profile(activities=[
ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])` shows it in
`key_averages().table()` and in the exported Chrome trace, beside the CPU
ops and inside `record_function` ranges. While a profiler is on, each range
waits for its program's outputs, so its length is the program's device time
(execution stays asynchronous when no profiler is on; the check costs one
thread-local read per program).

PyTorch's fallback route for a device without a kineto plugin
(`torch.autograd.profiler.profile(use_device="tpu", use_kineto=False)`)
also fills per-op "TPU" time columns from csrc/device/profiler_stubs.cpp.

`trace(logdir)` also records XLA's own trace (jax's profiler: the XLA
client's executions, compiles and transfers) for XProf / TensorBoard
(`tensorboard --logdir logdir`, or `xprof logdir`).
"""

from __future__ import annotations

import contextlib

import torch

__all__ = ["trace"]


def finish_pending() -> None:
    """Waits for the tpu work issued so far (none before the device starts),
    so that an XLA trace started or stopped now holds exactly what ran in
    between (trace() here, profiler_capture.py's torch.profiler cycles)."""
    if torch.tpu.is_initialized():
        torch.tpu.synchronize()


@contextlib.contextmanager
def trace(logdir: str, create_perfetto_link: bool = False):
    """Context manager: XLA's trace of everything run inside, written under
    `logdir/plugins/profile/<run>/` (`*.xplane.pb`). Pending tpu work is
    finished on entry and on exit, so the trace holds exactly the block."""
    import jax

    finish_pending()
    with jax.profiler.trace(logdir, create_perfetto_link=create_perfetto_link):
        try:
            yield
        finally:
            finish_pending()
