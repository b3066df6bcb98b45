"""nn.DataParallel on tpu (torch_tpu/data_parallel.py): a script written for
one GPU wraps its model in DataParallel; on tpu that failed at the first
forward (torch._C._scatter exists only in CUDA builds of torch, and
record_stream had no tpu kernel). Results and gradients against the same
module on CPU."""

import copy

import pytest
import torch
from torch.nn.parallel import comm

from utils import assert_close


def _pair():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    return m, copy.deepcopy(m)


@pytest.mark.parametrize("input_on", ["cpu", "tpu"])
def test_data_parallel_trains_like_the_module_on_cpu(input_on):
    m, ref = _pair()
    dp = torch.nn.DataParallel(m)
    assert dp.device_ids == [0] and next(m.parameters()).device == torch.device("tpu", 0)
    x = torch.randn(5, 8)
    y = dp(x.to(input_on))
    assert y.device == torch.device("tpu", 0)
    assert_close(y.cpu(), ref(x))
    y.square().sum().backward()
    ref(x).square().sum().backward()
    for p, q in zip(m.parameters(), ref.parameters()):
        assert_close(p.grad.cpu(), q.grad)


def test_input_gradient_flows_back_through_the_scatter():
    m, ref = _pair()
    dp = torch.nn.DataParallel(m)
    x = torch.randn(5, 8)
    xt, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    dp(xt).sum().backward()
    ref(xc).sum().backward()
    assert xt.grad.device.type == "cpu"  # back where the input came from, as on CUDA
    assert_close(xt.grad, xc.grad)


def test_functional_data_parallel_and_kwargs():
    class Scale(torch.nn.Module):
        def forward(self, x, *, k):
            return x * k

    x = torch.randn(4, 3)
    out = torch.nn.parallel.data_parallel(Scale().to("tpu"), (x,), module_kwargs={"k": 2.0})
    assert out.device.type == "tpu"
    assert_close(out.cpu(), x * 2)


def test_comm_scatter_and_gather_on_tpu():
    x = torch.arange(12.0).view(6, 2)
    (part,) = comm.scatter(x, [0])
    assert part.device == torch.device("tpu", 0)
    assert_close(part.cpu(), x, atol=0, rtol=0)
    parts = comm.scatter(x.to("tpu"), [0, 0], chunk_sizes=[4, 2])
    assert [p.shape[0] for p in parts] == [4, 2]
    back = comm.gather(parts, 0, "cpu")
    assert back.device.type == "cpu"
    assert_close(back, x, atol=0, rtol=0)
    on_tpu = comm.gather(parts, 0, 0)
    assert on_tpu.device == torch.device("tpu", 0)
    out = torch.empty(6, 2, device="tpu")
    assert comm.gather(parts, out=out) is out
    assert_close(out.cpu(), x, atol=0, rtol=0)
    z = torch.randn(3, dtype=torch.complex64)
    assert_close(torch.view_as_complex(comm.scatter(z, [0])[0]).cpu(), z, atol=0, rtol=0)
    with pytest.raises(RuntimeError, match="chunks"):
        comm.scatter(x, [0, 0], chunk_sizes=[6])


def test_other_devices_go_to_torchs_own_code(monkeypatch):
    from torch_tpu import data_parallel

    calls = []
    monkeypatch.setattr(data_parallel, "_get_available_device_type", lambda: "cuda")
    monkeypatch.setattr(data_parallel, "_torch_scatter", lambda *a, **k: calls.append("scatter"))
    monkeypatch.setattr(data_parallel, "_torch_gather", lambda *a, **k: calls.append("gather"))
    comm.scatter(torch.ones(4), [0])
    comm.gather([torch.ones(2)], 0, 0)
    assert calls == ["scatter", "gather"]
    comm.scatter(torch.ones(4, device="tpu"), [0])  # a tpu tensor is ours whatever the accelerator
    assert calls == ["scatter", "gather"]


def test_record_stream_is_accepted():
    t = torch.ones(3, device="tpu")
    t.record_stream(torch.tpu.current_stream())
    with pytest.raises(RuntimeError, match="record_stream"):
        t.record_stream(torch.Stream(device="cpu"))
