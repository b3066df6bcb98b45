"""Matrix products on tpu against PyTorch CPU: mm, bmm, addmm, baddbmm,
addbmm, mv, addmv, dot, vdot, and the composites built on them (matmul,
nn.functional.linear) with their gradients."""


import pytest
import torch
import torch.nn.functional as F

from utils import assert_close, check, check_grad, make, noncontiguous

F32, BF16, I64, I32 = torch.float32, torch.bfloat16, torch.int64, torch.int32
DTYPES = [F32, BF16, I64]


def tol(dtype):
    # bf16 products of O(1) values over k~16 terms: CPU rounds once too, but
    # summation order differs.
    return dict(atol=5e-2, rtol=2e-2) if dtype == BF16 else {}


@pytest.mark.parametrize("dtype", DTYPES + [I32])
@pytest.mark.parametrize("n,k,m", [(3, 4, 5), (1, 1, 1), (6, 16, 1), (2, 0, 3), (0, 3, 2)])
def test_mm(n, k, m, dtype):
    check(torch.mm, make((n, k), dtype), make((k, m), dtype, seed=1), **tol(dtype))


def test_mm_layouts_out():
    a, b = make((4, 6)), make((6, 5), seed=1)
    check(torch.mm, noncontiguous(a), noncontiguous(b))
    check(lambda x, y: torch.mm(x.t(), y.t()), make((6, 4)), make((5, 6), seed=1))
    check(lambda x, y, o: torch.mm(x, y, out=o), a, b, torch.empty(4, 5))
    check(lambda x, y, o: torch.mm(x, y, out=o), a, b, torch.empty(0))
    # Precision: large values must not go through bf16 passes.
    big = make((8, 64), low=-1000, high=1000)
    check(torch.mm, big, make((64, 8), seed=2), atol=1e-2, rtol=1e-5)
    with pytest.raises(RuntimeError):
        torch.mm(make((2, 3)).to("tpu"), make((4, 2)).to("tpu"))
    with pytest.raises(RuntimeError):
        torch.mm(make((2, 3)).to("tpu"), make((3, 2), BF16).to("tpu"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_bmm(dtype):
    check(torch.bmm, make((3, 4, 5), dtype), make((3, 5, 2), dtype, seed=1), **tol(dtype))
    check(torch.bmm, make((1, 1, 7), dtype), make((1, 7, 1), dtype, seed=1), **tol(dtype))
    check(torch.bmm, noncontiguous(make((2, 3, 4), dtype)), make((2, 4, 3), dtype, seed=1).transpose(1, 2).contiguous().transpose(1, 2), **tol(dtype))
    check(lambda x, y, o: torch.bmm(x, y, out=o), make((2, 3, 4), dtype), make((2, 4, 5), dtype, seed=1), torch.empty(2, 3, 5, dtype=dtype), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_addmm(dtype):
    a, b = make((3, 4), dtype), make((4, 5), dtype, seed=1)
    for bias_shape in [(3, 5), (5,), (1, 5), (3, 1), ()]:
        check(torch.addmm, make(bias_shape, dtype, seed=2), a, b, **tol(dtype))
    ab = dict(beta=2, alpha=3) if dtype == I64 else dict(beta=0.5, alpha=-1.5)
    check(lambda s, x, y: torch.addmm(s, x, y, **ab), make((3, 5), dtype, seed=2), a, b, **tol(dtype))
    check(lambda s, x, y: torch.addmm(s, x, y, beta=0), make((3, 5), dtype, seed=2), a, b, **tol(dtype))
    check(lambda s, x, y: s.addmm_(x, y, alpha=2), make((3, 5), dtype, seed=2), a, b, **tol(dtype))
    check(lambda s, x, y, o: torch.addmm(s, x, y, out=o), make((5,), dtype), a, b, torch.empty(3, 5, dtype=dtype), **tol(dtype))


def test_addmm_beta_zero_ignores_nan():
    s = torch.full((3, 5), float("nan"))
    a, b = make((3, 4)), make((4, 5), seed=1)
    check(lambda s, x, y: torch.addmm(s, x, y, beta=0), s, a, b)
    check(lambda s, x, y: torch.addmm(s, x, y, beta=0.0, alpha=2.0), s, a, b)
    check(lambda s, x, y: torch.addmm(s, x, y, beta=1.0), s, a, b)  # nan propagates
    # The same program serves different beta values (a runtime operand).
    check(lambda s, x, y: torch.addmm(s, x, y, beta=2.0), make((3, 5), seed=3), a, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_baddbmm_addbmm(dtype):
    b1, b2 = make((2, 3, 4), dtype), make((2, 4, 5), dtype, seed=1)
    check(torch.baddbmm, make((2, 3, 5), dtype, seed=2), b1, b2, **tol(dtype))
    check(torch.baddbmm, make((5,), dtype, seed=2), b1, b2, **tol(dtype))
    ab = dict(beta=2, alpha=3) if dtype == I64 else dict(beta=0.5, alpha=2.0)
    check(lambda s, x, y: torch.baddbmm(s, x, y, **ab), make((2, 3, 5), dtype, seed=2), b1, b2, **tol(dtype))
    check(lambda s, x, y: torch.baddbmm(s, x, y, beta=0), torch.full((2, 3, 5), float("nan")).to(dtype) if dtype != I64 else make((2, 3, 5), dtype), b1, b2, **tol(dtype))
    check(torch.addbmm, make((3, 5), dtype, seed=2), b1, b2, **tol(dtype))
    check(lambda s, x, y: torch.addbmm(s, x, y, **ab), make((5,), dtype, seed=2), b1, b2, **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_mv_addmv_dot(dtype):
    m, v = make((4, 6), dtype), make((6,), dtype, seed=1)
    check(torch.mv, m, v, **tol(dtype))
    check(torch.mv, noncontiguous(m), v, **tol(dtype))
    check(torch.addmv, make((4,), dtype, seed=2), m, v, **tol(dtype))
    check(torch.addmv, make((), dtype, seed=2), m, v, **tol(dtype))
    ab = dict(beta=2, alpha=3) if dtype == I64 else dict(beta=0.5, alpha=2.0)
    check(lambda s, x, y: torch.addmv(s, x, y, **ab), make((4,), dtype, seed=2), m, v, **tol(dtype))
    check(torch.dot, make((7,), dtype), make((7,), dtype, seed=1), **tol(dtype))
    check(torch.vdot, make((7,), dtype), make((7,), dtype, seed=1), **tol(dtype))
    check(torch.dot, make((0,), dtype), make((0,), dtype, seed=1))
    check(lambda x, y, o: torch.dot(x, y, out=o), make((5,), dtype), make((5,), dtype, seed=1), torch.empty((), dtype=dtype), **tol(dtype))
    check(lambda x, y, o: torch.mv(x, y, out=o), m, v, torch.empty(4, dtype=dtype), **tol(dtype))


MATMUL_SHAPES = [
    ((5,), (5,)),
    ((3, 5), (5,)),
    ((5,), (5, 4)),
    ((3, 5), (5, 4)),
    ((2, 3, 5), (5, 4)),
    ((2, 3, 5), (2, 5, 4)),
    ((2, 1, 3, 5), (4, 5, 2)),
    ((5,), (2, 5, 4)),
    ((2, 3, 5), (5,)),
]


@pytest.mark.parametrize("dtype", [F32, BF16, I64])
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul(sa, sb, dtype):
    check(torch.matmul, make(sa, dtype), make(sb, dtype, seed=1), **tol(dtype))


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 6), (6,)])
def test_linear(shape, dtype):
    x, w, b = make(shape, dtype), make((5, 6), dtype, seed=1), make((5,), dtype, seed=2)
    check(F.linear, x, w, b, **tol(dtype))
    check(F.linear, x, w, **tol(dtype))


# ---- gradients ----------------------------------------------------------------------


def test_grad_mm_bmm():
    check_grad(torch.mm, make((3, 4)), make((4, 5), seed=1))
    check_grad(torch.bmm, make((2, 3, 4)), make((2, 4, 5), seed=1))
    check_grad(torch.mv, make((3, 4)), make((4,), seed=1))
    check_grad(torch.dot, make((4,)), make((4,), seed=1))


def test_transposed_lhs_products():
    # A lhs read through a transposed view (autograd's weight gradient
    # grad_out.t() @ x, bmm's backward) is kept a transpose on XLA:CPU
    # (linalg.cpp: unfolded_transposed_lhs) so the dot goes to YNNPACK; the
    # products must not change. Sizes as the small GPT's, a slice of a wider
    # storage, an elementwise producer fused with the transpose, a size-1 edge.
    g, x = make((64, 24)), make((64, 16), seed=1)
    check(lambda g, x: torch.mm(g.t(), x), g, x)
    check(lambda g, x: torch.mm((g * 2 + 1).t(), x), g, x)
    check(lambda g, x: torch.mm(g[:, 4:20].t(), x), g, x)
    check(lambda g, x: torch.mm(g[:1].t(), x[:1]), g, x)
    check(lambda b, g, x: torch.addmm(b, g.t(), x, beta=0.5, alpha=2.0), make((16,), seed=2), g, x)
    a, b = make((4, 32, 8)), make((4, 32, 16), seed=1)
    check(lambda a, b: torch.bmm(a.transpose(1, 2), b), a, b)
    check(lambda c, a, b: torch.baddbmm(c, a.transpose(1, 2), b), make((4, 8, 16), seed=2), a, b)
    check(lambda a, b: torch.matmul(a.transpose(1, 2), b), a, b)
    check(lambda a, b: torch.mm(a.t(), b), make((8, 6), BF16), make((8, 5), BF16, seed=1), **tol(BF16))
    check_grad(lambda w, x: F.linear(x, w).tanh().sum(), make((24, 16)), make((2, 32, 16), seed=1))


def test_grad_addmm():
    check_grad(torch.addmm, make((5,)), make((3, 4), seed=1), make((4, 5), seed=2))
    check_grad(torch.addmm, make((3, 5)), make((3, 4), seed=1), make((4, 5), seed=2))
    check_grad(lambda s, a, b: torch.addmm(s, a, b, beta=0.5, alpha=2.0), make((3, 5)), make((3, 4), seed=1), make((4, 5), seed=2))
    check_grad(torch.baddbmm, make((2, 3, 5)), make((2, 3, 4), seed=1), make((2, 4, 5), seed=2))


@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 6)])
def test_grad_linear(shape):
    check_grad(F.linear, make(shape), make((5, 6), seed=1), make((5,), seed=2))
    check_grad(F.linear, make(shape), make((5, 6), seed=1))


