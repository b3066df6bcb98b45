"""Shape-family lowering rules: reflection / replication padding and their
backward ops, channel_shuffle, tril/triu_indices, unfold_backward, logspace,
cdist / pdist (forward and backward); plus the family's ops that reach the
engine through PyTorch's composite kernels (rot90, repeat, diag_embed,
pixel_shuffle, block_diag, stack, _chunk_cat, vander, the *_copy ops)."""

import math

import pytest
import torch
import torch.nn.functional as F

from utils import check, check_grad, make, noncontiguous

A = torch.ops.aten


# ---- reflection / replication padding ---------------------------------------------------

PADS = {
    1: [(2, 1), (0, 3), (-1, 2)],
    2: [(1, 2, 2, 0), (0, 1, -1, 1)],
    3: [(1, 0, 2, 1, 0, 2)],
}


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_pad_modes(mode, nd):
    for batch in [(2,), (2, 3)]:
        x = make(batch + (4,) * nd)
        for pad in PADS[nd]:
            check(lambda x: F.pad(x, pad, mode=mode), x)
    check(lambda x: F.pad(noncontiguous(x), PADS[nd][0], mode=mode), make((2, 3) + (5,) * nd))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int64, torch.float64])
@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_dtypes(dtype, mode):
    check(lambda x: F.pad(x, (1, 2, 2, 1), mode=mode), make((2, 3, 4), dtype))


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_out_and_errors(mode):
    op = A.reflection_pad2d if mode == "reflect" else A.replication_pad2d
    check(lambda x, o: op.out(x, [1, 1, 2, 0], out=o), make((2, 3, 4)), torch.empty(0))
    check(lambda x: op(x, [0, 0, 0, 0]), make((1, 2, 3)))
    with pytest.raises(RuntimeError):
        F.pad(make((1, 2, 3)).to("tpu"), (3, 3), mode="reflect")
    with pytest.raises((RuntimeError, IndexError)):  # the meta kernel raises IndexError here
        op(make((3,)).to("tpu"), [1, 1, 1, 1])


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_pad_grad(mode, nd):
    x = make((2, 3) + (4,) * nd)
    check_grad(lambda x: F.pad(x, PADS[nd][0], mode=mode), x)


def test_pad_backward_ops_direct():
    x, g = make((2, 3, 5)), make((2, 3, 8), seed=1)
    check(lambda g, x: A.reflection_pad1d_backward(g, x, [2, 1]), g, x)
    check(lambda g, x: A.replication_pad1d_backward(g, x, [2, 1]), g, x)
    check(lambda g, x, o: A.replication_pad1d_backward.grad_input(g, x, [2, 1], grad_input=o), g, x, torch.empty(0))
    gb = make((2, 3, 8), torch.bfloat16)
    check(lambda g, x: A.reflection_pad1d_backward(g, x, [2, 1]), gb, x.bfloat16())


def test_constant_and_circular_pad():
    x = make((2, 3, 4))
    check(lambda x: F.pad(x, (1, 2, -1, 1), value=2.5), x)
    check(lambda x: F.pad(x, (1, 2, 1, 0), mode="circular"), x)
    check(lambda x: F.pad(x, (1, 1), value=1), make((2, 3), torch.int64))
    check_grad(lambda x: F.pad(x, (2, 1, 1, 1), mode="circular"), x)


# ---- small shape ops -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_channel_shuffle(dtype):
    check(lambda x: F.channel_shuffle(x, 2), make((2, 4, 3), dtype))
    check(lambda x: F.channel_shuffle(x, 3), make((1, 6, 2, 2), dtype))
    check(lambda x: F.channel_shuffle(noncontiguous(x), 2), make((2, 4, 3, 2), dtype))
    check(lambda x: A.channel_shuffle(x, 2), make((0, 4, 3), dtype))


@pytest.mark.parametrize("op", [torch.tril_indices, torch.triu_indices])
def test_triangle_indices(op):
    for args in [(3, 3), (4, 3, 1), (3, 5, -1), (3, 3, -5), (0, 3), (5, 2, 10)]:
        expected = op(*args)
        actual = op(*args, device="tpu")
        assert actual.device.type == "tpu"
        torch.testing.assert_close(actual.cpu(), expected)
    torch.testing.assert_close(op(4, 4, 1, dtype=torch.int32, device="tpu").cpu(), op(4, 4, 1, dtype=torch.int32))


