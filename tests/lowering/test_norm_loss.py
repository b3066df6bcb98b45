"""norm / loss lowering rules: batch norm (all entry points, running stats,
backward), group norm, weight norm, binary cross entropy (+ logits),
smooth L1, Huber, soft margin, multi margin, multilabel margin, safe /
masked softmax (forward vs CPU and gradients)."""

import pytest
import torch
import torch.nn.functional as F

from utils import assert_close, check, check_grad, make, noncontiguous, to_tpu

FLOATS = [torch.float32, torch.bfloat16]
REDUCTIONS = ["none", "mean", "sum"]


# ---- batch norm ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 2, 2)])
def test_batch_norm_running_stats(shape, training, dtype):
    c = shape[1]
    x = make(shape, dtype)
    w, b = make((c,), dtype, seed=1), make((c,), dtype, seed=2)
    rm, rv = make((c,), dtype, seed=3), make((c,), dtype, low=0.5, high=2, seed=4)
    # check() also compares the running stats updated in place.
    check(lambda x, rm, rv, w, b: F.batch_norm(x, rm, rv, w, b, training=training, momentum=0.2), x, rm, rv, w, b)


def test_batch_norm_no_stats_no_affine_noncontiguous():
    x = make((3, 4, 5))
    check(lambda x: F.batch_norm(noncontiguous(x), None, None, training=True), x)
    check(lambda x: F.batch_norm(x, None, None, training=True, eps=0.1), x)


def test_batch_norm_raw_ops():
    x = make((4, 3, 2))
    rm, rv = make((3,), seed=3), make((3,), low=0.5, high=2, seed=4)
    w, b = make((3,), seed=1), make((3,), seed=2)
    check(lambda *a: torch.native_batch_norm(*a, True, 0.1, 1e-5), x, w, b, rm, rv)
    check(lambda *a: torch.native_batch_norm(*a, False, 0.1, 1e-5)[0], x, w, b, rm, rv)
    check(lambda *a: torch.ops.aten._native_batch_norm_legit(*a, True, 0.1, 1e-5), x, w, b, rm, rv)
    check(lambda *a: torch.ops.aten._native_batch_norm_legit.no_stats(*a, True, 0.1, 1e-5), x, w, b)
    check(lambda *a: torch.ops.aten._native_batch_norm_legit_no_training(*a, 0.1, 1e-5)[0], x, w, b, rm, rv)
    check(lambda *a: torch.ops.aten._native_batch_norm_legit_functional(*a, True, 0.1, 1e-5), x, w, b, rm, rv)
    check(lambda *a: torch.ops.aten._batch_norm_with_update(*a, 0.1, 1e-5)[:3], x, w, b, rm, rv)
    check(lambda *a: torch.ops.aten._batch_norm_with_update_functional(*a, 0.1, 1e-5)[:3], x, w, b, rm, rv)
    check(lambda *a: torch.ops.aten._batch_norm_no_update(*a, 0.1, 1e-5)[0], x, w, b, rm, rv)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_out_overloads(training):
    # out= into empty tensors: in eval mode CPU's save_mean and save_invstd
    # come back empty. On tpu native_batch_norm.out failed ("broadcast_to:
    # incompatible shapes") and _native_batch_norm_legit.out gave [C].
    x = make((4, 3, 2))
    w, b = make((3,), seed=1), make((3,), seed=2)
    stats = make((3,), seed=3), make((3,), low=0.5, high=2, seed=4)

    def run(device, overload):
        rm, rv = (s.clone().to(device) for s in stats)  # the CPU run updates its own copy
        outs = [torch.empty(0, device=device) for _ in range(3)]
        args = [t.to(device) for t in (x, w, b)] + [rm, rv, training, 0.1, 1e-5]
        if overload == "native":
            torch.native_batch_norm(*args, out=tuple(outs))
        else:
            torch.ops.aten._native_batch_norm_legit.out(*args, out=outs[0], save_mean=outs[1], save_invstd=outs[2])
        return [t.cpu() for t in outs + [rm, rv]]

    for overload in ("native", "legit"):
        expected, actual = run("cpu", overload), run("tpu", overload)
        assert [tuple(t.shape) for t in actual] == [tuple(t.shape) for t in expected]
        for a, e in zip(actual, expected):
            assert_close(a, e)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_grad(training, dtype):
    rm, rv = make((3,), dtype, seed=3), make((3,), dtype, low=0.5, high=2, seed=4)
    check_grad(lambda x, w, b: F.batch_norm(x, rm.to(x.device), rv.to(x.device), w, b, training=training),
               make((4, 3, 5), dtype), make((3,), dtype, seed=1), make((3,), dtype, seed=2))
    # In bf16, save_invstd is itself bf16 (as on CPU), and CPU rounds it one
    # bf16 step away from the exact value where we round to nearest (e.g.
    # 0.8398 vs 0.8359 for 0.83766): the gradient built on it differs by a
    # few bf16 steps.
    tol = dict(atol=3e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}
    check_grad(lambda x: F.batch_norm(x, None, None, training=True), make((5, 3), dtype), **tol)


