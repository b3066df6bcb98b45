"""One program per training step (docs/design.md, "One program per training
step"): when a compiled step's forward, backward and optimizer graphs are all
replays, they are chained into one pending trace and run as one XLA program.
Checked against the three-program path (chaining off) and CPU."""

import copy
import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu
from torch_tpu import _C
from utils import assert_close

TOL = dict(atol=2e-5, rtol=2e-5)

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


@pytest.fixture(autouse=True)
def replay_on(monkeypatch):
    monkeypatch.delenv("TORCH_TPU_GRAPH_REPLAY", raising=False)
    prev = _C._replay_chaining()
    yield
    _C._set_replay_chaining(prev)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.ln, self.fc2 = nn.Linear(12, 32), nn.LayerNorm(32), nn.Linear(32, 5)

    def forward(self, x, y):
        return F.cross_entropy(self.fc2(F.gelu(self.ln(self.fc1(x)))), y)


def train(model, data, device, chain, steps_seen=None):
    """AdamW steps; on tpu with model+loss and optimizer.step compiled
    (capturable: the step counters live on tpu). Returns losses and params
    on CPU; `steps_seen` collects per-step fusion stats deltas."""
    _C._set_replay_chaining(chain)
    model = model.to(device)
    tpu = device == "tpu"
    opt = torch.optim.AdamW(model.parameters(), lr=0.02, weight_decay=0.1, capturable=tpu)
    f = torch.compile(model, backend="tpu") if tpu else model
    step = torch.compile(opt.step, backend="tpu") if tpu else opt.step
    losses = []
    for x, y in data:
        before = _C._fusion_stats()
        compiles = _C._compile_count()
        opt.zero_grad(set_to_none=True)
        loss = f(x.to(device), y.to(device))
        loss.backward()
        step()
        if tpu:
            torch.tpu.synchronize()
        if steps_seen is not None:
            after = _C._fusion_stats()
            steps_seen.append({k: after[k] - before[k] for k in ("flushes", "chained_replays")}
                              | {"xla_compiles": _C._compile_count() - compiles})
        losses.append(loss.detach().cpu())
    return torch.stack(losses), [p.detach().cpu() for p in model.parameters()]


def test_one_program_step_matches_three_programs_and_cpu():
    torch.manual_seed(0)
    init = Net()
    data = [(torch.randn(8, 12), torch.randint(0, 5, (8,))) for _ in range(6)]
    ref_losses, ref_params = train(copy.deepcopy(init), data, "cpu", chain=False)
    three_losses, three_params = train(copy.deepcopy(init), data, "tpu", chain=False)
    torch._dynamo.reset()
    seen = []
    one_losses, one_params = train(copy.deepcopy(init), data, "tpu", chain=True, steps_seen=seen)

    # Steps 1 and 2 run the graphs plainly and capture them; from step 3 on
    # forward, backward and optimizer are replays chained into one trace:
    # one program per step (compiled once, at step 3).
    for s in seen[3:]:
        assert s["chained_replays"] == 3, seen
        assert s["flushes"] == 1, seen
        assert s["xla_compiles"] == 0, seen
    assert seen[2]["chained_replays"] == 3 and seen[2]["flushes"] == 1, seen

    assert_close(one_losses, three_losses, **TOL)
    assert_close(one_losses, ref_losses, **TOL)
    for p, q, r in zip(one_params, three_params, ref_params):
        assert_close(p, q, **TOL)
        assert_close(p, r, **TOL)


def test_replays_reading_large_results_of_the_pending_trace_run_it_first():
    """On XLA:CPU a chained step's links (activations, gradients) become
    temporaries that XLA allocates afresh each run; past the link bound the
    pending trace runs first and the replay starts the next one (here a
    bound of 1 byte cuts every link). Same results as one program and CPU."""
    torch.manual_seed(0)
    init = Net()
    data = [(torch.randn(8, 12), torch.randint(0, 5, (8,))) for _ in range(5)]
    ref_losses, ref_params = train(copy.deepcopy(init), data, "cpu", chain=False)
    prev = _C._set_replay_chain_max_link_bytes(1)
    try:
        before = _C._fusion_stats()["chain_cuts"]
        seen = []
        cut_losses, cut_params = train(copy.deepcopy(init), data, "tpu", chain=True, steps_seen=seen)
        cuts = _C._fusion_stats()["chain_cuts"] - before
    finally:
        _C._set_replay_chain_max_link_bytes(prev)
    # From step 3 on: forward, backward and optimizer replayed and chained,
    # but the backward reads the forward's results and the optimizer the
    # gradients, so each step runs as three programs.
    for s in seen[2:]:
        assert s["chained_replays"] == 3 and s["flushes"] == 3, seen
    assert cuts == 2 * len(seen[2:]), (cuts, seen)
    assert_close(cut_losses, ref_losses, **TOL)
    for p, r in zip(cut_params, ref_params):
        assert_close(p, r, **TOL)


