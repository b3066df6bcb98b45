"""csrc/lowering/index_extra.cpp and embedding.cpp: scatter_reduce, index_*,
take, put, masked_scatter, view scatters, unfold_backward, embedding bags."""

import pytest
import torch
import torch.nn.functional as F

from utils import check, check_grad, make, noncontiguous

G = torch.Generator


def rand_index(high, shape, seed=1):
    return torch.randint(0, high, shape, generator=G().manual_seed(seed))


# ---- scatter family ---------------------------------------------------------------

@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_scatter_reduce(reduce, include_self, dtype):
    x = make((4, 5), dtype)
    src = make((3, 5), dtype, seed=2)
    idx = rand_index(4, (3, 4))
    check(lambda a, s, i: a.scatter_reduce(0, i, s, reduce, include_self=include_self), x, src, idx)
    idx1 = rand_index(5, (4, 3), seed=4)
    check(lambda a, s, i: a.scatter_reduce_(-1, i, s, reduce, include_self=include_self), x, make((4, 6), dtype), idx1)


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax"])
def test_scatter_reduce_bfloat16(reduce):
    idx = rand_index(4, (3, 4))
    check(lambda a, s, i: a.scatter_reduce(0, i, s, reduce, include_self=False), make((4, 5), torch.bfloat16),
          make((3, 5), torch.bfloat16, seed=2), idx)


@pytest.mark.parametrize("reduce", ["sum", "amax", "amin", "prod"])
def test_scatter_reduce_bool_and_out(reduce):
    x = make((6,), torch.bool)
    idx = torch.tensor([0, 2, 2, 5])
    check(lambda a, s, i: a.scatter_reduce(0, i, s, reduce), x, make((4,), torch.bool, seed=3), idx)
    out = torch.empty(6)
    check(lambda a, s, i, o: torch.scatter_reduce(a, 0, i, s, reduce, include_self=False, out=o),
          make((6,)), make((4,), seed=3), idx, out)


def test_scatter_reduce_noncontiguous_and_0dim():
    x = noncontiguous(make((5, 4)))
    check(lambda a, s, i: a.scatter_reduce(1, i, s, "mean", include_self=False), x, make((5, 4), seed=2),
          noncontiguous(rand_index(4, (5, 4))))
    check(lambda a, s, i: a.scatter_reduce(0, i, s, "sum"), make(()), make((), seed=1), torch.tensor(0))


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "prod"])
def test_scatter_reduce_grad(reduce):
    idx = torch.tensor([[0, 1, 2], [0, 1, 3], [1, 1, 2]])
    check_grad(lambda a, s: a.scatter_reduce(1, idx.to(a.device), s, reduce, include_self=False),
               make((3, 4)), make((3, 3), seed=2))


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_with_reduce_argument(reduce):
    idx = rand_index(4, (3, 5))
    check(lambda a, s, i: a.scatter(0, i, s, reduce=reduce), make((4, 5)), make((3, 5), seed=2), idx)
    check(lambda a, i: a.scatter_(0, i, 1.5, reduce=reduce), make((4, 5)), idx)


# ---- index_* ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_index_add(dtype):
    idx = torch.tensor([0, 3, 0, 2])
    check(lambda a, s, i: a.index_add(1, i, s), make((3, 5), dtype), make((3, 4), dtype, seed=2), idx)
    if dtype != torch.bool:
        check(lambda a, s, i: a.index_add_(0, i, s, alpha=2), make((5, 3), dtype), make((4, 3), dtype, seed=2), idx)