def test_batch_norm_sync_pieces():
    # CPU has no kernels for the sync-batch-norm pieces: expected values are
    # computed here from their definitions.
    x, g = make((4, 3, 5)), make((4, 3, 5), seed=5)
    w, b = make((3,), seed=1), make((3,), seed=2)
    X, G, W, B = to_tpu([x, g, w, b])
    bc = lambda v: v[None, :, None]
    mean = x.mean((0, 2))
    invstd = 1 / (x.var((0, 2), correction=0) + 1e-5).sqrt()
    m_t, i_t = torch.batch_norm_stats(X, 1e-5)
    assert_close(m_t, mean)
    assert_close(i_t, invstd, atol=1e-4, rtol=1e-4)
    assert_close(torch.batch_norm_elemt(X, W, B, m_t, i_t, 1e-5), (x - bc(mean)) * bc(invstd * w) + bc(b),
                 atol=1e-4, rtol=1e-4)
    sdy, sdyx, gw, gb = torch.batch_norm_backward_reduce(G, X, m_t, i_t, W, True, True, True)
    assert_close(sdy, g.sum((0, 2)), atol=1e-4, rtol=1e-4)
    assert_close(sdyx, (g * (x - bc(mean))).sum((0, 2)), atol=1e-4, rtol=1e-4)
    assert_close(gw, (g * (x - bc(mean)) * bc(invstd)).sum((0, 2)), atol=1e-4, rtol=1e-4)
    assert_close(gb, g.sum((0, 2)), atol=1e-4, rtol=1e-4)
    gi = torch.batch_norm_backward_elemt(G, X, m_t, i_t, W, sdy, sdyx, torch.tensor([20], dtype=torch.int32).to("tpu"))
    # equals the training-mode batch norm input gradient
    xr = x.clone().requires_grad_()
    F.batch_norm(xr, None, None, w, b, training=True).backward(g)
    assert_close(gi, xr.grad, atol=1e-4, rtol=1e-4)
    means, invstds = torch.stack([mean, mean + 1]), torch.stack([invstd, invstd * 2])
    gm, gv = torch.batch_norm_gather_stats_with_counts(X, means.to("tpu"), invstds.to("tpu"), None, None, 0.1, 1e-5,
                                                       torch.tensor([20.0, 10.0]).to("tpu"))
    exp_m = (20 * mean + 10 * (mean + 1)) / 30
    var = (20 * (1 / invstds[0] ** 2 - 1e-5 + (mean - exp_m) ** 2)
           + 10 * (1 / invstds[1] ** 2 - 1e-5 + (mean + 1 - exp_m) ** 2)) / 30
    assert_close(gm, exp_m)
    assert_close(gv, 1 / (var + 1e-5).sqrt(), atol=1e-4, rtol=1e-4)


# ---- group norm / instance norm ------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((2, 4, 3, 3), 2), ((3, 4), 2)])
def test_group_norm(shape, groups, dtype):
    c = shape[1]
    check(lambda x, w, b: F.group_norm(x, groups, w, b), make(shape, dtype), make((c,), dtype, seed=1),
          make((c,), dtype, seed=2))
    check_grad(lambda x, w, b: F.group_norm(x, groups, w, b), make(shape, dtype), make((c,), dtype, seed=1),
               make((c,), dtype, seed=2))


def test_group_norm_no_affine_noncontiguous():
    check(lambda x: F.group_norm(noncontiguous(x), 2), make((3, 4, 5)))
    check_grad(lambda x: F.group_norm(x, 2), make((3, 4, 5)))


