"""Reductions on tpu against PyTorch CPU: sum, mean, amax/amin, max/min,
argmax/argmin, prod, var/std (+mean), all/any, logsumexp, norms, cumsum,
cumprod, count_nonzero, nansum, aminmax."""

import math

import pytest
import torch

from utils import assert_close, check, check_grad, make, noncontiguous

F32, BF16, I64, I32, BOOL = torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool


SHAPES = [(), (5,), (3, 4), (2, 3, 4)]


def dims_for(shape):
    """Some dim arguments valid for `shape` (None, ints, lists, negative, [])."""
    if len(shape) == 0:
        return [None, 0, -1, []]
    out = [None, 0, -1, []]
    if len(shape) >= 2:
        out.append([0, -1])
    if len(shape) >= 3:
        out.append([-3, 1])
    return out


# ---- sum / mean / nansum / prod ----------------------------------------------


@pytest.mark.parametrize("dtype", [F32, BF16, I64, I32, BOOL])
@pytest.mark.parametrize("shape", SHAPES)
def test_sum(shape, dtype):
    x = make(shape, dtype)
    check(torch.sum, x)
    for d in dims_for(shape):
        for keep in (False, True):
            if d is None:
                continue
            check(lambda t: torch.sum(t, d, keepdim=keep), x)


def test_sum_dtype_and_large():
    x = make((4, 5), I32)
    check(lambda t: torch.sum(t, dtype=torch.float32), x)
    check(lambda t: torch.sum(t, 1, dtype=torch.int32), x)
    y = make((3, 5), BF16)
    check(lambda t: torch.sum(t, 0, dtype=torch.float32), y)
    # bf16 accumulates in f32: 4096 ones sum exactly (bf16 accumulation would stall at 256).
    ones = torch.ones(4096, dtype=BF16)
    check(torch.sum, ones)
    check(torch.sum, make((1000, 37), F32), atol=1e-3, rtol=1e-5)


def test_sum_empty_noncontig_out():
    check(torch.sum, torch.zeros(0, 3))
    check(lambda t: torch.sum(t, 0), torch.zeros(0, 3))
    x = noncontiguous(make((3, 4, 5)))
    check(lambda t: torch.sum(t, [0, 2]), x)
    check(lambda t, o: torch.sum(t, 1, out=o), make((3, 4)), torch.empty(3))
    check(lambda t, o: torch.sum(t, 1, keepdim=True, out=o), make((3, 4)), torch.empty(0))


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("shape", SHAPES)
def test_mean(shape, dtype):
    x = make(shape, dtype)
    check(torch.mean, x)
    for d in dims_for(shape):
        if d is not None:
            check(lambda t: torch.mean(t, d, keepdim=True), x)
            check(lambda t: torch.mean(t, d), x)


def test_mean_misc():
    check(lambda t: torch.mean(t, 0), torch.zeros(0, 3))  # nan
    check(lambda t: torch.mean(t, dtype=torch.float32), make((3, 4), BF16))
    check(lambda t: torch.mean(t, 1), noncontiguous(make((3, 4))))
    check(lambda t, o: torch.mean(t, 0, out=o), make((3, 4)), torch.empty(4))
    with pytest.raises(RuntimeError):
        torch.mean(make((3,), I64).to("tpu"))


def test_nansum():
    x = make((4, 5))
    x[1, 2] = float("nan")
    x[3, 0] = float("nan")
    check(torch.nansum, x)
    check(lambda t: torch.nansum(t, 1, keepdim=True), x)
    check(torch.nansum, make((4,), I64))


@pytest.mark.parametrize("dtype", [F32, BF16, I64, BOOL])
def test_prod(dtype):
    x = make((3, 4), dtype, low=-2, high=2)
    check(torch.prod, x)
    check(lambda t: torch.prod(t, 0), x)
    check(lambda t: torch.prod(t, -1, keepdim=True), x)
    check(torch.prod, make((), dtype))
    check(lambda t: torch.prod(t, 0), torch.zeros(0, 2, dtype=dtype))


def test_prod_dtype_out():
    check(lambda t: torch.prod(t, 1, dtype=torch.float32), make((3, 4), I64))
    check(lambda t, o: torch.prod(t, 1, out=o), make((3, 4)), torch.empty(3))


