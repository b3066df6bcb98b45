"""torch.profiler on tpu (csrc/runtime/profiling.*): each program the runtime
runs is a range named after its op(s), lasting its device time, in
key_averages() and the Chrome trace, inside record_function ranges; and
torch_tpu.profiler.trace writes XLA's own trace."""

import glob
import json
import os

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function

import torch_tpu

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _inputs():
    return torch.randn(128, 128).to("tpu"), torch.randn(128, 128).to("tpu")


def test_strict_programs_are_ranges_inside_record_function(tmp_path):
    x, w = _inputs()
    with torch_tpu.eager_mode("strict"):
        (torch.relu(x @ w) + 1).cpu()  # compile outside the profile
        with profile(activities=ACTIVITIES) as prof:
            with record_function("my_step"):
                (torch.relu(x @ w) + 1).cpu()
    names = {e.key for e in prof.key_averages()}
    assert {"tpu: aten::mm", "tpu: aten::relu", "tpu: aten::add.Tensor"} <= names, names
    assert "tpu: aten::mm" in prof.key_averages().table()
    path = str(tmp_path / "trace.json")
    prof.export_chrome_trace(path)
    events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    step = next(e for e in events if e["name"] == "my_step")
    tpu = [e for e in events if e["name"].startswith("tpu: ")]
    assert len(tpu) == 3
    for e in tpu:  # enclosed by the user's range, with a duration
        assert step["ts"] <= e["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"]
        assert e["dur"] > 0
    assert any(e["name"] == "aten::mm" for e in events)  # beside the CPU ops


def test_a_fused_trace_is_one_range_naming_its_ops():
    x, w = _inputs()
    with torch_tpu.eager_mode("fused"):
        (torch.relu(x @ w) * 2).cpu()
        with profile(activities=ACTIVITIES) as prof:
            (torch.relu(x @ w) * 2).cpu()
    fused = [e.key for e in prof.key_averages() if e.key.startswith("tpu: fused program")]
    assert len(fused) == 1 and "aten::mm" in fused[0] and "aten::relu" in fused[0], fused


def test_profiling_off_adds_no_wait():
    # Without a profiler nothing waits: the program is still queued when the
    # op returns (XLA:CPU runs it asynchronously) at least sometimes.
    x = torch.randn(512, 512).to("tpu")
    with torch_tpu.eager_mode("strict"):
        (x @ x).cpu()
        queued = 0
        for _ in range(20):
            y = x @ x
            queued += not torch_tpu._C._is_ready(y)
            y.cpu()
        with profile(activities=ACTIVITIES):
            waited = [torch_tpu._C._is_ready(x @ x) for _ in range(5)]
    assert all(waited)  # profiling on: each range waited for its program
    assert queued > 0


def test_xla_trace_is_written(tmp_path):
    x, w = _inputs()
    with torch_tpu.profiler.trace(str(tmp_path)):
        (x @ w).cpu()
    files = glob.glob(os.path.join(str(tmp_path), "plugins", "profile", "*", "*.xplane.pb"))
    assert files and os.path.getsize(files[0]) > 0


def test_legacy_fallback_route_reports_tpu_time():
    # PyTorch's PrivateUse1 fallback (no kineto plugin) asks our profiler
    # stubs (csrc/device/profiler_stubs.cpp) for events around each op.
    x, w = _inputs()
    with torch_tpu.eager_mode("strict"):
        (x @ w).cpu()
        with torch.autograd.profiler.profile(use_device="tpu", use_kineto=False) as prof:
            (x @ w).cpu()
    table = prof.key_averages().table()
    assert "TPU total" in table
    mm = next(e for e in prof.key_averages() if e.key == "tpu: aten::mm")
    assert mm.device_time_total > 0
