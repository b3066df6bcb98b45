"""csrc/lowering/indexing.cpp: advanced indexing (index, index_put_)."""

import pytest
import torch

from utils import check, make

I = torch.tensor([4, 0, -1, 2])
J = torch.tensor([[1], [2]])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("case", range(5))
def test_index(dtype, case):
    f = [lambda a: a[I], lambda a: a[:, I], lambda a: a[:, I, J], lambda a: a[J, :, I], lambda a: a[..., I]][case]
    check(f, make((5, 6, 7), dtype))


def test_index_with_tpu_indices_and_noncontiguous_self():
    x = make((6, 5)).t()
    check(lambda a, i: a[i], x, I)


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(accumulate):
    def f(a, v):
        a.index_put_((J.to(a.device),), v, accumulate=accumulate)
        return a

    check(f, make((5, 6, 7)), make((7,), seed=3))


def test_setitem_with_index_tensor():
    def f(a):
        a[:, I] = 7.0
        return a

    check(f, make((5, 6, 7)))


def test_index_backward_accumulates_duplicates():
    x = make((5, 3))
    idx = torch.tensor([0, 2, 0, 4])
    xc = x.clone().requires_grad_()
    xt = x.to("tpu").requires_grad_()
    xc[idx].sum().backward()
    xt[idx.to("tpu")].sum().backward()
    torch.testing.assert_close(xt.grad.cpu(), xc.grad)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_and_scatter_add(dim):
    x = make((4, 5))
    src = make((4, 5), seed=2)
    idx = torch.randint(0, x.shape[dim], (3, 4), generator=torch.Generator().manual_seed(1))
    # scatter without reduce leaves duplicate destinations unspecified: use
    # a permutation along dim for it.
    perm = torch.stack([torch.randperm(x.shape[dim], generator=torch.Generator().manual_seed(i))[:4]
                        for i in range(3)]) if dim != 0 else torch.randperm(4)[:3].unsqueeze(1).expand(3, 4)
    if dim == 0:
        check(lambda a, s, i: a.scatter(0, i, s), x, src, perm.contiguous())
    else:
        check(lambda a, s, i: a.scatter(dim, i, s), x, src, perm[:, :4].contiguous())
    check(lambda a, s, i: a.scatter_add(dim, i, s), x, src, idx)
    check(lambda a, i: a.scatter(dim, i, 2.5), x, idx[:, :1].contiguous() if dim != 0 else perm[:, :1].contiguous())



def test_index_along_an_empty_dim():
    """Indexing a dim of size 0 with no index (ViLT's gather of image tokens
    where a row has none): XLA refuses a gather's size-1 slice there. The
    result is empty, index_put writes nothing, and any index raises as on CPU."""
    e = torch.zeros(0, dtype=torch.long)
    e2 = torch.zeros(2, 0, dtype=torch.long)
    check(lambda a, i: a[i], torch.randn(0, 3), e)
    check(lambda a, i: a[i], torch.randn(0, 3), e2)
    check(lambda a, i: a[:, i], torch.randn(2, 0, 3), e)
    check(lambda a, i, v: a.index_put_((i,), v), torch.randn(0, 3), e, torch.randn(0, 3))
    check(lambda a, i, v: torch.ops.aten.index_put(a, [None, i], v, True), torch.randn(2, 0, 3), e, torch.randn(2, 0, 3))
    with pytest.raises(IndexError, match="out of bounds"):
        torch.randn(0, 3).to("tpu")[torch.zeros(2, dtype=torch.long, device="tpu")]
