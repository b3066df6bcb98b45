"""`torch.tpu.profiler.TpuProfilerConfig`: the reference backend's options
for a tpu trace taken by torch.profiler, passed as its
`experimental_config`:

    with torch.profiler.profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.TPU],
            experimental_config=TpuProfilerConfig(run_dir="/tmp/prof")):
        ...

It is a `torch.profiler._ExperimentalConfig` carrying the options as the
reference's `custom_profiler_config` string (`key:value,...`), and keeps
them parsed for profiler_capture.py, which takes XLA's trace (XPlane)
while such a profile with the tpu activity runs and writes it to
`<dir>/<hostname>[_<worker_rank>].xplane.pb`: `run_dir`, else
$TORCH_TPU_PROFILER_OUTPUT_DIR, else $TMPDIR, else /tmp.

On XLA:CPU the levels mean: `host_tracer_level` and `python_tracer_level`
are XLA's (jax.profiler.ProfileOptions'); `device_tracer_level` has no
device tracer to set (the programs' runs are host events); experimental
options go to XLA's profiler as its `advanced_configuration`, and
`check_experimental_options` is kept but XLA:CPU's profiler checks no key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import torch

__all__ = ["TpuProfilerConfig"]

# The reference's option keys; experimental options may not reuse them.
_STABLE_KEYS = frozenset({"check_experimental_options", "device_tracer_level", "host_tracer_level",
                          "python_tracer_level", "run_dir", "worker_rank"})


def _quote(value: int | bool | str) -> str:
    """A value in the config string: strings quoted with backslash escapes,
    booleans as true/false, ints as digits."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _check_level(name: str, value, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise ValueError(f"{name} must be an int in [0, {high}], got {value!r}")
    return value


class TpuProfilerConfig(torch.profiler._ExperimentalConfig):
    """Options of a tpu trace under torch.profiler (see the module
    docstring): tracer levels (host 0-3, device 0-1, python 0-1), the
    output directory, the worker rank naming the file, and experimental
    options (int, bool or str values) passed to XLA's profiler."""

    def __init__(self, *, host_tracer_level: int = 2, device_tracer_level: int = 1,
                 python_tracer_level: int = 0, run_dir: os.PathLike[str] | str | None = None,
                 worker_rank: str | None = None,
                 experimental_options: Mapping[str, int | bool | str] | None = None,
                 check_experimental_options: bool = True):
        _check_level("host_tracer_level", host_tracer_level, 3)
        _check_level("device_tracer_level", device_tracer_level, 1)
        _check_level("python_tracer_level", python_tracer_level, 1)
        if worker_rank is not None:
            if not isinstance(worker_rank, str):
                raise TypeError(f"worker_rank must be a string, got {type(worker_rank).__name__}")
            if any(c in worker_rank for c in ":,/\\"):
                raise ValueError(f"worker_rank cannot contain ':', ',' or a path separator: {worker_rank!r}")
        options = dict(experimental_options or {})
        for key, value in options.items():
            if not isinstance(key, str) or key in _STABLE_KEYS or ":" in key or "," in key:
                raise ValueError(f"bad experimental option key {key!r}: a string without ':' or ',' "
                                 "that is not one of the named options")
            if not isinstance(value, (int, bool, str)):
                raise TypeError(f"experimental option {key!r} must be an int, bool or str, "
                                f"got {type(value).__name__}")
        run_dir = os.fspath(run_dir) if run_dir is not None else None

        parts = [f"host_tracer_level:{host_tracer_level}", f"device_tracer_level:{device_tracer_level}",
                 f"python_tracer_level:{python_tracer_level}"]
        if run_dir is not None:
            parts.append(f"run_dir:{run_dir}")
        if worker_rank is not None:
            parts.append(f"worker_rank:{_quote(worker_rank)}")
        if options:
            parts += [f"{k}:{_quote(v)}" for k, v in options.items()]
            parts.append(f"check_experimental_options:{str(bool(check_experimental_options)).lower()}")
        super().__init__(custom_profiler_config=",".join(parts))
        self.host_tracer_level, self.device_tracer_level = host_tracer_level, device_tracer_level
        self.python_tracer_level, self.run_dir, self.worker_rank = python_tracer_level, run_dir, worker_rank
        self.experimental_options, self.check_experimental_options = options, check_experimental_options

        from . import profiler_capture

        profiler_capture.install()  # torch.profiler takes the trace from now on

    def output_dir(self) -> str:
        """Where the trace goes: `run_dir`, else $TORCH_TPU_PROFILER_OUTPUT_DIR,
        else $TMPDIR, else /tmp (read when a trace starts)."""
        return (self.run_dir or os.environ.get("TORCH_TPU_PROFILER_OUTPUT_DIR")
                or os.environ.get("TMPDIR") or "/tmp")

    def __repr__(self) -> str:
        return f"TpuProfilerConfig({self.custom_profiler_config!r})"
