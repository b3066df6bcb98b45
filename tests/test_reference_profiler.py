"""`torch.tpu.profiler.TpuProfilerConfig` (torch_tpu/profiler_config.py,
profiler_capture.py): passed to torch.profiler as `experimental_config`
with the tpu activity, the profile records the tpu programs as usual and
XLA's trace of their runs is written as `<dir>/<host>[_<rank>].xplane.pb`."""

import os
import socket

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import torch_tpu
from torch.tpu.profiler import TpuProfilerConfig
from utils import assert_close

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
HOST = socket.gethostname() or "localhost"


def _work():
    x, w = torch.randn(64, 64), torch.randn(64, 64)
    out = (torch.relu(x.to("tpu") @ w.to("tpu")) + 1).cpu()
    assert_close(out, torch.relu(x @ w) + 1)


def _program_runs(path):
    """XLA program executions recorded in an XPlane file."""
    import jax.profiler

    data = jax.profiler.ProfileData.from_file(str(path))
    return sum(1 for plane in data.planes for line in plane.lines for e in line.events
               if "LoadedExecutable::Execute" in e.name)


def test_config_string_matches_reference_format():
    cfg = TpuProfilerConfig(run_dir="/tmp/p", worker_rank="r1", experimental_options={"a": 1, "b": True, "c": 'x"y'})
    assert cfg.custom_profiler_config == (
        'host_tracer_level:2,device_tracer_level:1,python_tracer_level:0,run_dir:/tmp/p,'
        'worker_rank:"r1",a:1,b:true,c:"x\\"y",check_experimental_options:true')
    assert isinstance(cfg, torch.profiler._ExperimentalConfig)
    assert TpuProfilerConfig().custom_profiler_config == \
        "host_tracer_level:2,device_tracer_level:1,python_tracer_level:0"


def test_bad_options_raise():
    with pytest.raises(TypeError, match="worker_rank"):
        TpuProfilerConfig(worker_rank=3)
    with pytest.raises(ValueError, match="worker_rank"):
        TpuProfilerConfig(worker_rank="a:b")
    with pytest.raises(ValueError, match="run_dir"):
        TpuProfilerConfig(experimental_options={"run_dir": "x"})
    with pytest.raises(ValueError, match="host_tracer_level"):
        TpuProfilerConfig(host_tracer_level=7)
    with pytest.raises(TypeError, match="positional"):
        TpuProfilerConfig(2)  # keyword-only, as the reference's


def test_profile_writes_xla_trace_of_the_tpu_programs(tmp_path):
    _work()  # compiled outside the profile
    with profile(activities=ACTIVITIES, experimental_config=TpuProfilerConfig(run_dir=tmp_path)) as prof:
        _work()
    assert os.listdir(tmp_path) == [f"{HOST}.xplane.pb"]
    runs = _program_runs(tmp_path / f"{HOST}.xplane.pb")
    # Strict Eager: mm, relu, add (and the transfers' programs, if any); Fused: one or more
    assert runs >= (3 if torch_tpu.get_eager_mode() == "strict" else 1), runs
    assert any(e.key.startswith("tpu: ") for e in prof.key_averages())  # torch.profiler's own view

    # a profile of no tpu work records no program run
    with profile(activities=ACTIVITIES, experimental_config=TpuProfilerConfig(run_dir=tmp_path / "idle")):
        torch.randn(8, 8) @ torch.randn(8, 8)
    assert _program_runs(tmp_path / "idle" / f"{HOST}.xplane.pb") == 0


def test_default_directory_and_worker_rank(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_PROFILER_OUTPUT_DIR", str(tmp_path))
    with profile(activities=ACTIVITIES, experimental_config=TpuProfilerConfig(worker_rank="2")):
        _work()
    assert os.listdir(tmp_path) == [f"{HOST}_2.xplane.pb"]
    assert _program_runs(tmp_path / f"{HOST}_2.xplane.pb") >= 1


def test_no_trace_without_tpu_activity_or_config(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_PROFILER_OUTPUT_DIR", str(tmp_path))
    with profile(activities=[ProfilerActivity.CPU], experimental_config=TpuProfilerConfig()):
        _work()
    TpuProfilerConfig()  # installed; a profile without the config is untouched
    with profile(activities=ACTIVITIES):
        _work()
    assert os.listdir(tmp_path) == []


def test_one_trace_per_recording_cycle(tmp_path):
    # each recording cycle of a scheduled profile writes its own trace
    sched = torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=2)
    seen = []

    def ready(prof):
        seen.append(_program_runs(tmp_path / f"{HOST}.xplane.pb"))
        os.remove(tmp_path / f"{HOST}.xplane.pb")

    with profile(activities=ACTIVITIES, schedule=sched, acc_events=True, on_trace_ready=ready,
                 experimental_config=TpuProfilerConfig(run_dir=tmp_path)) as prof:
        for _ in range(4):
            _work()
            prof.step()
    assert len(seen) == 2 and all(runs >= 1 for runs in seen), seen


def test_only_one_xla_trace_at_a_time(tmp_path):
    with torch_tpu.profiler.trace(str(tmp_path / "outer")):
        with pytest.raises(RuntimeError, match="another XLA trace"):
            with profile(activities=ACTIVITIES, experimental_config=TpuProfilerConfig(run_dir=tmp_path)):
                _work()
    assert not (tmp_path / f"{HOST}.xplane.pb").exists()