# ---- extremes -------------------------------------------------------------------------


def with_nans(shape):
    x = make(shape)
    x.view(-1)[1] = float("nan")
    x.view(-1)[-2] = float("nan")
    return x


@pytest.mark.parametrize("op", [torch.amax, torch.amin])
@pytest.mark.parametrize("dtype", [F32, BF16, I64, I32, BOOL])
def test_amax_amin(op, dtype):
    x = make((2, 3, 4), dtype)
    check(op, x)
    check(lambda t: op(t, 1), x)
    check(lambda t: op(t, [0, -1], keepdim=True), x)
    check(lambda t: op(t, []), x)
    check(lambda t: op(t, 0), make((), dtype))


@pytest.mark.parametrize("op", [torch.amax, torch.amin])
def test_amax_amin_nan_inf_out(op):
    check(lambda t: op(t, 1), with_nans((3, 4)))
    check(op, with_nans((3, 4)))
    check(lambda t: op(t, 0), torch.tensor([[float("inf"), -float("inf")], [1.0, 2.0]]))
    check(lambda t, o: op(t, 1, out=o), make((3, 4)), torch.empty(3))
    check(lambda t: op(t, 0), noncontiguous(make((3, 4))))


@pytest.mark.parametrize("op", [torch.max, torch.min])
@pytest.mark.parametrize("dtype", [F32, BF16, I64, I32, BOOL])
def test_max_min_full(op, dtype):
    check(op, make((3, 4), dtype))
    check(op, make((), dtype))


@pytest.mark.parametrize("op", [torch.max, torch.min])
@pytest.mark.parametrize("dtype", [F32, BF16, I64, I32, BOOL])
def test_max_min_dim(op, dtype):
    # Few distinct values: many ties, the index must be the first occurrence.
    x = make((4, 5, 6), dtype, low=-1, high=1)
    for d in (0, 1, -1):
        for keep in (False, True):
            check(lambda t: tuple(op(t, d, keepdim=keep)), x)
    check(lambda t: tuple(op(t, 0)), make((), dtype))


@pytest.mark.parametrize("op", [torch.max, torch.min])
def test_max_min_nan_out_noncontig(op):
    check(op, with_nans((3, 4)))
    check(lambda t: tuple(op(t, 1)), with_nans((3, 4)))
    check(lambda t: tuple(op(t, 0)), with_nans((3, 4)))
    x = make((3, 4))
    check(lambda t, v, i: tuple(op(t, 1, out=(v, i))), x, torch.empty(3), torch.empty(3, dtype=I64))
    check(lambda t: tuple(op(t, 0)), noncontiguous(make((3, 4), low=-1, high=1)))
    with pytest.raises((RuntimeError, IndexError)):
        op(torch.zeros(0, 3).to("tpu"))


# uint8 (images) built its identity as a signed constant first, which XLA
# refused to parse: argmax/max.dim of any uint8 tensor failed to compile.
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16])
def test_arg_reductions_of_small_integer_types(dtype):
    x = make((3, 4, 5), dtype, low=0 if dtype == torch.uint8 else -100, high=250 if dtype == torch.uint8 else 100)
    for op in (torch.argmax, torch.argmin):
        check(op, x)
        check(lambda t: op(t, 1), x)
    check(lambda t: tuple(torch.max(t, 0)), x)
    check(lambda t: tuple(torch.min(t, -1)), x)


