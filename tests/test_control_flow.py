"""torch's scan and while_loop on tpu as one stablehlo.while
(torch_tpu/control_flow.py, csrc/runtime/regions.h, csrc/exec/region_loop.cpp):
eagerly and inside torch.compile graphs, against the same loops on CPU; bodies
the loop cannot hold run through torch's dense kernels, with CPU's results."""

import pytest
import torch
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop

import torch_tpu
import torch_tpu.control_flow as cf
from utils import assert_close, to_cpu, to_tpu


def _loops():
    return cf.stats["loops"], cf.stats["dense"]


def rnn(xs, h0, w, u):
    def cell(h, x):
        h2 = torch.tanh(h @ w + x @ u)
        return h2, h2.sum(-1)

    return scan(cell, h0, xs)


def two_carries(xs, a, b):
    def step(carry, x):
        a, b = carry
        return (a + x, b * 0.5 + a), ((a * x).sum(), (x > 0).to(torch.int32))

    return scan(step, (a, b), xs)


def count_up(x, k):
    zero = torch.zeros((), dtype=torch.long, device=x.device)
    return while_loop(lambda i, x: (x.sum() < 100) & (i < 50), lambda i, x: (i + 1, x * k + 1), (zero, x))


def _rnn_args(length=40):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(length, 2, 5, generator=g), torch.zeros(2, 8), torch.randn(8, 8, generator=g) * 0.3,
            torch.randn(5, 8, generator=g) * 0.3)


def test_eager_scan_is_one_loop_and_matches_cpu():
    args = _rnn_args()
    before = _loops()
    got = rnn(*to_tpu(args))
    assert _loops() == (before[0] + 1, before[1]), cf.last_refusal
    assert_close(to_cpu(got), rnn(*args))


def test_scan_with_several_carries_and_outputs():
    g = torch.Generator().manual_seed(1)
    args = (torch.randn(7, 3, generator=g), torch.randn(3, generator=g), torch.randn(3, generator=g))
    before = _loops()
    got = two_carries(*to_tpu(args))
    assert _loops()[0] == before[0] + 1, cf.last_refusal
    want = torch.utils._pytree.tree_leaves(two_carries(*args))
    got = torch.utils._pytree.tree_leaves(got)
    assert [(t.dtype, t.shape) for t in got] == [(t.dtype, t.shape) for t in want]
    assert_close(to_cpu(got), want)


def test_scan_program_does_not_grow_with_length():
    # The loop's program differs between lengths only in its trip count (the
    # unrolled form grew by ~4 ops a step).
    sizes = []
    for length in (16, 256):
        args = _rnn_args(length)
        known = set(cf._PROGRAMS)
        got = rnn(*to_tpu(args))
        assert_close(to_cpu(got), rnn(*args))
        new = [cf._PROGRAMS[k][0] for k in cf._PROGRAMS if k not in known]
        assert len(new) == 1 and "stablehlo.while" in new[0]
        sizes.append(len(new[0]))
    assert abs(sizes[0] - sizes[1]) < 40, sizes


def test_compiled_scan_matches_cpu_and_replays():
    args = _rnn_args()
    f = torch.compile(rnn, backend="tpu", fullgraph=True)
    want = rnn(*args)
    before = _loops()
    for _ in range(3):
        assert_close(to_cpu(f(*to_tpu(args))), want)
    assert _loops()[0] > before[0] and _loops()[1] == before[1], cf.last_refusal


def test_while_loop_eager_and_compiled():
    x, k = torch.rand(3), torch.tensor(3.0)
    want = count_up(x, k)
    before = _loops()
    assert_close(to_cpu(count_up(*to_tpu((x, k)))), want)
    assert _loops()[0] == before[0] + 1, cf.last_refusal
    g = torch.compile(count_up, backend="tpu", fullgraph=True)
    assert_close(to_cpu(g(*to_tpu((x, k)))), want)


def test_while_loop_that_never_runs_its_body():
    x, k = torch.full((3,), 200.0), torch.tensor(3.0)
    assert_close(to_cpu(count_up(*to_tpu((x, k)))), count_up(x, k))


def test_body_that_checks_indices_keeps_its_checks():
    def f(xs, h, idx):
        return scan(lambda h, x: (h + x[idx], h.clone()), h, xs)

    args = (torch.randn(4, 3), torch.zeros(3), torch.tensor([2, 0, 1]))
    before = _loops()
    got = f(*to_tpu(args))
    assert _loops() == (before[0] + 1, before[1]), cf.last_refusal
    assert_close(to_cpu(got), f(*args))
    # An index out of range at one step raises at the next sync, as the op would.
    bad = torch.tensor([[2, 0, 1], [2, 0, 1], [5, 0, 1], [2, 0, 1]])

    def g(xs, h, idx):
        return scan(lambda h, xi: (h + xi[0][xi[1]], h.clone()), h, (xs, idx))

    with pytest.raises((IndexError, RuntimeError), match="out of bounds|out of range"):
        g(*to_tpu((args[0], args[1], bad)))
        torch.tpu.synchronize()
    assert_close(to_cpu(g(*to_tpu((args[0], args[1], bad.clamp(max=2))))), g(args[0], args[1], bad.clamp(max=2)))


