"""`torch.tpu.profiler`, the reference backend's profiler options
(torch.tpu's `__path__` is this folder; torch_tpu/device_module.py):
`TpuProfilerConfig`, torch.profiler's `experimental_config` for a tpu trace
(torch_tpu/profiler_config.py). Our own `torch_tpu.profiler.trace` is in
torch_tpu/profiler.py."""

from torch_tpu.profiler_config import TpuProfilerConfig  # noqa: F401

__all__ = ["TpuProfilerConfig"]
