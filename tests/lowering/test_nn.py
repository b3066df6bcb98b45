"""nn lowering rules: softmax, log_softmax, layer_norm, embedding, dropout,
nll_loss / cross_entropy, mse_loss (forward vs CPU and gradients)."""

import pytest
import torch
import torch.nn.functional as F

from utils import assert_close, check, check_grad, make, noncontiguous, to_tpu

FLOATS = [torch.float32, torch.bfloat16]


# ---- softmax / log_softmax ---------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,dim", [((5,), 0), ((3, 7), -1), ((3, 7), 0), ((2, 3, 4), 1), ((), 0)])
@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax])
def test_softmax_forward(fn, shape, dim, dtype):
    check(lambda x: fn(x, dim), make(shape, dtype))


@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax])
def test_softmax_noncontiguous_and_half_to_float(fn):
    x = make((4, 6))
    check(lambda t: fn(noncontiguous(t), 1), x)
    # dtype= on a bf16 input goes through half_to_float=True.
    xb = make((4, 6), torch.bfloat16)
    check(lambda t: fn(t, 1, dtype=torch.float32), xb)
    assert fn(xb.to("tpu"), 1, dtype=torch.float32).dtype == torch.float32


def test_softmax_extremes():
    x = torch.tensor([[1000.0, 0.0, -1000.0], [float("-inf"), 0.0, 1.0], [5.0, float("-inf"), float("-inf")]])
    check(lambda t: torch.softmax(t, -1), x)
    check(lambda t: torch.log_softmax(t, -1), x)


def test_softmax_out():
    x = make((3, 5))
    check(lambda t, o: torch._softmax(t, 1, False, out=o), x, torch.empty(3, 5))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax])
def test_softmax_grad(fn, dtype):
    check_grad(lambda x: fn(x, -1), make((3, 5), dtype))
    check_grad(lambda x: fn(x, 0), make((4, 2), dtype))


# ---- layer norm ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,norm", [((4, 8), (8,)), ((2, 3, 5), (3, 5)), ((6,), (6,))])
def test_layer_norm_forward(shape, norm, dtype):
    x = make(shape, dtype)
    w = make(norm, dtype, seed=1)
    b = make(norm, dtype, seed=2)
    check(lambda x, w, b: F.layer_norm(x, norm, w, b), x, w, b)
    check(lambda x: F.layer_norm(x, norm), x)


def test_native_layer_norm_stats():
    x = make((2, 3, 4))
    out = check(lambda x: torch.native_layer_norm(x, [4], None, None, 1e-5), x)
    assert out[1].shape == (2, 3, 1) and out[2].shape == (2, 3, 1)
    out = check(lambda x: torch.native_layer_norm(x, [3, 4], None, None, 1e-3), x)
    assert out[1].shape == (2, 1, 1)


def test_layer_norm_noncontiguous():
    x = make((5, 6))
    w = make((6,), seed=1)
    check(lambda x, w: F.layer_norm(noncontiguous(x), (6,), noncontiguous(w)), x, w)


@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm_grad(dtype):
    # bf16: CPU rounds intermediate terms of the input gradient differently.
    tol = dict(atol=6e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}
    x, w, b = make((4, 6), dtype), make((6,), dtype, seed=1), make((6,), dtype, seed=2)
    check_grad(lambda x, w, b: F.layer_norm(x, (6,), w, b), x, w, b, **tol)
    check_grad(lambda x: F.layer_norm(x, (6,)), x, **tol)
    check_grad(lambda x, w, b: F.layer_norm(x, (2, 3), w, b), make((3, 2, 3), dtype),
               make((2, 3), dtype, seed=1), make((2, 3), dtype, seed=2), **tol)


def test_layer_norm_grad_weight_only():
    # The input needs no gradient: output_mask = [False, True, True].
    x = make((4, 6))
    w, b = make((6,), seed=1).requires_grad_(), make((6,), seed=2).requires_grad_()
    wt, bt = [t.detach().to("tpu").requires_grad_() for t in (w, b)]
    g = make((4, 6), seed=3)
    F.layer_norm(x, (6,), w, b).backward(g)
    F.layer_norm(x.to("tpu"), (6,), wt, bt).backward(g.to("tpu"))
    assert_close(wt.grad, w.grad)
    assert_close(bt.grad, b.grad)


# ---- embedding -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_embedding_forward(dtype):
    w = make((10, 4), dtype)
    idx = torch.tensor([[1, 2, 4], [4, 3, 9]])
    check(lambda w, i: F.embedding(i, w), w, idx)
    check(lambda w, i: F.embedding(i, w), w, torch.tensor(3))
    check(lambda w, i: F.embedding(i, w), w, idx.int())


@pytest.mark.parametrize("kw", [{}, {"padding_idx": 4}, {"padding_idx": -1}, {"scale_grad_by_freq": True}])
def test_embedding_grad(kw):
    w = make((10, 4))
    idx = torch.tensor([[1, 2, 4], [4, 3, 9], [1, 1, 1]])
    cpu_w = w.clone().requires_grad_()
    tpu_w = w.to("tpu").requires_grad_()
    g = make((3, 3, 4), seed=5)
    F.embedding(idx, cpu_w, **kw).backward(g)
    F.embedding(idx.to("tpu"), tpu_w, **kw).backward(g.to("tpu"))
    assert_close(tpu_w.grad, cpu_w.grad)


def test_embedding_dense_backward_bf16():
    g = make((5, 3), torch.bfloat16)
    idx = torch.tensor([0, 2, 2, 7, 0])
    check(lambda g, i: torch.ops.aten.embedding_dense_backward(g, i, 8, -1, False), g, idx)