def test_unfold_backward():
    x = make((3, 7, 2))
    check_grad(lambda x: x.unfold(1, 3, 2), x)
    check_grad(lambda x: x.unfold(0, 2, 1), x)
    check_grad(lambda x: x.unfold(-1, 1, 1), x)
    check(lambda g: A.unfold_backward(g, [3, 7, 2], 1, 3, 2), make((3, 3, 2, 3)))
    check(lambda g: A.unfold_backward(g, [6], 0, 2, 3), make((2, 2), torch.bfloat16))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_logspace(dtype):
    for start, end, steps, base in [(0, 3, 5, 10.0), (-1.5, 2, 7, 2.0), (1, 1, 1, 10.0), (0, 2, 0, 10.0), (3, 0, 4, 3.0)]:
        expected = torch.logspace(start, end, steps, base, dtype=dtype)
        actual = torch.logspace(start, end, steps, base, dtype=dtype, device="tpu")
        torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5 if dtype != torch.bfloat16 else 1e-2, atol=0)


# ---- distances ---------------------------------------------------------------------------------

P_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, math.inf]


@pytest.mark.parametrize("p", P_VALUES)
def test_cdist(p):
    x1, x2 = make((2, 4, 3)), make((2, 5, 3), seed=1)
    check(lambda a, b: torch.cdist(a, b, p), x1, x2, atol=1e-4, rtol=1e-4)
    check_grad(lambda a, b: torch.cdist(a, b, p), x1, x2, atol=1e-4, rtol=1e-4)


def test_cdist_shapes():
    check(lambda a, b: torch.cdist(a, b), make((3, 1, 4, 5)), make((2, 6, 5), seed=1), atol=1e-4, rtol=1e-4)
    check(lambda a, b: torch.cdist(a, b), make((0, 5)), make((4, 5)))
    check(lambda a, b: torch.cdist(a, b), make((3, 0)), make((4, 0)))
    check(lambda a, b: torch.cdist(noncontiguous(a), b, 1.0), make((4, 5)), make((3, 5), seed=1))
    check(lambda a, b: torch.cdist(a, b), make((4, 5), torch.float64), make((3, 5), torch.float64, seed=1))
    # Identical rows: zero distances, whose p = 2 gradient is defined as 0.
    x = make((3, 4))
    check_grad(lambda a, b: torch.cdist(a, b, 2.0), x, x.clone())
    check_grad(lambda a, b: torch.cdist(a, b, 2.0), make((3, 1, 3, 2)), make((2, 4, 2), seed=1), atol=1e-4, rtol=1e-4)
    # Many rows: CPU takes the matmul path (_euclidean_dist).
    check(lambda a, b: torch.cdist(a, b), make((30, 4)), make((27, 4), seed=1), atol=1e-4, rtol=1e-4)
    check_grad(lambda a, b: torch.cdist(a, b), make((30, 4)), make((27, 4), seed=1), atol=1e-4, rtol=1e-4)