# uint64 values at or above 2^63: CPU has no uint64 min/max kernels, and
# ours started min-reductions from INT64_MAX (min, amin, min.dim came out
# 2^63 - 1) or from 0 (argmin and cummin: index 0 or -1, value 0).
def test_uint64_extremes_above_2_pow_63():
    def u64(t):  # torch cannot convert uint64 above 2^63 to a Python int
        return [v % 2**64 for v in t.cpu().view(torch.int64).reshape(-1).tolist()]

    vals = [2**63 + 5, 2**63 + 1, 2**64 - 1, 2**63 + 9, 7 + 2**63]
    x = torch.tensor(vals, dtype=torch.uint64).to("tpu")
    lo, hi = min(vals), max(vals)
    assert u64(x.min()) == [lo] and u64(x.amin(0)) == [lo] and u64(x.max()) == [hi]
    assert int(x.argmin()) == vals.index(lo) and int(x.argmax()) == vals.index(hi)
    v, i = x.min(0)
    assert (u64(v), int(i)) == ([lo], vals.index(lo))
    mn, mx = torch.aminmax(x)
    assert (u64(mn), u64(mx)) == ([lo], [hi])
    run = [min(vals[: k + 1]) for k in range(len(vals))]
    cm = x.cummin(0)
    assert u64(cm.values) == run
    assert cm.indices.cpu().tolist() == [vals.index(r) for r in run]
    idx = torch.tensor([0, 0, 1, 1, 1]).to("tpu")
    got = torch.zeros(2, dtype=torch.uint64).to("tpu").scatter_reduce(0, idx, x, "amin", include_self=False)
    assert u64(got) == [min(vals[:2]), min(vals[2:])]


@pytest.mark.parametrize("op", [torch.argmax, torch.argmin])
@pytest.mark.parametrize("dtype", [F32, BF16, I64, I32])
def test_argmax_argmin(op, dtype):
    x = make((3, 4, 5), dtype, low=-1, high=1)
    check(op, x)
    check(lambda t: op(t, keepdim=True), x)
    for d in (0, 1, -1):
        check(lambda t: op(t, d), x)
        check(lambda t: op(t, d, keepdim=True), x)
    check(op, make((), dtype))
    check(lambda t: op(t, 0), make((), dtype))


def test_argmax_nan_out():
    with pytest.raises(RuntimeError):  # like CPU: no bool argmax
        torch.argmax(make((3,), BOOL).to("tpu"))
    check(torch.argmax, with_nans((3, 4)))
    check(lambda t: torch.argmin(t, 1), with_nans((3, 4)))
    check(lambda t, o: torch.argmax(t, 1, out=o), make((3, 4)), torch.empty(3, dtype=I64))


def test_aminmax():
    x = make((3, 4), low=-1, high=1)
    check(lambda t: tuple(torch.aminmax(t)), x)
    check(lambda t: tuple(torch.aminmax(t, dim=1, keepdim=True)), x)
    check(lambda t: tuple(torch.aminmax(t, dim=0)), make((3, 4), I64))


# ---- var / std ----------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
@pytest.mark.parametrize("op", [torch.var, torch.std])
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_var_std(op, dtype):
    x = make((3, 4, 5), dtype)
    check(op, x)
    check(lambda t: op(t, unbiased=False), x)
    for d in (0, -1, [0, 2], None, []):
        for c in (0, 1, 2, 0.5):
            check(lambda t: op(t, d, correction=c), x)
        check(lambda t: op(t, d, keepdim=True), x)
    check(lambda t: op(t, 1), make((3, 1)))  # N - correction == 0: nan
    check(lambda t: op(t, 0, correction=3), make((2, 3)))  # negative dof clamps to 0: inf
    check(op, make(()))


@pytest.mark.parametrize("op", [torch.var_mean, torch.std_mean])
def test_var_mean_std_mean(op):
    x = make((3, 4, 5))
    check(lambda t: tuple(op(t)), x)
    check(lambda t: tuple(op(t, 1, correction=0, keepdim=True)), x)
    check(lambda t: tuple(op(t, [0, 2])), noncontiguous(x))
    check(lambda t: tuple(op(t, 0)), make((3, 4), BF16))


def test_var_std_out_errors():
    check(lambda t, o: torch.var(t, 1, out=o), make((3, 4)), torch.empty(3))
    check(lambda t, o: torch.std(t, 0, keepdim=True, out=o), make((3, 4)), torch.empty(1, 4))
    with pytest.raises(RuntimeError):
        torch.var(make((3,), I64).to("tpu"))


# ---- all / any / count_nonzero -----------------------------------------------------------


