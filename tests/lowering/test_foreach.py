"""_foreach_* ops run as one tpu program per call; results vs CPU."""

import pytest
import torch

from utils import assert_close, make

T = lambda xs: [x.to("tpu") for x in xs]  # noqa: E731


def lists(dtype=torch.float32):
    shapes = [(3,), (2, 4), ()]
    xs = [make(s, dtype, seed=i) for i, s in enumerate(shapes)]
    ys = [make(s, dtype, seed=10 + i) for i, s in enumerate(shapes)]
    zs = [make(s, dtype, low=0.5, high=1.5, seed=20 + i) for i, s in enumerate(shapes)]
    return xs, ys, zs


def same(actual, expected, **tol):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.device.type == "tpu"
        assert_close(a, e, **tol)


CALLS = {
    "add.List": lambda x, y, z: torch._foreach_add(x, y, alpha=2.0),
    "add.Scalar": lambda x, y, z: torch._foreach_add(x, 1.5),
    "sub.List": lambda x, y, z: torch._foreach_sub(x, y, alpha=0.5),
    "sub.Scalar": lambda x, y, z: torch._foreach_sub(x, 0.25),
    "mul.List": lambda x, y, z: torch._foreach_mul(x, y),
    "mul.Scalar": lambda x, y, z: torch._foreach_mul(x, 3.0),
    "div.List": lambda x, y, z: torch._foreach_div(x, z),
    "div.Scalar": lambda x, y, z: torch._foreach_div(x, 4.0),
    "addcmul": lambda x, y, z: torch._foreach_addcmul(x, y, z, value=0.3),
    "addcdiv": lambda x, y, z: torch._foreach_addcdiv(x, y, z, value=-0.3),
    "lerp.Scalar": lambda x, y, z: torch._foreach_lerp(x, y, 0.7),
    "lerp.List": lambda x, y, z: torch._foreach_lerp(x, y, z),
    "sqrt": lambda x, y, z: torch._foreach_sqrt(z),
    "neg": lambda x, y, z: torch._foreach_neg(x),
    "exp": lambda x, y, z: torch._foreach_exp(x),
    "abs": lambda x, y, z: torch._foreach_abs(x),
}


