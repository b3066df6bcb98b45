"""XLA's trace under torch.profiler, for `TpuProfilerConfig`
(profiler_config.py).

The reference backend registers a kineto plugin that records the tpu's
activity when torch.profiler runs with the tpu activity and its config.
Ours has no kineto plugin (a C++ one would have to link kineto); the
programs' runs are already RecordFunction ranges in torch.profiler's events
(profiler.py), and XLA's own trace is taken by jax's profiler, as
`torch_tpu.profiler.trace` does. So `install()` wraps torch.profiler's
`start_trace` / `stop_trace` (each recording cycle of a profile, with or
without a schedule): when the profile's `experimental_config` is a
TpuProfilerConfig and its activities include the tpu, jax's profiler
records from the cycle's start to its end, and the XPlane it writes is
moved to `<dir>/<hostname>[_<worker_rank>].xplane.pb` (the reference's
file name). Other profiles are untouched.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import tempfile
import threading


from .profiler import finish_pending

__all__ = ["install"]

_lock = threading.Lock()
_installed = False
_ATTR = "_torch_tpu_xplane_capture"


class _Capture:
    """One recording cycle's XLA trace: started into a private directory,
    then its one .xplane.pb moved to the configured place."""

    def __init__(self, config):
        import jax.profiler

        self.path = os.path.join(config.output_dir(), socket.gethostname() or "localhost")
        self.path += f"_{config.worker_rank}.xplane.pb" if config.worker_rank is not None else ".xplane.pb"
        options = jax.profiler.ProfileOptions()
        options.host_tracer_level = config.host_tracer_level
        options.python_tracer_level = config.python_tracer_level
        if config.experimental_options:
            options.advanced_configuration = dict(config.experimental_options)
        self._tmp = tempfile.mkdtemp(prefix="torch_tpu_xplane_")
        finish_pending()
        try:
            jax.profiler.start_trace(self._tmp, profiler_options=options)
        except RuntimeError as exc:
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise RuntimeError("cannot start the tpu trace of this torch.profiler profile: another "
                               "XLA trace is running (torch_tpu.profiler.trace, jax.profiler or "
                               "another profile with a TpuProfilerConfig); one at a time") from exc

    def finish(self) -> str:
        import jax.profiler

        try:
            finish_pending()
        finally:
            jax.profiler.stop_trace()
        try:
            written = glob.glob(os.path.join(self._tmp, "plugins", "profile", "*", "*.xplane.pb"))
            if len(written) != 1:
                raise RuntimeError(f"XLA's profiler wrote {len(written)} trace files, expected one")
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            shutil.move(written[0], self.path)
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)
        return self.path


def _wants_capture(prof) -> bool:
    from torch.profiler import ProfilerActivity

    from .profiler_config import TpuProfilerConfig

    return (isinstance(getattr(prof, "experimental_config", None), TpuProfilerConfig)
            and ProfilerActivity.PrivateUse1 in (getattr(prof, "activities", None) or ()))


def install() -> None:
    """Wraps torch.profiler's trace start and stop (once per process)."""
    global _installed
    with _lock:
        if _installed:
            return
        from torch.profiler.profiler import _KinetoProfile

        start, stop = _KinetoProfile.start_trace, _KinetoProfile.stop_trace

        def start_trace(self) -> None:
            capture = _Capture(self.experimental_config) if _wants_capture(self) else None
            try:
                start(self)
            except BaseException:
                if capture is not None:
                    capture.finish()
                raise
            setattr(self, _ATTR, capture)

        def stop_trace(self) -> None:
            try:
                stop(self)
            finally:
                capture = self.__dict__.pop(_ATTR, None)
                if capture is not None:
                    capture.finish()

        start_trace.__wrapped__, stop_trace.__wrapped__ = start, stop
        _KinetoProfile.start_trace, _KinetoProfile.stop_trace = start_trace, stop_trace
        _installed = True