def test_index_add_out_noncontiguous_0dim_and_grad():
    idx = torch.tensor([2, 0])
    out = torch.empty(4, 3)
    check(lambda a, s, i, o: torch.index_add(a, 0, i, s, alpha=-1.5, out=o), noncontiguous(make((4, 3))),
          noncontiguous(make((2, 3), seed=1)), idx, out)
    check(lambda a, s, i: a.index_add(0, i, s), make(()), make((), seed=1), torch.tensor([0]))
    check_grad(lambda a, s: a.index_add(1, torch.tensor([1, 1, 0]).to(a.device), s, alpha=3),
               make((2, 4)), make((2, 3), seed=1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_index_copy_and_fill(dtype):
    idx = torch.tensor([3, 0, 1])
    check(lambda a, s, i: a.index_copy(0, i, s), make((4, 2), dtype), make((3, 2), dtype, seed=2), idx)
    check(lambda a, i: a.index_fill_(1, i, True if dtype == torch.bool else 2), make((2, 4), dtype), idx)
    check(lambda a, i, v: a.index_fill(-1, i, v), make((2, 4), dtype), torch.tensor([-1, 2]),
          torch.tensor(0, dtype=dtype))


def test_index_copy_fill_grad():
    check_grad(lambda a, s: a.index_copy(0, torch.tensor([2, 0]).to(a.device), s), make((3, 2)), make((2, 2), seed=1))
    check_grad(lambda a: a.index_fill(1, torch.tensor([0, 2]).to(a.device), 1.0), make((3, 3)))


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_index_reduce(reduce, include_self, dtype):
    idx = torch.tensor([0, 2, 0, 4, 2])
    check(lambda a, s, i: a.index_reduce(1, i, s, reduce, include_self=include_self),
          make((3, 5), dtype), make((3, 5), dtype, seed=2), idx)


def test_index_reduce_grad():
    idx = torch.tensor([0, 2, 0])
    check_grad(lambda a, s: a.index_reduce(0, idx.to(a.device), s, "amax", include_self=False),
               make((3, 2)), make((3, 2), seed=1))


# ---- take / put / masked_scatter ----------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_take_put(dtype):
    x = make((3, 4), dtype)
    idx = torch.tensor([[0, -1], [5, 11]])
    check(lambda a, i: torch.take(a, i), x, idx)
    check(lambda a, i: torch.take(a, i), noncontiguous(x), idx)
    check(lambda a, i, s: a.put(i, s), x, idx, make((2, 2), dtype, seed=1))
    check(lambda a, i, s: a.put_(i, s, accumulate=True), x, torch.tensor([1, 1, 3]), make((3,), dtype, seed=1))


def test_take_put_grad():
    idx = torch.tensor([0, 4, 4, -1])
    check_grad(lambda a: torch.take(a, idx.to(a.device)), make((2, 3)))
    check_grad(lambda a, s: a.put(idx.to(a.device), s, accumulate=True), make((2, 3)), make((4,), seed=1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_masked_scatter(dtype):
    x = make((3, 4), dtype)
    mask = make((3, 4), torch.bool, seed=5)
    check(lambda a, m, s: a.masked_scatter(m, s), x, mask, make((13,), dtype, seed=1))
    check(lambda a, m, s: a.masked_scatter_(m, s), noncontiguous(x), make((4,), torch.bool, seed=6),
          make((3, 5), dtype, seed=1))


def test_masked_scatter_grad():
    # masked_scatter_backward is CompositeExplicitAutograd through
    # masked_select (data-dependent, lowered elsewhere).
    try:
        torch.ones(2, device="tpu").masked_select(torch.tensor([True, False], device="tpu"))
    except NotImplementedError:
        pytest.skip("masked_select not lowered")
    mask = make((3, 4), torch.bool, seed=5)
    check_grad(lambda a, s: a.masked_scatter(mask.to(a.device), s), make((3, 4)), make((14,), seed=1))


# ---- view scatters, unfold_backward ------------------------------------------------------

def test_view_scatters():
    x = make((4, 5))
    check(lambda a, s: torch.diagonal_scatter(a, s, 1), x, make((4,), seed=1))
    check(lambda a, s: torch.diagonal_scatter(a, s, -2, 1, 0), x, make((3,), seed=1))
    check(lambda a, s: torch.select_scatter(a, s, 1, -2), x, make((4,), seed=1))
    check(lambda a, s: torch.slice_scatter(a, s, 1, 1, 5, 2), x, make((4, 2), seed=1))
    check(lambda a, s: torch.as_strided_scatter(a, s, (2, 2), (1, 3), 2), x, make((2, 2), seed=1))
    check_grad(lambda a, s: torch.slice_scatter(a, s, 0, 0, 4, 2), x, make((2, 5), seed=1))
    check_grad(lambda a: a[1:, ::2].diagonal(), x)
    check_grad(lambda a: a.select(1, 2), x)


@pytest.mark.parametrize("size,step", [(2, 1), (3, 2), (2, 3)])
def test_unfold_backward(size, step):
    check_grad(lambda a: a.unfold(1, size, step), make((3, 7)))
    check_grad(lambda a: a.unfold(0, size, step), make((7,)))


# ---- embeddings ---------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag(mode):
    w = make((6, 3))
    inp = torch.tensor([1, 2, 4, 5, 4, 3, 2, 0])
    offsets = torch.tensor([0, 2, 2, 5])
    check_grad(lambda w_: F.embedding_bag(inp.to(w_.device), w_, offsets.to(w_.device), mode=mode), w)
    check_grad(lambda w_: F.embedding_bag(inp.to(w_.device), w_, torch.tensor([0, 3, 3, 8]).to(w_.device), mode=mode,
                                          include_last_offset=True, padding_idx=2), w)
    check(lambda w_, i: F.embedding_bag(i, w_, mode=mode), make((6, 3), torch.bfloat16), inp.view(2, 4))


def test_embedding_bag_per_sample_weights():
    w = make((6, 3))
    inp = torch.tensor([1, 2, 4, 5, 4, 3, 2, 0])
    psw = make((8,), seed=3)
    check_grad(lambda w_, p: F.embedding_bag(inp.to(w_.device), w_, torch.tensor([0, 3, 3]).to(w_.device),
                                             per_sample_weights=p, mode="sum"), w, psw)
    check_grad(lambda w_, p: F.embedding_bag(inp.to(w_.device), w_, torch.tensor([0, 3]).to(w_.device),
                                             per_sample_weights=p, mode="sum", padding_idx=4), w, psw)


def test_embedding_bag_scale_grad_by_freq():
    w = make((6, 3))
    inp = torch.tensor([1, 1, 4, 5, 1, 3, 2, 0])
    check_grad(lambda w_: F.embedding_bag(inp.to(w_.device), w_, torch.tensor([0, 3, 5]).to(w_.device),
                                          mode="sum", scale_grad_by_freq=True), w)


def test_embedding_max_norm_renorms_in_place():
    w = make((6, 4))
    idx = torch.tensor([[0, 2], [2, 5]])

    def f(w_, i):
        out = F.embedding(i, w_, max_norm=1.5)
        return out, w_

    check(f, w, idx)
    check(lambda w_, i: F.embedding(i, w_, max_norm=2.0, norm_type=1.0), w, idx)
    check(lambda w_, i: torch.embedding_renorm_(w_, i, 1.0, 3.0), make((6, 4), torch.bfloat16), idx)


def test_embedding_grad_padding_and_freq():
    idx = torch.tensor([[0, 2, 2], [5, 2, 1]])
    check_grad(lambda w_: F.embedding(idx.to(w_.device), w_, padding_idx=2), make((6, 3)))
    check_grad(lambda w_: F.embedding(idx.to(w_.device), w_, scale_grad_by_freq=True), make((6, 3)))


# ---- composite ops of the family (no own rule: built from the ones above) -----------------

def test_unsafe_index_ops_and_view_backwards():
    A = torch.ops.aten
    x = make((4, 5))
    m = torch.tensor([[True], [False], [True]])
    check(lambda a, i: A._unsafe_index(a, [None, i]), x, torch.tensor([0, 3, -1]))
    check(lambda a, i, v: A._unsafe_index_put(a, [i], v, True), x, torch.tensor([0, 0, 2]), make((3, 5), seed=1))
    check(lambda a, m, i: A._unsafe_masked_index(a, m, [i], 0.5), x, m, torch.tensor([0, 9, 2]))
    check(lambda a, m, i, v: A._unsafe_masked_index_put_accumulate(a, m, [i], v), x, m, torch.tensor([0, 9, 0]),
          make((3, 5), seed=2))
    check(lambda g: A.select_backward(g, [4, 5], 1, 2), make((4,)))
    check(lambda g: A.slice_backward(g, [4, 5], 1, 1, 5, 2), make((4, 2)))
    check(lambda g: A.diagonal_backward(g, [4, 5], 1, 0, 1), make((4,)))


# ---- errors CPU raises from metadata --------------------------------------------------------

def test_errors_match_cpu():
    x = make((6,))
    for dev in ["cpu", "tpu"]:
        out = torch.zeros(1, device=dev).expand(3)
        with pytest.raises(RuntimeError, match="unsupported operation"):
            torch.take(x.to(dev), torch.tensor([2, 1, 0], device=dev), out=out)
        with pytest.raises(RuntimeError, match="only supports boolean masks"):
            x.to(dev).masked_scatter(torch.ones(6, dtype=torch.uint8, device=dev), x.to(dev))
        src = make((6,)).to(dev)
        ind = torch.tensor([2, 1, 0], device=dev)
        with pytest.raises(RuntimeError, match="unsupported operation"):
            torch.take(src, ind, out=src)
        with pytest.raises(RuntimeError, match="unsupported operation"):
            torch.take(ind.clone(), ind[1:], out=ind[:-1])
