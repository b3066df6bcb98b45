"""Graph capture and replay (torch_tpu/graph_replay.py, csrc/exec/graph_replay.*):
a compiled graph's third and later calls with one signature run its captured
fused program directly. Every result is checked against the plain path
(TORCH_TPU_GRAPH_REPLAY=0, bitwise) and against CPU."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu
from torch_tpu import _C
from torch_tpu.graph_replay import ReplayCache
from compile_models import MLP
from utils import assert_close

TOL = dict(atol=2e-5, rtol=2e-5)


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


@pytest.fixture(autouse=True)
def replay_on(monkeypatch):
    monkeypatch.delenv("TORCH_TPU_GRAPH_REPLAY", raising=False)


def stats():
    return torch_tpu.compile_stats()


def train(model, xs, compile_step):
    """AdamW training loop through a compiled model (and optimizer step);
    returns the losses and final parameters, on CPU."""
    dev = next(model.parameters()).device
    # capturable: the step counters live on tpu, so the compiled step is
    # replayable (CPU counters are updated on the host: not replayed).
    opt = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1,
                            capturable=compile_step and dev.type == "tpu")
    compiled = torch.compile(model, backend="tpu") if dev.type == "tpu" else model

    def step():
        opt.step()

    if compile_step and dev.type == "tpu":
        step = torch.compile(step, backend="tpu")
    losses = []
    for x in xs:
        opt.zero_grad()
        loss = compiled(x.to(dev)).pow(2).mean()
        loss.backward()
        step()
        losses.append(loss.detach().cpu())
    return torch.stack(losses), [p.detach().cpu() for p in model.parameters()]


@pytest.mark.parametrize("compile_step", [False, True])
def test_training_loop_matches_plain_path_and_cpu(monkeypatch, compile_step):
    torch.manual_seed(0)
    init = MLP()
    xs = [torch.randn(6, 12) for _ in range(6)]
    ref_losses, ref_params = train(copy.deepcopy(init), xs, False)

    monkeypatch.setenv("TORCH_TPU_GRAPH_REPLAY", "0")
    plain_losses, plain_params = train(copy.deepcopy(init).to("tpu"), xs, compile_step)
    monkeypatch.delenv("TORCH_TPU_GRAPH_REPLAY")
    torch._dynamo.reset()
    before = stats()["replays"]
    losses, params = train(copy.deepcopy(init).to("tpu"), xs, compile_step)
    graphs = 3 if compile_step else 2  # forward, backward (, optimizer step)
    assert stats()["replays"] - before >= graphs * (len(xs) - 2), "a graph was not replayed"

    # The replay runs the very program the plain path runs: bitwise equal.
    # (In outer Fused Eager the plain path lets eager ops around the graph
    # join its trace, which XLA fuses differently: equal to rounding.)
    same = torch.equal if torch_tpu.get_eager_mode() != "fused" else lambda a, b: assert_close(a, b, **TOL) is None
    assert same(losses, plain_losses)
    for p, q in zip(params, plain_params):
        assert same(p, q)
    assert_close(losses, ref_losses, **TOL)
    for p, q in zip(params, ref_params):
        assert_close(p, q, **TOL)


def test_replay_compiles_nothing_and_counts():
    f = torch.compile(lambda x, y: (x @ y).relu() + 1, backend="tpu")
    x, y = torch.randn(4, 8), torch.randn(8, 3)
    tx, ty = x.to("tpu"), y.to("tpu")
    f(tx, ty), f(tx, ty)  # plain, then captured
    torch.tpu.synchronize()
    s, compiles = stats(), _C._compile_count()
    for i in range(3):
        xi = torch.randn(4, 8)
        out = f(xi.to("tpu"), ty)
        assert_close(out, (xi @ y).relu() + 1, **TOL)
    torch.tpu.synchronize()
    assert _C._compile_count() == compiles, "a replay compiled with XLA"
    after = stats()
    assert after["replays"] == s["replays"] + 3
    assert after["captures"] == s["captures"]
    # No op was dispatched: each replay appended its captured ops to the
    # pending trace (chained replays, test_replay_chain.py), which ran the
    # program compiled for the capture.
    assert after["fused_compiles"] == s["fused_compiles"]


def test_switch_off(monkeypatch):
    monkeypatch.setenv("TORCH_TPU_GRAPH_REPLAY", "0")
    f = torch.compile(lambda x: x * 2, backend="tpu")
    before = stats()
    for _ in range(4):
        out = f(torch.ones(3, device="tpu"))
    assert_close(out, torch.full((3,), 2.0))
    assert stats()["replays"] == before["replays"] and stats()["captures"] == before["captures"]


def test_new_shape_is_a_new_capture():
    f = torch.compile(lambda x: x.sin() * 3, backend="tpu", dynamic=False)
    before = stats()
    for shape in [(5,), (5,), (5,), (7,), (7,), (7,), (5,)]:
        x = torch.randn(shape)
        assert_close(f(x.to("tpu")), x.sin() * 3, **TOL)
    after = stats()
    assert after["captures"] - before["captures"] == 2
    assert after["replays"] - before["replays"] == 3  # the third call of each shape, and the last


def test_input_mutation_is_replayed():
    def bump(x, y):
        x.add_(1)
        y[1:].mul_(2)  # through a view: the whole storage is rewritten
        return x.sum()

    f = torch.compile(bump, backend="tpu")
    x, y = torch.zeros(3), torch.ones(4)
    tx, ty = x.to("tpu"), y.to("tpu")
    before = stats()["replays"]
    for i in range(5):
        s = f(tx, ty)
        bump(x, y)
        assert_close(s, x.sum())
        assert_close(tx, x)
        assert_close(ty, y)
    assert stats()["replays"] - before == 3


def test_batch_norm_running_stats():
    torch.manual_seed(2)
    cpu = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    model = copy.deepcopy(cpu).to("tpu")
    compiled = torch.compile(model, backend="tpu")
    before = stats()["replays"]
    for _ in range(5):
        x = torch.randn(2, 3, 8, 8)
        assert_close(compiled(x.to("tpu")), cpu(x), **TOL)
    assert stats()["replays"] > before
    assert_close(model[1].running_mean, cpu[1].running_mean, **TOL)
    assert_close(model[1].running_var, cpu[1].running_var, **TOL)
    assert model[1].num_batches_tracked.item() == 5


def test_outputs_alias_inputs_and_each_other():
    def f(x):
        y = x * 2
        return x, x.view(2, 3), y, y.t(), y[1:], x.sum()

    cf = torch.compile(f, backend="tpu")
    x = torch.randn(3, 2)
    tx = x.to("tpu")
    before = stats()["replays"]
    for _ in range(4):
        outs = cf(tx)
        for o, r in zip(outs, f(x)):
            assert_close(o, r)
    assert stats()["replays"] - before == 2
    a, v, y, yt, ys, _ = outs
    assert a is tx
    assert v.untyped_storage().data_ptr() == tx.untyped_storage().data_ptr()
    assert yt.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
    assert ys.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
    assert ys.storage_offset() == 2 and yt.stride() == (1, 2)
    y.fill_(7)  # they are views of one storage: the write shows through
    assert_close(yt, torch.full((2, 3), 7.0))


def test_graph_without_ops():
    f = torch.compile(lambda x: x.view(-1)[2:], backend="tpu")
    x = torch.arange(6.0).reshape(2, 3)
    tx = x.to("tpu")
    for _ in range(4):
        out = f(tx)
    assert_close(out, x.view(-1)[2:])
    assert out.untyped_storage().data_ptr() == tx.untyped_storage().data_ptr()


def dropout_calls(seed, n=5):
    f = torch.compile(lambda x: F.dropout(x, 0.5, training=True), backend="tpu")
    x = torch.ones(64, device="tpu")
    torch.manual_seed(seed)
    return [f(x).cpu() for _ in range(n)]


def test_dropout_masks_differ_and_follow_the_seed(monkeypatch):
    before = stats()["replays"]
    first = dropout_calls(3)
    assert stats()["replays"] - before == 3
    for i in range(len(first)):
        for j in range(i):
            assert not torch.equal(first[i], first[j]), f"calls {j} and {i} drew the same mask"
    assert torch.equal(torch.stack(dropout_calls(3)), torch.stack(first))
    monkeypatch.setenv("TORCH_TPU_GRAPH_REPLAY", "0")
    torch._dynamo.reset()
    assert torch.equal(torch.stack(dropout_calls(3)), torch.stack(first))  # what the plain path draws


def fused_runner(fn):
    """A ReplayCache's run_ops as the compile backend's: Fused Eager, one flush."""
    def run_ops(args):
        with torch_tpu.eager_mode("fused"):
            return fn(*args)
    return run_ops


def test_host_read_is_not_replayed():
    # .item() inside the graph: a data-dependent value the replay would freeze.
    cache = ReplayCache(fused_runner(lambda x: x * x.sum().item()))
    before = stats()
    for i in range(4):
        x = torch.randn(5)
        assert_close(cache([x.to("tpu")]), x * x.sum().item(), **TOL)
    assert stats()["replay_refused"] == before["replay_refused"] + 1
    assert stats()["replays"] == before["replays"]
    assert "host" in next(iter(cache.refusals.values()))


def test_data_dependent_op_is_not_replayed():
    cache = ReplayCache(fused_runner(lambda x: torch.nonzero(x > 0) * 2))
    for i in range(4):
        x = torch.randn(9)
        assert torch.equal(cache([x.to("tpu")]).cpu(), torch.nonzero(x > 0) * 2)
    assert len(cache.refusals) == 1


def test_cpu_scalar_argument_is_not_frozen():
    # A 0-dim CPU tensor is uploaded as a value: it changes between calls.
    cache = ReplayCache(fused_runner(lambda x, s: x * s + 1))
    x = torch.randn(4)
    for v in (2.0, 3.0, 1.0, 5.0):
        s = torch.tensor(v)
        assert_close(cache([x.to("tpu"), s]), x * v + 1, **TOL)
    assert len(cache.refusals) == 1


def test_nested_outputs_and_constants():
    cache = ReplayCache(fused_runner(lambda x, n: {"a": 1} and [(x + n, None), n, [x.exp()]]))
    x = torch.randn(3)
    for _ in range(4):
        out = cache([x.to("tpu"), 2])
    assert isinstance(out, list) and isinstance(out[0], tuple) and out[0][1] is None and out[1] == 2
    assert_close(out[0][0], x + 2)
    assert_close(out[2][0], x.exp(), **TOL)
    assert not cache.refusals


def test_pending_eager_work_does_not_join_the_graph():
    with torch_tpu.eager_mode("fused"):
        f = torch.compile(lambda x: x * 3, backend="tpu")
        for i in range(4):
            y = torch.full((4,), float(i), device="tpu") + 1  # deferred outside the graph
            out = f(y)
            assert_close(out, torch.full((4,), 3.0 * (i + 1)))


def test_tensor_from_outside_the_arguments_is_not_frozen():
    w = torch.ones(3, device="tpu")
    cache = ReplayCache(fused_runner(lambda x: x + w))
    x = torch.randn(3)
    for i in range(4):
        w.add_(1)  # a later call must see the new value
        assert_close(cache([x.to("tpu")]), x + 2 + i)
    assert len(cache.refusals) == 1


def test_input_metadata_change_is_not_replayed():
    def f(x):
        x.t_()
        return x * 2

    cache = ReplayCache(fused_runner(f))
    for i in range(4):
        x = torch.randn(2, 3)
        tx = x.to("tpu")
        assert_close(cache([tx]), x.t() * 2)
        assert tx.shape == (3, 2)
    assert "shape" in next(iter(cache.refusals.values()))


class DropMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln, self.fc1, self.drop, self.fc2 = nn.LayerNorm(16), nn.Linear(16, 64), nn.Dropout(0.2), nn.Linear(64, 4)

    def forward(self, x):
        return self.fc2(self.drop(F.gelu(self.fc1(self.ln(x)))))


def test_training_with_dropout_matches_plain_path(monkeypatch):
    torch.manual_seed(0)
    init = DropMLP()

    def run():
        torch._dynamo.reset()
        model = copy.deepcopy(init).to("tpu")
        opt = torch.optim.AdamW(model.parameters(), lr=0.01, capturable=True)
        compiled, step = torch.compile(model, backend="tpu"), torch.compile(opt.step, backend="tpu")
        torch.manual_seed(1)
        losses = []
        for _ in range(6):
            opt.zero_grad()
            loss = compiled(torch.randn(8, 16, device="tpu")).square().mean()
            loss.backward()
            step()
            losses.append(loss.detach().cpu())
        return torch.stack(losses), [p.detach().cpu() for p in model.parameters()]

    monkeypatch.setenv("TORCH_TPU_GRAPH_REPLAY", "0")
    plain = run()
    monkeypatch.delenv("TORCH_TPU_GRAPH_REPLAY")
    before = stats()["replays"]
    replayed = run()
    assert stats()["replays"] - before == 3 * 4  # forward, backward, step from the third call on
    same = torch.equal if torch_tpu.get_eager_mode() != "fused" else lambda a, b: assert_close(a, b, **TOL) is None
    assert same(replayed[0], plain[0])
    for p, q in zip(replayed[1], plain[1]):
        assert same(p, q)


def test_one_op_graph():
    # A one-op trace runs the op's own program (arguments in its order, a
    # Scalar among them), not a fused one.
    f = torch.compile(lambda x, y: torch.add(y, x, alpha=3), backend="tpu")
    before = stats()["replays"]
    for _ in range(4):
        x, y = torch.randn(5), torch.randn(5)
        assert_close(f(x.to("tpu"), y.to("tpu")), y + 3 * x, **TOL)
    assert stats()["replays"] - before == 2


def test_error_during_capture_leaves_no_capture_behind():
    fail = [False]

    def f(x):
        y = x * 2
        if fail[0]:
            raise ValueError("boom")
        return y

    cache = ReplayCache(fused_runner(f))
    x = torch.randn(3)
    cache([x.to("tpu")])
    fail[0] = True
    with pytest.raises(ValueError, match="boom"):
        cache([x.to("tpu")])  # the capture call
    assert not _C._replay_capture_active()
    fail[0] = False
    before = stats()["replays"]
    for _ in range(3):
        assert_close(cache([x.to("tpu")]), x * 2)
    assert stats()["replays"] - before == 2  # captured again, then replayed
