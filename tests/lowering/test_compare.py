"""Comparisons, logical and bitwise ops on tpu vs CPU."""

import pytest
import torch

from utils import check, make, noncontiguous

F32, BF16, I64, I32, BOOL = torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool
SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((), (3,)), ((5, 1), (1, 6))]
CMP = [torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge]


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("dt", [F32, BF16, I64, I32, BOOL])
def test_compare(dt, shapes):
    a, b = make(shapes[0], dt, low=-2, high=2, seed=1), make(shapes[1], dt, low=-2, high=2, seed=2)
    for fn in CMP:
        check(fn, a, b)


def test_compare_scalar_and_mixed():
    a = make((3, 4), F32, low=-2, high=2)
    i = make((3, 4), I64, low=-2, high=2)
    for fn in CMP:
        check(lambda x: fn(x, 0.5), a)
        check(lambda x: fn(x, 1), i)
        check(lambda x: fn(x, 0.5), i)  # int tensor vs float scalar compares as float
        check(fn, i, a)
        check(fn, a.bfloat16(), a)
        check(lambda x, y: fn(x, y), noncontiguous(a), a)
    check(lambda x: x == float("nan"), a)
    x = torch.tensor([float("nan"), 1.0, float("inf"), -0.0])
    y = torch.tensor([float("nan"), float("nan"), float("inf"), 0.0])
    for fn in CMP:
        check(fn, x, y)
    # in-place and out=
    check(lambda x, y: x.lt_(y), a, make((3, 4), seed=3))
    check(lambda x: x.ge_(0), i)
    check(lambda x, y, o: torch.eq(x, y, out=o), a, a, torch.empty(3, 4, dtype=BOOL))
    check(lambda x, y, o: torch.gt(x, y, out=o), a, make((4,)), torch.empty(0, dtype=BOOL))
    check(lambda x, y: torch.isclose(x, y), a, a + 1e-7)
    check(lambda x, y: torch.isclose(x, y, equal_nan=True), x, y)


@pytest.mark.parametrize("dt", [F32, BF16, I64, BOOL])
def test_logical(dt):
    a, b = make((3, 4), dt, low=-1, high=1, seed=1), make((4,), dt, low=-1, high=1, seed=2)
    for fn in [torch.logical_and, torch.logical_or, torch.logical_xor]:
        check(fn, a, b)
        check(fn, a, b.to(I64))
        check(lambda x, y, o: fn(x, y, out=o), a, b, torch.empty(3, 4, dtype=BOOL))
    check(lambda x, y: x.logical_and_(y), a, b)
    check(lambda x, y: x.logical_xor_(y), a, b)
    check(torch.logical_not, a)


@pytest.mark.parametrize("dt", [I64, I32, BOOL, torch.uint8])
def test_bitwise(dt):
    if dt != torch.uint8:
        a, b = make((3, 4), dt, low=-8, high=8, seed=1), make((4,), dt, low=-8, high=8, seed=2)
    else:
        a, b = make((3, 4), I64, low=0, high=255).to(dt), make((4,), I64, low=0, high=255).to(dt)
    for fn in [torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor]:
        check(fn, a, b)
        check(lambda x, o: fn(x, True if dt == BOOL else 5, out=o), a, torch.empty(3, 4, dtype=dt))
    check(lambda x, y: x & y, a, b)
    check(lambda x, y: x | y, a, b)
    check(lambda x, y: x ^ y, a, b)
    check(lambda x, y: x.__iand__(y), a, b)
    check(lambda x, y: x.__ior__(y), a, b)
    check(lambda x, y: x.__ixor__(y), a, b)
    check(lambda x, y: x.bitwise_and_(y), noncontiguous(a), b)
    check(torch.bitwise_not, a)


@pytest.mark.parametrize("dt", [I64, I32, torch.uint8])
def test_shifts(dt):
    a = make((3, 5), I64, low=-100, high=100, seed=1).to(dt)
    s = torch.tensor([0, 1, 3, 7, 70]).to(dt)
    if dt != torch.uint8:
        s = torch.tensor([0, 1, 3, -1, 70]).to(dt)
    check(torch.bitwise_left_shift, a, s)
    check(torch.bitwise_right_shift, a, s)
    check(lambda x: x << 2, a)
    check(lambda x: x >> 1, a)
    check(lambda x, y: x << y, a, s)
    check(lambda x, y: x >> y, a, s)
    check(lambda x: x.__ilshift__(3), a)
    check(lambda x: x.__irshift__(2), a)
    check(lambda x: x.bitwise_left_shift_(1), a)
    check(lambda x: torch.bitwise_right_shift(x, 4), a)


def test_bitwise_float_errors():
    a = torch.ones(3, device="tpu")
    with pytest.raises(RuntimeError):
        torch.bitwise_and(a, a)