@pytest.mark.parametrize("op", [torch.all, torch.any])
@pytest.mark.parametrize("dtype", [F32, I64, BOOL, torch.uint8])
def test_all_any(op, dtype):
    x = make((3, 4, 5), dtype, low=0, high=2) if dtype != BOOL else make((3, 4, 5), dtype)
    if dtype == F32:
        x = torch.where(x < 0.5, torch.zeros_like(x), x)
        x[0, 0, 0] = float("nan")  # NaN is true
    check(op, x)
    for d in (0, -1):
        check(lambda t: op(t, d), x)
        check(lambda t: op(t, d, keepdim=True), x)
    check(lambda t: op(t, dim=(0, 2)), x)
    # No dims: elementwise truth; ATen computes it with `ne` before reaching us.
    check(lambda t: op(t, dim=()), x)
    check(op, make((), dtype, low=0, high=2))
    check(op, torch.zeros(0, 2, dtype=dtype))
    check(lambda t: op(t, 1), noncontiguous(make((3, 4), BOOL)))


def test_all_any_out():
    x = make((3, 4), BOOL)
    check(lambda t, o: torch.all(t, 1, out=o), x, torch.empty(3, dtype=BOOL))
    check(lambda t, o: torch.any(t, out=o), x, torch.empty((), dtype=BOOL))


def test_count_nonzero():
    x = make((3, 4, 5), I64, low=-1, high=1)
    check(torch.count_nonzero, x)
    check(lambda t: torch.count_nonzero(t, 1), x)
    check(lambda t: torch.count_nonzero(t, (0, -1)), x)
    check(torch.count_nonzero, make((3, 4), BOOL))
    check(lambda t: torch.count_nonzero(t, 0), make((3, 4), F32, low=-1, high=1).round())


# ---- logsumexp and norms ----------------------------------------------------------------


# torch.logsumexp has a CompositeExplicitAutograd kernel: ATen decomposes it
# (amax, abs, eq, masked_fill, sub, exp, sum, log, add) unless the core routes
# it to the `logsumexp` rule.
@pytest.mark.parametrize("dtype", [F32, BF16, I64])
def test_logsumexp(dtype):
    x = make((3, 4, 5), dtype, low=-5, high=5)
    check(lambda t: torch.logsumexp(t, 1), x)
    check(lambda t: torch.logsumexp(t, (0, -1), keepdim=True), x)
    check(lambda t: torch.logsumexp(t, 0), make((), dtype))


def test_logsumexp_special():
    inf = float("inf")
    x = torch.tensor([[1.0, 2.0, 3.0], [-inf, -inf, -inf], [inf, 1.0, 2.0], [float("nan"), 1.0, 0.0], [1e30, 1e30, 0.0]])
    check(lambda t: torch.logsumexp(t, 1), x)
    check(lambda t: torch.logsumexp(t, 0), torch.zeros(0, 3))
    check(lambda t, o: torch.logsumexp(t, 1, out=o), make((3, 4)), torch.empty(3))
    check(lambda t: torch.logsumexp(t, 0), noncontiguous(make((3, 4))))


ORDS = [2, 1, float("inf"), -float("inf"), 0, 3, 0.5, -1]


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_vector_norm(dtype):
    x = make((3, 4, 5), dtype)
    x[0, 1, 2] = 0
    # The order is a runtime operand: the same shapes run every ord.
    for o in ORDS:
        check(lambda t: torch.linalg.vector_norm(t, o), x)
        check(lambda t: torch.linalg.vector_norm(t, o, dim=(0, 2), keepdim=True), x)
        check(lambda t: torch.linalg.vector_norm(t, o, dim=-1), x)


def test_norm_variants():
    x = make((4, 6))
    for p in (2, 1, float("inf"), 3.0):
        check(lambda t: torch.norm(t, p), x)
        check(lambda t: torch.norm(t, p, dim=1), x)
        check(lambda t: torch.norm(t, p, dim=[0], keepdim=True), x)
    check(lambda t: torch.norm(t), x)
    check(lambda t: torch.ops.aten.norm.ScalarOpt_dim(t, None, [1]), x)
    check(lambda t: torch.linalg.vector_norm(t, 2, dtype=torch.float32), make((4, 6), BF16))
    check(lambda t: torch.norm(t, 2, dim=1, dtype=torch.float32), make((4, 6), BF16))
    check(lambda t: torch.linalg.vector_norm(t, 2, dim=0), noncontiguous(x))
    check(lambda t, o: torch.linalg.vector_norm(t, 2, dim=1, out=o), x, torch.empty(4))
    check(lambda t: torch.linalg.vector_norm(t), torch.zeros(3, 2))
    with pytest.raises(RuntimeError):
        torch.linalg.vector_norm(make((3,), I64).to("tpu"))