@pytest.mark.parametrize("sa,sb", [((3, 5), (5, 4)), ((2, 3, 5), (5, 4)), ((2, 3, 5), (2, 5, 4)), ((5,), (5, 4)), ((3, 5), (5,))])
def test_grad_matmul(sa, sb):
    check_grad(torch.matmul, make(sa), make(sb, seed=1))


def test_mlp_training_step():
    """Two linear layers, a loss built from our ops, backward, SGD update."""
    cpu = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Linear(8, 3))
    tpu = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Linear(8, 3))
    tpu.load_state_dict(cpu.state_dict())
    tpu = tpu.to("tpu")
    x = make((4, 6))

    def step(model, inp):
        out = model(inp)
        loss = out.sum()
        loss.backward()
        return loss

    lc = step(cpu, x)
    lt = step(tpu, x.to("tpu"))
    assert_close(lt, lc.detach())
    for (n, pc), pt in zip(cpu.named_parameters(), tpu.parameters()):
        assert_close(pt.grad, pc.grad)


def test_float16():
    check(torch.mm, make((4, 32), torch.float16), make((32, 3), torch.float16, seed=1), atol=1e-2, rtol=1e-3)
    check(torch.addmm, make((3,), torch.float16), make((4, 8), torch.float16), make((8, 3), torch.float16, seed=1),
          atol=1e-2, rtol=1e-3)
