"""CPU's argument checks that the engine makes itself (exec/arg_checks,
exec/meta_fixups): each case runs on CPU and on tpu, and must raise the same
exception type (or, for the valid cases, give the same result)."""

import pytest
import torch


def _same_error(fn):
    """fn(device) raises on CPU; tpu must raise the same type, twice (the
    second call would hit a cached program)."""
    with pytest.raises(Exception) as cpu_err:
        fn("cpu")
    for _ in range(2):
        with pytest.raises(type(cpu_err.value)):
            fn("tpu")
            torch.tpu.synchronize()


def _cat_into_expanded(d):
    out = torch.zeros(1, 5, device=d).expand(10, 5)
    torch.cat([torch.ones(5, 5, device=d), torch.ones(5, 5, device=d)], out=out)


def _cat_into_input(d):
    a = torch.ones(4, 6, device=d)
    torch.cat((torch.ones(0, device=d), a), dim=0, out=a)


def _gather_into_expanded(d):
    x = torch.ones(6, device=d)
    torch.gather(x, 0, torch.tensor([0, 1, 2], device=d), out=torch.zeros(1, device=d).expand(3))


def _gather_into_input(d):
    x = torch.ones(6, device=d)
    torch.gather(x, 0, torch.tensor([0, 1, 2, 3, 4, 5], device=d), out=x)


def _index_select_into_expanded(d):
    x = torch.ones(3, 6, device=d)
    torch.index_select(x, 1, torch.tensor([0, 1], device=d), out=torch.zeros(1, 6, device=d).expand(2, 6))


def _bernoulli_into_expanded(d):
    torch.bernoulli(torch.full((6,), 0.5, device=d), out=torch.zeros(1, device=d).expand(6))


def _add_partial_overlap(d):
    x = torch.arange(10.0, device=d)
    torch.add(x[:6], 1, out=x[2:8])


def _copy_partial_overlap(d):
    x = torch.arange(10.0, device=d)
    x[1:].copy_(x[:-1])  # computed as if the source were cloned before


def _transposed_copy_overlap(d):
    x = torch.arange(9.0, device=d).view(3, 3)
    x.t().copy_(x)


def _copy_into_expanded(d):
    torch.zeros(1, device=d).expand(4).copy_(torch.arange(4.0, device=d))


@pytest.mark.parametrize("fn", [_cat_into_expanded, _cat_into_input, _gather_into_expanded, _gather_into_input,
                                _index_select_into_expanded, _bernoulli_into_expanded, _add_partial_overlap,
                                _copy_partial_overlap, _transposed_copy_overlap, _copy_into_expanded])
def test_out_overlap_raises_like_cpu(fn):
    _same_error(fn)


@pytest.mark.parametrize("fn", [
    lambda d: torch.zeros(10, device=d).uniform_(3, -1),
    lambda d: torch.zeros(10, device=d).uniform_(-3e38, 3e38),
    lambda d: torch.zeros(10, device=d).bernoulli_(1.5),
    lambda d: torch.bernoulli(torch.zeros(10, device=d), -0.5),
    lambda d: torch.complex(torch.ones(3, device=d), torch.ones(3, device=d, dtype=torch.float64)),
    lambda d: torch.complex(torch.ones(3, device=d, dtype=torch.float64), torch.ones(3, device=d, dtype=torch.float64),
                            out=torch.empty(3, device=d, dtype=torch.complex64)),
    lambda d: torch.polar(torch.ones(3, device=d), torch.ones(3, device=d, dtype=torch.float64)),
])
def test_value_and_dtype_checks_like_cpu(fn):
    _same_error(fn)


def test_checks_run_after_a_valid_call_was_cached():
    x = torch.zeros(10, device="tpu")
    x.uniform_(0, 1)  # compiles and caches the program
    with pytest.raises(RuntimeError, match=r"from=3 > to=-1"):
        x.uniform_(3, -1)
    y = torch.zeros(6, device="tpu")
    torch.bernoulli(torch.full((6,), 0.5, device="tpu"), out=y)  # cached
    with pytest.raises(RuntimeError, match="single memory location"):
        torch.bernoulli(torch.full((6,), 0.5, device="tpu"), out=torch.zeros(1, device="tpu").expand(6))


def test_legal_aliasing_still_works():
    # In-place ops and out= that is exactly an input of an elementwise op are legal.
    a = torch.arange(6.0)
    b = a.to("tpu")
    torch.add(a, 1, out=a)
    torch.add(b, 1, out=b)
    b.mul_(b)
    a.mul_(a)
    assert torch.equal(a, b.cpu())


@pytest.mark.parametrize("op", ["native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm_eval_stats_like_cpu(op, dtype):
    torch.manual_seed(0)
    x, w, b = torch.randn(3, 2, 4, dtype=dtype), torch.randn(2, dtype=dtype), torch.randn(2, dtype=dtype)
    rm, rv = torch.randn(2, dtype=dtype), torch.rand(2, dtype=dtype) + 0.5
    f = getattr(torch.ops.aten, op)

    def call(*t):
        if op == "_native_batch_norm_legit_no_training":
            return f(*t, 0.1, 1e-5)
        return f(*t, False, 0.1, 1e-5)

    cpu = call(x, w, b, rm, rv)
    tpu = call(*(t.to("tpu") for t in (x, w, b, rm, rv)))
    for c, t in zip(cpu, tpu):
        assert c.shape == t.shape and c.dtype == t.dtype
        torch.testing.assert_close(t.cpu(), c, atol=2e-2, rtol=2e-2)


def test_batch_norm_train_bf16_stats_dtype_like_cpu():
    x, w = torch.randn(3, 2, 4, dtype=torch.bfloat16), torch.randn(2, dtype=torch.bfloat16)
    for params in [(w, w), (w.float(), w.float())]:
        cpu = torch.native_batch_norm(x, *params, None, None, True, 0.1, 1e-5)
        tpu = torch.native_batch_norm(x.to("tpu"), *(p.to("tpu") for p in params), None, None, True, 0.1, 1e-5)
        assert [t.dtype for t in tpu] == [c.dtype for c in cpu]