def test_step_is_flushed_by_the_next_forward_and_by_reads():
    """Without a sync between steps, the next step's forward runs the pending
    step first, so every step is the same trace (no growing trace, no
    recompiles); a host read runs what is pending."""
    _C._set_replay_chaining(True)
    torch.manual_seed(1)
    model = Net().to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=0.02, capturable=True)
    f = torch.compile(model, backend="tpu")
    step = torch.compile(opt.step, backend="tpu")
    x, y = torch.randn(8, 12, device="tpu"), torch.randint(0, 5, (8,), device="tpu")
    losses = []
    for i in range(8):
        if i == 5:
            torch.tpu.synchronize()
            before = _C._fusion_stats()
        opt.zero_grad(set_to_none=True)
        loss = f(x, y)
        loss.backward()
        step()
        losses.append(loss.detach())
    assert _C._fusion_stats()["pending_ops"] > 0  # the last step is still deferred
    values = [float(l.item()) for l in losses]
    after = _C._fusion_stats()
    assert after["flushes"] - before["flushes"] == 3  # steps 6, 7, 8: one program each
    # No step program is compiled again. (The host reads may still compile the
    # small program that reads a new number of deferred-check flags: it is
    # bucketed by count, not part of any step.)
    assert after["compiles"] == before["compiles"]
    assert values[-1] < values[0]


def test_chained_inference_calls_read_correctly():
    """Replays whose results feed each other (one graph's output is the next
    call's input) are wired inside one trace; results equal CPU."""
    _C._set_replay_chaining(True)
    g = torch.compile(lambda a, w: torch.tanh(a @ w) + a, backend="tpu")
    h = torch.compile(lambda a: a.sum(0), backend="tpu")
    w = torch.randn(16, 16) * 0.1
    a = torch.randn(4, 16)
    tw, ta = w.to("tpu"), a.to("tpu")
    for _ in range(4):
        out = g(ta, tw)
        s = h(out)
    ref = torch.tanh(a @ w) + a
    assert_close(out, ref, **TOL)
    assert_close(s, ref.sum(0), **TOL)
    assert _C._fusion_stats()["chained_replays"] > 0


@pytest.mark.skipif(os.environ.get("TORCH_TPU_QUICK_FIRST_COMPILE") == "0", reason="quick first compiles off")
def test_quick_first_compiles_are_rebuilt_when_reused_and_match_cpu():
    # A graph's first call compiles its fused programs quick (LLVM -O0 etc.,
    # runtime/compile_tier.h). With three programs per step, replays run
    # them again from step 3: each is rebuilt optimised at its third run
    # (not an XLA compile in the counters), and every step equals CPU's.
    # (A batch size no other test here uses: the fused programs are new to
    # this process, so they are compiled here, not found in the cache.)
    torch.manual_seed(1)
    init = Net()
    data = [(torch.randn(11, 12), torch.randint(0, 5, (11,))) for _ in range(4)]
    ref_losses, ref_params = train(copy.deepcopy(init), data, "cpu", chain=False)
    before = _C._quick_compile_stats()
    losses, params = train(copy.deepcopy(init), data, "tpu", chain=False)
    after = _C._quick_compile_stats()
    quick = after["quick_compiles"] - before["quick_compiles"]
    rebuilt = after["quick_rebuilds"] - before["quick_rebuilds"]
    assert quick >= 1, (before, after)
    assert 1 <= rebuilt <= quick, (before, after)
    assert_close(losses, ref_losses, **TOL)
    for p, r in zip(params, ref_params):
        assert_close(p, r, **TOL)


@pytest.mark.skipif(os.environ.get("TORCH_TPU_QUICK_FIRST_COMPILE") == "0", reason="quick first compiles off")
def test_quick_compile_xla_refuses_falls_back_to_an_ordinary_compile():
    # Quick options XLA refuses (here one it does not know) cost the first
    # call its shortcut, never its result: the programs compile with XLA's
    # defaults and count as ordinary compiles. (Batch 13: programs new to
    # this process.)
    with pytest.raises(RuntimeError, match="integer or true/false"):
        _C._set_quick_compile_options("xla_backend_optimization_level=low")
    torch.manual_seed(2)
    init = Net()
    data = [(torch.randn(13, 12), torch.randint(0, 5, (13,))) for _ in range(2)]
    ref_losses, ref_params = train(copy.deepcopy(init), data, "cpu", chain=False)
    before, compiles = _C._quick_compile_stats(), _C._compile_count()
    prev = _C._set_quick_compile_options("xla_no_such_option=1")
    try:
        assert _C._quick_compile_options() == "xla_no_such_option=1"
        losses, params = train(copy.deepcopy(init), data, "tpu", chain=False)
    finally:
        assert _C._set_quick_compile_options(prev) == "xla_no_such_option=1"
    assert _C._quick_compile_stats()["quick_compiles"] == before["quick_compiles"]
    assert _C._compile_count() > compiles
    assert_close(losses, ref_losses, **TOL)
    for p, r in zip(params, ref_params):
        assert_close(p, r, **TOL)
