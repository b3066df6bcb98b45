"""hash_tensor, int8 / linear-combination products, mvlgamma.out, the
slow_conv* entry points, adaptive_avg_pool out= forms and multinomial on
tpu vs CPU."""

import pytest
import torch

from utils import assert_close, check, make

T = lambda x: x.to("tpu")  # noqa: E731


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64,
                                   torch.int32, torch.int8, torch.uint8, torch.bool])
def test_hash_tensor_matches_cpu_bits(dtype):
    x = (make((4, 5), torch.float64, low=-20, high=20, seed=1)).to(dtype)
    if dtype.is_floating_point:
        x[0, 0], x[0, 1] = float("nan"), -0.0
    for kw in [{}, {"dim": 1, "keepdim": True}, {"dim": [0]}]:
        expected = torch.hash_tensor(x, **kw)
        actual = torch.hash_tensor(T(x), **kw)
        assert actual.dtype == torch.uint64 and actual.shape == expected.shape
        assert torch.equal(actual.cpu(), expected)


def test_hash_tensor_mode_error():
    with pytest.raises(RuntimeError, match="Unknown hash_tensor mode"):
        torch.hash_tensor(T(torch.ones(3)), mode=1)


def test_int_mm():
    a = torch.randint(-128, 127, (32, 48), dtype=torch.int8)
    b = torch.randint(-128, 127, (48, 24), dtype=torch.int8)
    check(torch._int_mm, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_weight_int8pack_mm(dtype):
    x = make((4, 16), dtype)
    w = torch.randint(-128, 127, (8, 16), dtype=torch.int8)
    s = make((8,), dtype, low=0, high=1)
    check(torch._weight_int8pack_mm, x, w, s, atol=1e-4 if dtype == torch.float32 else 0.2, rtol=1e-2)


def test_compute_linear_combination():
    c = make((4, 3), seed=2)
    check(torch._compute_linear_combination, make((3, 2, 5)), c, atol=1e-5, rtol=1e-5)
    check(torch._compute_linear_combination, make((3,)), c, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("p", [1, 3])
def test_mvlgamma_out(p):
    x = make((6,), torch.float32, low=2, high=7)
    out = torch.empty(6, device="tpu")
    torch.mvlgamma(T(x), p, out=out)
    assert_close(out, torch.mvlgamma(x, p), atol=1e-4, rtol=1e-5)


def test_slow_conv_forms():
    aten = torch.ops.aten
    x, w, b = make((2, 3, 7, 6)), make((4, 3, 3, 2), seed=1), make((4,), seed=2)
    tol = dict(atol=1e-4, rtol=1e-4)
    check(lambda *a: aten._slow_conv2d_forward(*a, [3, 2], None, [2, 1], [1, 0]), x, w, **tol)
    check(lambda x, w, b: aten._slow_conv2d_forward(x, w, [3, 2], b, [2, 1], [1, 0]), x, w, b, **tol)
    check(lambda x, w, b: aten.slow_conv_dilated2d(x, w, [3, 2], b, [1, 1], [1, 1], [2, 1]), x, w, b, **tol)
    x3, w3 = make((1, 2, 5, 4, 6), seed=3), make((3, 2, 2, 3, 2), seed=4)
    check(lambda x, w: aten.slow_conv3d_forward(x, w, [2, 3, 2], None, [1, 2, 1], [0, 1, 1]), x3, w3, **tol)
    check(lambda x, w: aten.slow_conv_dilated3d(x, w, [2, 3, 2], None, [1, 1, 1], [0, 1, 1], [2, 1, 1]), x3, w3, **tol)
    wt = make((3, 4, 3, 2), seed=5)
    check(lambda x, w, b: aten.slow_conv_transpose2d(x, w, [3, 2], b, [2, 1], [1, 0], [1, 0], [1, 2]), x, wt, b, **tol)
    wt3 = make((2, 3, 2, 3, 2), seed=6)
    check(lambda x, w: aten.slow_conv_transpose3d(x, w, [2, 3, 2], None, [2, 1, 1], [0, 1, 0], [1, 0, 0], [1, 1, 2]),
          x3, wt3, **tol)
    gy = make((2, 4, 4, 5), seed=7)
    check(lambda g, x, w: aten._slow_conv2d_backward(g, x, w, [3, 2], [2, 1], [1, 0], [True, True, True]), gy, x, w,
          **tol)


def test_adaptive_avg_pool_out_forms():
    x = make((2, 3, 9, 7))
    out = torch.empty(2, 3, 4, 3, device="tpu")
    torch._C._nn.adaptive_avg_pool2d(T(x), [4, 3], out=out)
    assert_close(out, torch._C._nn.adaptive_avg_pool2d(x, [4, 3]))
    x3 = make((2, 3, 5, 9, 7))
    out = torch.empty(2, 3, 2, 4, 3, device="tpu")
    torch._C._nn.adaptive_avg_pool3d(T(x3), [2, 4, 3], out=out)
    assert_close(out, torch._C._nn.adaptive_avg_pool3d(x3, [2, 4, 3]))
    g = make((2, 3, 2, 4, 3), seed=1)
    gi = torch.empty(x3.shape, device="tpu")
    torch.ops.aten.adaptive_avg_pool3d_backward.grad_input(T(g), T(x3), grad_input=gi)
    assert_close(gi, torch.ops.aten._adaptive_avg_pool3d_backward(g, x3))
    with pytest.raises(RuntimeError, match="must already have the result's shape"):
        torch._C._nn.adaptive_avg_pool2d(T(x), [4, 3], out=torch.empty(0, device="tpu"))


def test_multinomial_with_replacement_distribution():
    torch.manual_seed(0)
    p = torch.tensor([0.1, 0.0, 0.6, 0.3])
    s = torch.multinomial(T(p), 20000, replacement=True)
    assert s.device.type == "tpu" and s.dtype == torch.int64 and s.shape == (20000,)
    freq = torch.bincount(s.cpu(), minlength=4).double() / 20000
    assert freq[1] == 0  # zero weight never drawn
    assert_close(freq, p.double(), atol=0.02, rtol=0)


def test_multinomial_without_replacement():
    torch.manual_seed(1)
    p = make((3, 5), low=0.1, high=1)
    p[:, 1] = 0
    s = torch.multinomial(T(p), 4).cpu()
    assert s.shape == (3, 4) and s.dtype == torch.int64
    for row in s:
        assert sorted(row.tolist()) == [0, 2, 3, 4]  # distinct, never the zero weight
    # First draws follow the weights; consecutive calls differ.
    first = torch.stack([torch.multinomial(T(p[0]), 1) for _ in range(400)]).cpu().flatten()
    freq = torch.bincount(first, minlength=5).double() / 400
    assert_close(freq, (p[0] / p[0].sum()).double(), atol=0.08, rtol=0)


def test_multinomial_errors():
    with pytest.raises(RuntimeError, match="without replacement"):
        torch.multinomial(T(torch.ones(3)), 4)
    with pytest.raises(RuntimeError):
        torch.multinomial(T(torch.ones(2, 2, 2)), 1)


@pytest.mark.parametrize("values_shape", [(7, 3), (7,)])
def test_jagged_padded_round_trip(values_shape):
    aten = torch.ops.aten
    values = make(values_shape, seed=3)
    offsets = torch.tensor([0, 2, 2, 7])  # an empty item and one longer than max_length 4
    check(lambda v, o: aten._jagged_to_padded_dense_forward(v, [o], [4], 0.5), values, offsets)
    dense = aten._jagged_to_padded_dense_forward(values, [offsets], [6], -1.0)
    check(lambda d, o: aten._padded_dense_to_jagged_forward(d, [o], 7), dense, offsets)
    with pytest.raises(RuntimeError, match="total_L must be given"):
        aten._padded_dense_to_jagged_forward(T(dense), [T(offsets)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_transform_bias_rescale_qkv(dtype):
    qkv, bias = make((2, 5, 24), dtype), make((24,), dtype, seed=1)
    check(lambda x, b: torch._transform_bias_rescale_qkv(x, b, 2), qkv, bias)
    with pytest.raises(RuntimeError, match="divisible by num_heads"):
        torch._transform_bias_rescale_qkv(T(qkv), T(bias), 3)
