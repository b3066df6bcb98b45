"""torch.tpu.Stream / Event / synchronize: one in-order stream per device,
with exact query, synchronize and elapsed_time."""

import pytest
import torch

from utils import assert_close


def test_synchronize_and_results():
    a = torch.randn(100, 100)
    x = a.to("tpu")
    y = x @ x + 1
    torch.tpu.synchronize()
    torch.tpu.synchronize(0)
    torch.tpu.synchronize("tpu:0")
    assert_close(y, a @ a + 1)


def test_stream_basics():
    s = torch.tpu.Stream()
    assert isinstance(s, torch.Stream)
    assert s.device == torch.device("tpu", 0)
    cur = torch.tpu.current_stream()
    assert cur == torch.tpu.default_stream()
    assert cur.device.type == "tpu"
    a = torch.randn(50)
    with torch.tpu.stream(s):
        out = a.to("tpu").exp() * 2
    s.wait_stream(cur)
    cur.wait_stream(s)
    assert s.query()  # query waits: the work is done when it answers
    s.synchronize()
    assert_close(out, a.exp() * 2)


def test_events():
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    a = torch.randn(200, 200)
    x = a.to("tpu")
    start.record()
    for _ in range(3):
        x = torch.tanh(x @ x * 0.01)
    end.record()
    end.synchronize()
    assert start.query() and end.query()
    t = start.elapsed_time(end)
    assert isinstance(t, float) and t >= 0.0
    ref = a
    for _ in range(3):
        ref = torch.tanh(ref @ ref * 0.01)
    assert_close(x, ref)
    ev = torch.tpu.current_stream().record_event()
    torch.tpu.current_stream().wait_event(ev)
    ev.wait()
    ev.synchronize()
    assert ev.query()


def test_event_errors():
    a, b = torch.tpu.Event(), torch.tpu.Event()
    a.record()
    b.record()
    with pytest.raises(ValueError, match="enable_timing"):
        a.elapsed_time(b)
    c, d = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    c.record()
    with pytest.raises(ValueError, match="recorded"):
        c.elapsed_time(d)


def test_accelerator_api():
    assert torch.accelerator.current_accelerator().type == "tpu"
    s = torch.accelerator.current_stream()
    assert s.device.type == "tpu"
    torch.accelerator.synchronize()
    e = torch.Event("tpu", enable_timing=True)
    e2 = torch.Event("tpu", enable_timing=True)
    e.record(s)
    x = (torch.ones(10, device="tpu") * 3).sum()
    e2.record(s)
    assert e.elapsed_time(e2) >= 0
    assert_close(x, torch.ones(10).mul(3).sum())