def test_instance_norm():
    rm, rv = make((3,), seed=3), make((3,), low=0.5, high=2, seed=4)
    check(lambda x, rm, rv: F.instance_norm(x, rm, rv, use_input_stats=True), make((2, 3, 6)), rm, rv)
    check_grad(lambda x, w, b: F.instance_norm(x, weight=w, bias=b), make((2, 3, 6)), make((3,), seed=1),
               make((3,), seed=2))


# ---- weight norm ------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1])
def test_weight_norm_interface(dim):
    v = make((4, 5))
    g = make((4, 1) if dim == 0 else (1, 5), seed=1)
    check(lambda v, g: torch._weight_norm_interface(v, g, dim), v, g)
    w, norms = torch._weight_norm_interface(v, g, dim)
    gw = make((4, 5), seed=2)
    check(lambda *a: torch.ops.aten._weight_norm_interface_backward(*a, dim), gw, v, g, norms)


def test_weight_norm_grad():
    check_grad(lambda v, g: torch._weight_norm(v, g, 0), make((4, 5)), make((4, 1), seed=1))


# ---- binary cross entropy ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(reduction, dtype):
    x = make((4, 5), dtype, low=0.02, high=0.98)
    t = make((4, 5), dtype, low=0, high=1, seed=1)
    w = make((4, 5), dtype, low=0, high=2, seed=2)
    check(lambda x, t: F.binary_cross_entropy(x, t, reduction=reduction), x, t)
    check(lambda x, t, w: F.binary_cross_entropy(x, t, w, reduction=reduction), x, t, w)
    # (the target's gradient needs logit, another family's op)
    check_grad(lambda x: F.binary_cross_entropy(x, t.to(x.device), reduction=reduction), x)
    check_grad(lambda x: F.binary_cross_entropy(x, t.to(x.device), w.to(x.device), reduction=reduction), x)


def test_binary_cross_entropy_edges():
    x = torch.tensor([0.0, 1.0, 0.5, 1e-30])
    t = torch.tensor([0.0, 1.0, 1.0, 1.0])
    check(lambda x, t: F.binary_cross_entropy(x, t, reduction="none"), x, t)
    check(lambda x, t: F.binary_cross_entropy(noncontiguous(x), t, reduction="none"), make((3, 4), low=0.1, high=0.9),
          make((3, 4), low=0, high=1, seed=1))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_with_logits(reduction, dtype):
    x = make((4, 5), dtype, low=-30, high=30)
    t = make((4, 5), dtype, low=0, high=1, seed=1)
    w = make((5,), dtype, low=0, high=2, seed=2)
    pw = make((5,), dtype, low=0, high=3, seed=3)
    tol = dict(atol=5e-2, rtol=5e-2) if dtype == torch.bfloat16 else {}
    check(lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction=reduction), x, t, **tol)
    check(lambda x, t, w, pw: F.binary_cross_entropy_with_logits(x, t, w, reduction=reduction, pos_weight=pw), x, t, w, pw,
          **tol)
    check_grad(lambda x, t: F.binary_cross_entropy_with_logits(x, t, w.to(x.device), reduction=reduction,
                                                                pos_weight=pw.to(x.device)), x, t, **tol)


# ---- smooth L1 / Huber / soft margin ----------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("beta", [1.0, 0.5, 0.0])
def test_smooth_l1_and_huber(beta, reduction, dtype):
    x, t = make((4, 6), dtype), make((4, 6), dtype, seed=1)
    check_grad(lambda x, t: F.smooth_l1_loss(x, t, reduction=reduction, beta=beta), x, t)
    if beta > 0:
        check_grad(lambda x, t: F.huber_loss(x, t, reduction=reduction, delta=beta), x, t)


def test_smooth_l1_broadcast_noncontiguous():
    x, t = make((4, 6)), make((6,), seed=1)
    with pytest.warns(UserWarning):
        check(lambda x, t: F.smooth_l1_loss(noncontiguous(x), t, reduction="none"), x, t)
    check(lambda x, t: F.huber_loss(noncontiguous(x), t), x, make((4, 6), seed=2))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_soft_margin_loss(reduction, dtype):
    x = make((3, 5), dtype)
    t = make((3, 5), dtype, seed=1).sign()
    check_grad(lambda x: F.soft_margin_loss(x, t.to(x.device), reduction=reduction), x)


# ---- multi margin / multilabel margin -------------------------------------------------------------