def test_cdist_ops_direct():
    x1, x2 = make((4, 3)), make((5, 3), seed=1)
    r = torch.cdist(x1, x2, 3.0)
    g = make(r.shape, seed=2)
    check(lambda a, b: A._cdist_forward(a, b, 3.0, None), x1, x2, atol=1e-4, rtol=1e-4)
    check(lambda g, a, b, r: A._cdist_backward(g, a, b, 3.0, r), g, x1, x2, r, atol=1e-4, rtol=1e-4)
    check(lambda a, b: A._euclidean_dist(a, b), x1, x2, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("p", P_VALUES)
def test_pdist(p):
    x = make((5, 3))
    check(lambda x: F.pdist(x, p), x, atol=1e-4, rtol=1e-4)
    check_grad(lambda x: F.pdist(x, p), x, atol=1e-4, rtol=1e-4)


def test_pdist_shapes():
    check(lambda x: F.pdist(x), make((1, 3)))
    check(lambda x: F.pdist(x), make((4, 0)))
    check(lambda x: F.pdist(noncontiguous(x)), make((6, 2)))
    x = torch.tensor([[1.0, 2.0], [1.0, 2.0], [0.0, 1.0]])
    check_grad(lambda x: F.pdist(x), x)
    check_grad(lambda x: F.pdist(x, 0.5), x)


# ---- family ops served by composite kernels -------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_composite_shape_ops(dtype):
    x = make((3, 4, 2), dtype)
    check(lambda x: torch.rot90(x, 1, [0, 2]), x)
    check(lambda x: torch.rot90(x, -2), x)
    check(lambda x: x.repeat(2, 1, 3, 1), x)
    check(lambda x: torch.diag_embed(x, 1, 0, 2), x)
    check(lambda x: torch.block_diag(x[0], x[1, 0], x[2, 1, 1]), x)
    check(lambda x: torch.stack([x, noncontiguous(x)], 1), x)
    check(lambda x: F.pixel_shuffle(x.reshape(1, 4, 3, 2), 2), x)
    check(lambda x: F.pixel_unshuffle(x.reshape(1, 1, 6, 4), 2), x)
    check(lambda x: A._chunk_cat([x, x[:, :3]], 1, 2), x)


def test_vander_and_scalar_tensor():
    check(lambda x: torch.linalg.vander(x, N=4), make((2, 3)))
    check(lambda x: torch.vander(x, 3, increasing=True), make((4,), torch.int64))
    t = torch.scalar_tensor(2.5, device="tpu")
    assert t.device.type == "tpu" and t.item() == 2.5


def test_copy_ops():
    x = make((3, 4))
    check(lambda x: A.narrow_copy(x, 1, 1, 2), x)
    check(lambda x: A.permute_copy(x, [1, 0]), x)
    check(lambda x: A.expand_copy(x[:1], [2, 3, 4]), x)
    check(lambda x: A.t_copy(x), x)
    check(lambda x: A.transpose_copy(x, 0, 1), x)
    check(lambda x: A.unsqueeze_copy(x, 1), x)
    check(lambda x: A.squeeze_copy(x[:1]), x)
    check(lambda x: A.view_copy(x, [2, 6]), x)
    check(lambda x: A.diagonal_copy(x, 1), x)
    check(lambda x: A.select_copy(x, 1, 2), x)
    check(lambda x: A.slice_copy(x, 1, 0, 4, 2), x)
    check(lambda x: A.split_copy(x, 2, 1), x)
    check(lambda x: A.unbind_copy(x, 0), x)
    check(lambda x: A.alias_copy(x), x)
    check(lambda x: A.detach_copy(x), x)
    check(lambda x: A.as_strided_copy(x, [2, 2], [1, 4], 1), x)
    check(lambda x: A.unfold_copy(x, 1, 2, 1), x)
    check(lambda x, o: A.narrow_copy.out(x, 0, 1, 2, out=o), x, torch.empty(0))


def test_narrow_copy_checks():
    x = make((2, 3, 4))
    check(lambda x: A.narrow_copy(x, -1, -3, 2), x)
    check(lambda x, o: A.narrow_copy.out(x, 2, -3, 2, out=o), x, torch.empty(0))
    # Bad arguments raise like CUDA (and OpInfo's error_inputs for non-CPU
    # devices): IndexError for an out-of-range dim or start.
    for dim, start, length, err in [(3, 0, 1, IndexError), (0, 0, 5, RuntimeError), (1, 4, 1, IndexError)]:
        with pytest.raises(err):
            torch.narrow_copy(x.to("tpu"), dim, start, length)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.bool])
def test_unfold_fold(dtype):
    x = make((2, 3, 5, 6), dtype)
    check(lambda x: F.unfold(x, (2, 3)), x)
    check(lambda x: F.unfold(x, 3, dilation=(1, 2), padding=1, stride=(2, 1)), x)
    check(lambda x: F.unfold(noncontiguous(x[0]), 2), x)
    if dtype != torch.bool:
        cols = make((2, 3 * 6, 9), dtype)
        check(lambda c: F.fold(c, (5, 6), (2, 3), stride=(2, 2), padding=(1, 1)), cols)
        check(lambda c: F.fold(c[0], (3, 6), (2, 3)), make((2, 3 * 6, 8), dtype))


def test_unfold_fold_grad():
    check_grad(lambda x: F.unfold(x, 3, dilation=(1, 2), padding=1, stride=(2, 1)), make((2, 3, 5, 6)))
    check_grad(lambda c: F.fold(c, (5, 6), (2, 3), stride=(2, 2), padding=(1, 1)), make((2, 18, 9)))