def test_body_that_draws_random_numbers_runs_densely():
    def f(xs, h):
        return scan(lambda h, x: (h + x + torch.rand_like(h), h.clone()), h, xs)

    torch.manual_seed(0)
    got = f(*to_tpu((torch.zeros(5, 3), torch.zeros(3))))
    assert cf.last_refusal == "the body draws random numbers"
    ys = got[1].cpu()
    # Each step drew its own numbers: the increments differ from step to step.
    steps = ys[1:] - ys[:-1]
    assert not torch.allclose(steps[0], steps[1])


def test_loop_inputs_requiring_grad_run_densely_with_gradients():
    args = _rnn_args(6)
    w_cpu = args[2].clone().requires_grad_()
    rnn(args[0], args[1], w_cpu, args[3])[0].sum().backward()
    w = args[2].to("tpu").requires_grad_()
    out = rnn(to_tpu(args[0]), to_tpu(args[1]), w, to_tpu(args[3]))
    out[0].sum().backward()
    assert_close(w.grad.cpu(), w_cpu.grad)


def test_outer_fused_trace_is_kept_around_the_body():
    # Values deferred before the loop (Fused Eager) feed it, and ops after it see its results.
    args = _rnn_args(10)
    with torch_tpu.eager_mode("fused"):
        xs, h0, w, u = to_tpu(args)
        h0 = h0 + 1
        got = rnn(xs * 2, h0, w, u)
        total = got[0].sum() + got[1].sum()
    want = rnn(args[0] * 2, args[1] + 1, args[2], args[3])
    assert_close(total.cpu(), want[0].sum() + want[1].sum())


def test_compiled_training_through_scan_matches_cpu():
    # Forward and backward scans run as loops; the gradients are CPU's.
    args = _rnn_args(12)
    w_cpu, u_cpu = args[2].clone().requires_grad_(), args[3].clone().requires_grad_()
    out = rnn(args[0], args[1], w_cpu, u_cpu)
    (out[0].sum() + out[1].square().sum()).backward()
    w, u = args[2].to("tpu").requires_grad_(), args[3].to("tpu").requires_grad_()
    f = torch.compile(rnn, backend="tpu")
    before = _loops()
    for _ in range(2):
        w.grad = u.grad = None
        out = f(to_tpu(args[0]), to_tpu(args[1]), w, u)
        (out[0].sum() + out[1].square().sum()).backward()
        assert_close(w.grad.cpu(), w_cpu.grad)
        assert_close(u.grad.cpu(), u_cpu.grad)
    assert _loops()[0] >= before[0] + 2, cf.last_refusal


def branchy(p, x, y):
    return torch.cond(p.sum() > 0, lambda x, y: (x * 2 + y).sin(), lambda x, y: x - y.mean(), (x, y))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_is_one_program_without_a_host_read(sign):
    g = torch.Generator().manual_seed(2)
    p, x, y = sign * torch.ones(2), torch.randn(3, 4, generator=g), torch.randn(4, generator=g)
    want = branchy(p, x, y)
    before = _loops()
    assert_close(to_cpu(branchy(*to_tpu((p, x, y)))), want)
    assert _loops() == (before[0] + 1, before[1]), cf.last_refusal
    f = torch.compile(branchy, backend="tpu", fullgraph=True)
    replays = torch_tpu.compile_stats()["replays"]
    for s in (sign, -sign, sign, -sign):  # captured (no host read refuses it), replayed with either branch
        assert_close(to_cpu(f(*to_tpu((s * p, x, y)))), branchy(s * p, x, y))
    assert torch_tpu.compile_stats()["replays"] >= replays + 2


def test_map_is_one_loop():
    from functorch.experimental.control_flow import map as map_fn

    g = torch.Generator().manual_seed(3)
    xs, w = torch.randn(6, 4, 3, generator=g), torch.randn(3, 2, generator=g)

    def f(xs, w):
        return map_fn(lambda x, w: (x @ w).relu(), xs, w)

    before = _loops()
    got = f(*to_tpu((xs, w)))
    assert _loops() == (before[0] + 1, before[1]), cf.last_refusal
    assert_close(to_cpu(got), f(xs, w))
    assert_close(to_cpu(torch.compile(f, backend="tpu", fullgraph=True)(*to_tpu((xs, w)))), f(xs, w))


def test_nested_scans():
    def f(xs, h):
        def outer(h, x):  # x: [3, 2]
            inner = scan(lambda c, y: (c + y.sum(), c * 1.0), h, x)
            return inner[0] * 0.5, inner[1].sum(0)

        return scan(outer, h, xs)

    g = torch.Generator().manual_seed(4)
    args = (torch.randn(5, 3, 2, generator=g), torch.zeros(()))
    before = _loops()
    got = f(*to_tpu(args))
    assert _loops()[1] == before[1], cf.last_refusal
    assert_close(to_cpu(got), f(*args))