def test_index_select_module_path():
    emb = torch.nn.Embedding(6, 3)
    x = torch.tensor([0, 5, 2])
    expected = emb(x)
    emb_t = torch.nn.Embedding(6, 3).to("tpu")
    emb_t.load_state_dict({k: v.to("tpu") for k, v in emb.state_dict().items()})
    assert_close(emb_t(x.to("tpu")), expected.detach())


# ---- dropout -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_dropout_p0_and_eval(dtype):
    x = make((4, 5), dtype)
    check(lambda x: F.dropout(x, 0.0, training=True), x)
    check(lambda x: F.dropout(x, 0.5, training=False), x)
    out, mask = torch.native_dropout(x.to("tpu"), 0.3, False)
    assert_close(out, x)
    assert mask.dtype == torch.bool and bool(mask.cpu().all())


def test_dropout_p0_grad():
    check_grad(lambda x: F.dropout(x, 0.0, training=True), make((3, 4)))


@pytest.mark.parametrize("p", [0.2, 0.5, 0.9])
def test_dropout_statistics(p):
    n = 200_000
    x = torch.full((n,), 2.0).to("tpu")
    out, mask = torch.native_dropout(x, p, True)
    out, mask = out.cpu(), mask.cpu()
    assert mask.dtype == torch.bool
    keep = mask.float().mean().item()
    assert abs(keep - (1 - p)) < 5 * (p * (1 - p) / n) ** 0.5 + 1e-3
    # Kept values are scaled by 1/(1-p), dropped ones are 0.
    assert torch.allclose(out[mask], torch.tensor(2.0 / (1 - p)))
    assert bool((out[~mask] == 0).all())


def test_dropout_grad_matches_mask():
    x = make((64, 32)).to("tpu").requires_grad_()
    out, mask = torch.native_dropout(x, 0.4, True)
    g = make((64, 32), seed=3)
    out.backward(g.to("tpu"))
    expected = g * mask.cpu() / 0.6
    assert_close(x.grad, expected)
    # F.dropout draws fresh masks each call.
    m1 = torch.native_dropout(x.detach(), 0.5, True)[1].cpu()
    m2 = torch.native_dropout(x.detach(), 0.5, True)[1].cpu()
    assert not torch.equal(m1, m2)


def test_dropout_module_bf16():
    x = torch.ones(10_000, dtype=torch.bfloat16).to("tpu")
    y = F.dropout(x, 0.25, training=True).cpu().float()
    assert set(y.unique().tolist()) <= {0.0, float(torch.tensor(1 / 0.75, dtype=torch.bfloat16))}
    assert abs(y.mean().item() - 1.0) < 0.05


# ---- nll_loss / cross_entropy ----------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_forward(reduction, weighted):
    x = torch.log_softmax(make((6, 5)), 1)
    t = torch.tensor([0, 4, 2, 2, 1, 3])
    w = make((5,), low=0.1, high=2.0, seed=3) if weighted else None
    check(lambda x, t, w: F.nll_loss(x, t, weight=w, reduction=reduction), x, t, w)
    check(lambda x, t, w: F.nll_loss(x, t, weight=w, reduction=reduction, ignore_index=2), x, t, w)
    # Unbatched input.
    check(lambda x, t, w: F.nll_loss(x, t, weight=w, reduction=reduction), x[1], t[1], w)


def test_nll_loss_raw_outputs():
    x = make((4, 3))
    t = torch.tensor([0, -100, 2, 1])
    for red in (0, 1, 2):
        check(lambda x, t: torch.ops.aten.nll_loss_forward(x, t, None, red, -100), x, t)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_loss_2d(reduction):
    x = make((2, 3, 4, 5))
    t = torch.randint(0, 3, (2, 4, 5), generator=torch.Generator().manual_seed(1))
    t[0, 0, 0] = -100
    w = make((3,), low=0.5, high=1.5, seed=2)
    check(lambda x, t, w: F.nll_loss(x, t, weight=w, reduction=reduction), x, t, w)
    check_grad(lambda x: F.nll_loss(x, t if x.device.type == "cpu" else t.to("tpu"), reduction=reduction), x,
               grad_out=make((2, 4, 5), seed=4) if reduction == "none" else torch.tensor(1.5))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kw", [{}, {"reduction": "sum"}, {"ignore_index": 1}, {"label_smoothing": 0.0}])
def test_cross_entropy_grad(dtype, kw):
    x = make((5, 7), dtype)
    t = torch.tensor([1, 0, 6, 3, 1])
    tt = t.to("tpu")
    check_grad(lambda x: F.cross_entropy(x, t if x.device.type == "cpu" else tt, **kw), x,
               grad_out=torch.tensor(1.0, dtype=dtype))


def test_cross_entropy_weighted_none_grad():
    x = make((5, 7))
    t = torch.tensor([1, 0, 6, 3, 1])
    w = make((7,), low=0.1, high=2.0, seed=9)
    tt, wt = t.to("tpu"), w.to("tpu")
    check_grad(lambda x: F.cross_entropy(x, t if x.device.type == "cpu" else tt,
                                         weight=w if x.device.type == "cpu" else wt, reduction="none"), x)


# ---- mse_loss -------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_mse_loss(reduction):
    a, b = make((3, 4)), make((3, 4), seed=1)
    check(lambda a, b: F.mse_loss(a, b, reduction=reduction), a, b)
    check_grad(lambda a, b: F.mse_loss(a, b, reduction=reduction), a, b,
               grad_out=make((3, 4), seed=2) if reduction == "none" else torch.tensor(0.7))


def test_mse_loss_bf16():
    a, b = make((8, 4), torch.bfloat16), make((8, 4), torch.bfloat16, seed=1)
    check(lambda a, b: F.mse_loss(a, b), a, b)