# ---- cumulative -----------------------------------------------------------------------


@pytest.mark.parametrize("op", [torch.cumsum, torch.cumprod])
@pytest.mark.parametrize("dtype", [F32, BF16, I64, I32, BOOL])
def test_cumsum_cumprod(op, dtype):
    lo, hi = (-1.5, 1.5) if op is torch.cumprod else (-3, 3)
    x = make((3, 17), dtype, low=lo, high=hi)
    check(lambda t: op(t, 1), x)
    check(lambda t: op(t, 0), x)
    check(lambda t: op(t, -1), make((7,), dtype, low=lo, high=hi))
    check(lambda t: op(t, 0), make((), dtype))


def test_cumsum_misc():
    check(lambda t: torch.cumsum(t, 1, dtype=torch.float32), make((3, 4), I64))
    check(lambda t: torch.cumsum(t, 0), torch.zeros(0, 3))
    check(lambda t: torch.cumsum(t, 0), noncontiguous(make((5, 4))))
    check(lambda t: torch.cumsum(t, 0), make((1000,)), atol=1e-4, rtol=1e-5)
    check(lambda t, o: torch.cumsum(t, 1, out=o), make((3, 4)), torch.empty(3, 4))
    check(lambda t: t.cumsum_(0), make((3, 4)))


def test_dims_select_the_program():
    # Same shapes, different dims: each must get its own program.
    x = make((3, 3))
    for d in (0, 1, -1, [0], [1]):
        check(lambda t: torch.sum(t, d), x)
        check(lambda t: torch.var(t, d), x)
        check(lambda t: torch.amax(t, d), x)
        check(lambda t: torch.count_nonzero(t, d), x.round())
    for d in (0, 1, None):
        check(lambda t: torch.argmax(t, d), x)
        check(lambda t: tuple(torch.aminmax(t, dim=d)), x)


# ---- gradients --------------------------------------------------------------------------


def test_grad_sum_mean():
    x = make((3, 4))
    check_grad(lambda t: t.sum(), x)
    check_grad(lambda t: t.sum(1), x)
    check_grad(lambda t: t.sum((0, 1), keepdim=True), x)
    check_grad(lambda t: t.mean(), x)
    check_grad(lambda t: t.mean(0), x)


def test_grad_extremes():
    x = make((3, 4), low=-1, high=1).round()  # ties: gradient split (amax) / first index (max.dim)
    check_grad(lambda t: t.amax(1), x)
    check_grad(lambda t: t.amin(), x)
    check_grad(lambda t: t.max(1).values, x)
    check_grad(lambda t: t.min(0).values, x)
    check_grad(lambda t: t.max(), make((3, 4)))


def test_grad_var_std():
    x = make((3, 4))
    check_grad(lambda t: t.var(1), x)
    check_grad(lambda t: t.std(), x)
    check_grad(lambda t: t.var(0, correction=0), x)
    check_grad(lambda t: torch.var_mean(t, 1)[0], x)


def test_grad_logsumexp_norm():
    x = make((3, 4))
    check_grad(lambda t: torch.logsumexp(t, 1), x)
    check_grad(lambda t: torch.linalg.vector_norm(t), x)
    check_grad(lambda t: torch.linalg.vector_norm(t, 1, dim=1), x)
    check_grad(lambda t: t.norm(dim=0), x)
    check_grad(lambda t: torch.cumsum(t, 1), x)
    check_grad(lambda t: torch.prod(t, 1), x)


def test_float16():
    x = make((4, 50), torch.float16)
    check(lambda t: torch.sum(t, 1), x)
    check(lambda t: torch.mean(t, 0), x)
    check(lambda t: torch.var(t, 1), x)
    check(lambda t: tuple(torch.max(t, 1)), x)
    check(lambda t: torch.linalg.vector_norm(t, 2, dim=1), x)
    check(lambda t: torch.cumsum(t, 1), x, atol=1e-2, rtol=1e-3)
