"""`torch_tpu.estimate(fn, *args, chip="v5e")`: a roofline projection of a
step on a TPU chip from XLA's own cost analysis of the programs it runs.

The step runs once in Fused Eager with program recording on
(runtime/profiling.h): every trace it flushes (a fused program, a one-op
program, a compiled graph's program) is kept as StableHLO text. Each is
compiled by jax's client for this machine and XLA's `cost_analysis()` gives
its flops and bytes accessed. A program's projected time is
`max(flops / peak FLOP/s, bytes / HBM bandwidth)`; the step's is their sum.
MFU is the step's flops over (projected time x peak). Memory fit compares the
largest program's footprint (arguments + outputs + temporaries, XLA's
compiled memory stats) with the chip's HBM.

Beside the chip figures, the same roofline is computed for this machine with
its peak matmul FLOP/s and read bandwidth *measured* (XLA:CPU here), and the
step is timed, so `host_ratio` (projected / measured) says how far the
roofline is from reality on hardware we can measure; `reference_ratio` is the
same ratio for a fixed reference model (a two-layer MLP training step).
A ratio near 1 means the step is bound by what the roofline counts; well
below 1 means overheads it ignores (dispatch, small ops, layout) dominate.

Caveats: cost analysis counts flops and bytes of XLA:CPU's compiled program
(fusion decisions differ on TPU, so bytes are approximate); peaks are bf16;
float32 matmuls on TPU run as bf16 passes at DEFAULT precision.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any, Callable, Optional

import torch

from . import _C

__all__ = ["estimate", "Estimate", "CHIPS"]

# Published per-chip figures (bf16 peak, HBM bandwidth, HBM capacity).
CHIPS = {
    "v5e": dict(peak_flops=197e12, hbm_bytes_per_s=819e9, hbm_bytes=16 * 2**30,
                source="https://cloud.google.com/tpu/docs/v5e (197 TFLOP/s bf16, 819 GB/s, 16 GiB HBM2e)"),
    "v6e": dict(peak_flops=918e12, hbm_bytes_per_s=1640e9, hbm_bytes=32 * 2**30,
                source="https://cloud.google.com/tpu/docs/v6e (918 TFLOP/s bf16, 1640 GB/s, 32 GiB HBM)"),
    "v7x": dict(peak_flops=2307e12, hbm_bytes_per_s=7380e9, hbm_bytes=192 * 2**30,
                source="https://cloud.google.com/tpu/docs/tpu7x (2307 TFLOP/s bf16, 7380 GB/s, 192 GiB HBM "
                       "per chip of two TensorCores)"),
}


@dataclasses.dataclass
class ProgramCost:
    what: str
    flops: float
    bytes_accessed: float
    memory_bytes: int  # arguments + outputs + temporaries


@dataclasses.dataclass
class Estimate:
    chip: str
    flops: float                 # the step's flops (all programs)
    bytes_accessed: float
    projected_s: float           # roofline time on the chip
    mfu: float                   # flops / (projected_s * peak)
    bound: str                   # "compute" or "memory": what bounds most of the projected time
    memory_bytes: int            # largest program footprint
    fits: bool                   # memory_bytes <= the chip's HBM
    programs: list = dataclasses.field(repr=False, default_factory=list)
    # The same on this machine: measured peaks, projected and measured step time.
    host_peak_flops: float = 0.0
    host_bytes_per_s: float = 0.0
    host_projected_s: float = 0.0
    host_measured_s: float = 0.0
    host_ratio: float = 0.0      # host_projected_s / host_measured_s
    reference_ratio: float = 0.0  # the same ratio for the reference MLP step

    def __str__(self) -> str:
        c = CHIPS[self.chip]
        return "\n".join([
            f"torch_tpu.estimate on {self.chip}: {len(self.programs)} programs, {self.flops:.4g} flops, "
            f"{self.bytes_accessed:.4g} bytes accessed",
            f"  projected step {self.projected_s * 1e3:.4g} ms ({self.bound}-bound), MFU {self.mfu:.1%}, "
            f"largest program {self.memory_bytes / 2**20:.1f} MiB of {c['hbm_bytes'] / 2**30:.0f} GiB "
            f"({'fits' if self.fits else 'does NOT fit'})",
            f"  this machine: peak {self.host_peak_flops:.3g} FLOP/s, {self.host_bytes_per_s:.3g} B/s (measured); "
            f"projected {self.host_projected_s * 1e3:.4g} ms, measured {self.host_measured_s * 1e3:.4g} ms, "
            f"ratio {self.host_ratio:.2f} (reference MLP: {self.reference_ratio:.2f})",
            f"  source: {c['source']}",
        ])


def _compile_for_cost(text: str):
    import jax.extend.backend
    import numpy as np
    from jax._src.lib import xla_client as xc

    backend = jax.extend.backend.get_backend()
    device = backend.local_devices()[0]
    options = xc.CompileOptions()
    options.device_assignment = xc.DeviceAssignment.create(np.array([[device.id]], "int32"))
    return backend.compile_and_load(text.encode(), xc.DeviceList((device,)), options)


def program_costs(fn: Callable, *args, **kwargs) -> tuple[Any, list[ProgramCost]]:
    """Runs fn once in Fused Eager and returns (its result, the cost of every
    program it ran)."""
    from . import modes

    prev = modes.get_eager_mode()
    _C._mark_step()
    _C._record_programs(True)
    try:
        with modes.eager_mode("fused"):
            out = fn(*args, **kwargs)
            _C._mark_step()
        recorded = _C._take_recorded_programs()
    finally:
        _C._record_programs(False)
        modes.eager_mode(prev)
    costs = []
    for what, text in recorded:
        exe = _compile_for_cost(text)
        ca = exe.cost_analysis()
        ca = ca[0] if isinstance(ca, (list, tuple)) else ca
        ms = exe.get_compiled_memory_stats()
        mem = ms.argument_size_in_bytes + ms.output_size_in_bytes + ms.temp_size_in_bytes - ms.alias_size_in_bytes
        costs.append(ProgramCost(what, float(ca.get("flops", 0.0)), float(ca.get("bytes accessed", 0.0)), int(mem)))
    return out, costs


def roofline_seconds(costs: list[ProgramCost], peak_flops: float, bytes_per_s: float) -> tuple[float, float]:
    """(projected seconds, seconds of it in compute-bound programs)."""
    total = compute = 0.0
    for c in costs:
        t_c, t_m = c.flops / peak_flops, c.bytes_accessed / bytes_per_s
        total += max(t_c, t_m)
        if t_c >= t_m:
            compute += t_c
    return total, compute


def _timed(fn: Callable, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        torch.tpu.synchronize()
        t0 = time.perf_counter()
        out = fn()
        torch.tpu.synchronize()  # waits for what is still referenced: keep the result until then
        times.append(time.perf_counter() - t0)
        del out
    return statistics.median(times)


_HOST: dict = {}


def host_peaks() -> tuple[float, float]:
    """This machine's measured (matmul FLOP/s, read bytes/s) on tpu tensors (cached)."""
    if not _HOST:
        n = 1024
        a, b = torch.randn(n, n, device="tpu"), torch.randn(n, n, device="tpu")
        (a @ b).cpu()  # compile
        flops = 2 * n**3 / _timed(lambda: a @ b)
        # Read bandwidth: a sum reads 64 MiB and writes 4 bytes (a copy
        # would also measure the page faults of its fresh output on XLA:CPU).
        x = torch.randn(16 * 2**20, device="tpu")
        x.sum().cpu()
        bw = x.numel() * 4 / _timed(lambda: x.sum())
        _HOST.update(flops=flops, bw=bw)
    return _HOST["flops"], _HOST["bw"]