@pytest.mark.parametrize("name", list(CALLS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_functional(name, dtype):
    xs, ys, zs = lists(dtype)
    same(CALLS[name](T(xs), T(ys), T(zs)), CALLS[name](xs, ys, zs))


def test_mul_div_by_tensor():
    xs, _, _ = lists()
    s = torch.tensor(2.5)
    same(torch._foreach_mul(T(xs), s.to("tpu")), torch._foreach_mul(xs, s))
    same(torch._foreach_div(T(xs), s.to("tpu")), torch._foreach_div(xs, s))


@pytest.mark.parametrize("ord", [1, 2, 3.0, 0, float("inf"), float("-inf")])
def test_norm(ord):
    xs, _, _ = lists()
    xs[0][1] = 0.0
    same(torch._foreach_norm(T(xs), ord), torch._foreach_norm(xs, ord), atol=1e-5, rtol=1e-5)


def test_in_place_chain_and_views():
    xs, ys, zs = lists()
    a, b = [x.clone() for x in xs], T(xs)
    for fn in [lambda l, y, z: torch._foreach_add_(l, y, alpha=2.0), lambda l, y, z: torch._foreach_mul_(l, 0.5),
               lambda l, y, z: torch._foreach_addcdiv_(l, y, z, value=-0.1), lambda l, y, z: torch._foreach_lerp_(l, y, 0.1),
               lambda l, y, z: torch._foreach_abs_(l), lambda l, y, z: torch._foreach_sqrt_(l)]:
        fn(a, ys, zs)
        fn(b, T(ys), T(zs))
        same(b, a)
    # Disjoint views of one storage are all updated.
    base = make((4, 4))
    bt = base.to("tpu")
    torch._foreach_mul_([base[0], base[1], base[2:]], 3.0)
    torch._foreach_mul_([bt[0], bt[1], bt[2:]], 3.0)
    assert_close(bt, base)


def test_int_list_with_float_scalar_promotes():
    xs = [torch.arange(3), torch.arange(4)]
    same(torch._foreach_add(T(xs), 0.5), torch._foreach_add(xs, 0.5))


def test_overlapping_in_place_is_refused():
    bt = make((4, 4)).to("tpu")
    with pytest.raises(NotImplementedError, match="share memory"):
        torch._foreach_add_([bt[0], bt[:, 1]], 1.0)


# NAdam's foreach step multiplies 0-dim step sizes by the gradients: the
# functional forms broadcast each pair like the per-tensor op (a 0-dim self
# gives the other's shape), where the in-place forms keep self's shape.
@pytest.mark.parametrize("name", ["mul", "add", "div", "addcmul", "lerp"])
def test_functional_forms_broadcast_each_pair(name):
    xs = [torch.tensor(2.0), make((2,), seed=1)]
    ys = [make((3, 4), seed=2), make((3, 2), low=0.5, seed=3)]
    call = {
        "mul": lambda x, y: torch._foreach_mul(x, y),
        "add": lambda x, y: torch._foreach_add(x, y, alpha=2),
        "div": lambda x, y: torch._foreach_div(x, y),
        "addcmul": lambda x, y: torch._foreach_addcmul(x, y, y, value=0.5),
        "lerp": lambda x, y: torch._foreach_lerp(x, y, 0.25),
    }[name]
    same(call(T(xs), T(ys)), call(xs, ys))
    with pytest.raises(RuntimeError, match="broadcast shape"):
        torch._foreach_mul_(T(xs[:1]), T(ys[:1]))


# The in-place forms have no ADInplaceOrView kernel, so they must bump each
# tensor's version themselves (CPU's per-tensor path and CUDA's kernels do).
# Without it a foreach optimizer step between forward and backward went
# unnoticed on tpu: the backward used the updated weights, no error.
INPLACE_CALLS = {
    "add_": lambda xs, ys: torch._foreach_add_(xs, 1.0),
    "add_list_": lambda xs, ys: torch._foreach_add_(xs, ys, alpha=2),
    "mul_": lambda xs, ys: torch._foreach_mul_(xs, 2.0),
    "div_tensor_": lambda xs, ys: torch._foreach_div_(xs, torch.tensor(2.0, device=xs[0].device)),
    "addcmul_": lambda xs, ys: torch._foreach_addcmul_(xs, ys, ys, 0.5),
    "lerp_list_": lambda xs, ys: torch._foreach_lerp_(xs, ys, ys),
    "sqrt_": lambda xs, ys: torch._foreach_sqrt_(xs),
}


@pytest.mark.parametrize("name", sorted(INPLACE_CALLS))
def test_in_place_forms_bump_versions(name):
    for dev in ("cpu", "tpu"):
        xs = [make((3,), low=0.5, seed=1).to(dev), make((2, 2), low=0.5, seed=2).to(dev)]
        ys = [make((3,), low=0.1, high=0.9, seed=3).to(dev), make((2, 2), low=0.1, high=0.9, seed=4).to(dev)]
        before = [x._version for x in xs]
        INPLACE_CALLS[name](xs, ys)
        assert [x._version for x in xs] == [v + 1 for v in before], dev


@pytest.mark.parametrize("opt", ["sgd", "adamw"])
def test_foreach_step_between_forward_and_backward_raises(opt):
    for dev in ("cpu", "tpu"):
        p = torch.nn.Parameter(make((3,), seed=1).to(dev))
        o = (torch.optim.SGD([p], lr=0.1, momentum=0.9, foreach=True) if opt == "sgd"
             else torch.optim.AdamW([p], foreach=True))
        loss = (p * p).sum()  # saves p
        p.grad = torch.ones_like(p)
        o.step()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()