# (CPU has no bfloat16 kernel for the margin losses)
@pytest.mark.parametrize("dtype", [torch.float32])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p,margin", [(1, 1.0), (2, 0.5)])
def test_multi_margin_loss(p, margin, reduction, dtype):
    x = make((4, 5), dtype)
    t = torch.tensor([0, 4, 2, 2])
    w = make((5,), dtype, low=0.1, high=2, seed=2)
    check_grad(lambda x: F.multi_margin_loss(x, t.to(x.device), p=p, margin=margin, reduction=reduction), x)
    check_grad(lambda x: F.multi_margin_loss(x, t.to(x.device), p=p, margin=margin, weight=w.to(x.device),
                                             reduction=reduction), x)
    check(lambda x, t: F.multi_margin_loss(x, t, reduction=reduction), make((5,), dtype), torch.tensor([3]))
    # One sample with a 0-d target: CPU's 'none' result is 0-d (the meta
    # kernel says [1]); a 0-d input too.
    for x0 in (make((5,), dtype), make((), dtype)):
        out = check(lambda x, t: F.multi_margin_loss(x, t, reduction=reduction), x0,
                    torch.tensor(3 if x0.dim() else 0))
        assert out.shape == torch.Size([])


@pytest.mark.parametrize("dtype", [torch.float32])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_margin_loss(reduction, dtype):
    x = make((3, 5), dtype)
    t = torch.tensor([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 1, 1, 1, 1]])
    check_grad(lambda x: F.multilabel_margin_loss(x, t.to(x.device), reduction=reduction), x)
    check(lambda x, t: F.multilabel_margin_loss(x, t, reduction=reduction), make((5,), dtype), t[0])


# ---- safe / masked softmax --------------------------------------------------------------------------


def test_safe_softmax():
    x = make((3, 4))
    x[1] = float("-inf")
    x[2, 1] = float("-inf")
    check(lambda x: torch.ops.aten._safe_softmax(x, -1), x)
    check(lambda x: torch.ops.aten._safe_softmax(x, 0), x)
    check(lambda x: torch.ops.aten._safe_softmax(x, 1, dtype=torch.float32), x.bfloat16())
    # The rule finds all-(-inf) slices by their max: a nan among -inf values
    # (max nan) still gives nan, as on CPU; an empty slice gives an empty result.
    y = make((3, 5))
    y[0] = float("-inf")
    y[0, 2] = float("nan")
    y[1, 0] = float("nan")
    y[2, :4] = float("-inf")
    check(lambda x: torch.ops.aten._safe_softmax(x, -1), y)
    check(lambda x: torch.ops.aten._safe_softmax(x, -1), make((2, 0)))
    check(lambda x: torch.ops.aten._safe_softmax(x, 0), make((0, 3)))


def test_masked_softmax():
    x = make((2, 3, 4))
    m = make((2, 3, 4), torch.bool)
    m[0, 1] = True
    check(lambda x, m: torch._masked_softmax(x, m), x, m)
    check(lambda x, m: torch._masked_softmax(x, m, 1), x, m)
    x4 = make((2, 2, 3, 3))
    km = torch.tensor([[False, True, False], [True, True, True]])
    check(lambda x, m: torch._masked_softmax(x, m, -1, 1), x4, km)
    y = torch._masked_softmax(x, m)
    g = make((2, 3, 4), seed=3)
    check(lambda g, y, m: torch.ops.aten._masked_softmax_backward(g, y, m, -1), g, y, m)


def test_sdpa_math_path():
    q, k, v = make((2, 3, 4, 8)), make((2, 3, 5, 8), seed=1), make((2, 3, 5, 8), seed=2)
    check_grad(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, k, v)
    mask = make((4, 5), torch.bool)
    check(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), q, k, v, mask)


# ---- CTC loss (short sequences: the time loop is unrolled) -------------------------------------------


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_ctc_loss(reduction):
    T, N, C = 6, 3, 5
    lp = make((T, N, C)).log_softmax(2)
    tg = torch.tensor([[1, 2, 2], [3, 1, 4], [2, 2, 2]])
    il, tl = [6, 5, 4], [3, 2, 0]
    check_grad(lambda lp: F.ctc_loss(lp, tg.to(lp.device), il, tl, reduction=reduction), lp)
    # concatenated 1-D targets, an impossible alignment (inf) and zero_infinity
    flat = torch.tensor([1, 2, 2, 3, 1, 2, 2, 2])
    check_grad(lambda lp: F.ctc_loss(lp, flat.to(lp.device), [6, 5, 2], [3, 2, 3], reduction=reduction,
                                     zero_infinity=True), lp)
