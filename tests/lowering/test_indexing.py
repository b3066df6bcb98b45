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