def _reference_step():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512)).to("tpu")
    x = torch.randn(256, 512, device="tpu")

    def step():
        m.zero_grad(set_to_none=True)
        m(x).square().mean().backward()

    return step


def _host_ratio(fn: Callable, costs: list[ProgramCost]) -> tuple[float, float]:
    peak, bw = host_peaks()
    projected, _ = roofline_seconds(costs, peak, bw)
    from . import modes

    with modes.eager_mode("fused"):  # as estimated: one trace per flush
        fn()
        measured = _timed(fn)
    return projected, measured


def reference_ratio() -> float:
    """projected / measured step time of the reference MLP step on this machine (cached)."""
    if "ref" not in _HOST:
        step = _reference_step()
        _, costs = program_costs(step)
        projected, measured = _host_ratio(step, costs)
        _HOST["ref"] = projected / measured
    return _HOST["ref"]


def estimate(fn: Callable, *args, chip: str = "v5e", measure: bool = True, **kwargs) -> Estimate:
    """Roofline projection of `fn(*args, **kwargs)` (a step on tpu tensors) on
    a TPU chip ("v5e", "v6e", "v7x"); see the module docstring. `measure=False`
    skips timing this machine (host_* and reference_ratio stay 0)."""
    if chip not in CHIPS:
        raise ValueError(f"torch_tpu.estimate: unknown chip {chip!r}; known: {', '.join(CHIPS)}")
    c = CHIPS[chip]
    _, costs = program_costs(fn, *args, **kwargs)
    flops = sum(p.flops for p in costs)
    nbytes = sum(p.bytes_accessed for p in costs)
    projected, compute = roofline_seconds(costs, c["peak_flops"], c["hbm_bytes_per_s"])
    memory = max((p.memory_bytes for p in costs), default=0)
    est = Estimate(chip=chip, flops=flops, bytes_accessed=nbytes, projected_s=projected,
                   mfu=flops / (projected * c["peak_flops"]) if projected > 0 else 0.0,
                   bound="compute" if compute >= projected / 2 else "memory",
                   memory_bytes=memory, fits=memory <= c["hbm_bytes"], programs=costs)
    if measure:
        est.host_peak_flops, est.host_bytes_per_s = host_peaks()
        est.host_projected_s, est.host_measured_s = _host_ratio(lambda: fn(*args, **kwargs), costs)
        est.host_ratio = est.host_projected_s / est.host_measured_s
        est.reference_ratio = reference_ratio()
    return est
