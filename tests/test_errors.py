"""Bad input: clear Python exceptions, never a crash, and the process keeps
working afterwards."""

import pytest
import torch


def test_unlowered_op_raises_not_implemented_naming_it():
    x = torch.ones(3, device="tpu")
    with pytest.raises(NotImplementedError, match=r"aten::fake_quantize_per_tensor_affine_cachemask"):
        torch.fake_quantize_per_tensor_affine(x, 0.1, 0, -128, 127)
    assert (x + 1).cpu().tolist() == [2.0, 2.0, 2.0]


def test_shape_mismatch_same_type_as_cpu():
    a, b = torch.ones(2, 3), torch.ones(4, 5)
    with pytest.raises(RuntimeError) as cpu_err:
        a + b
    with pytest.raises(type(cpu_err.value), match=r"size of tensor a \(3\) must match"):
        a.to("tpu") + b.to("tpu")


def test_mixing_cpu_and_tpu():
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="tpu") + torch.ones(3)
    # A 0-dim CPU tensor acts as a scalar, as with CUDA.
    r = torch.ones(3, device="tpu") + torch.tensor(2.0)
    assert r.cpu().tolist() == [3.0, 3.0, 3.0]


def test_in_place_dtype_error():
    t = torch.ones(3, dtype=torch.int64, device="tpu")
    with pytest.raises(RuntimeError, match="can't be cast"):
        t.add_(torch.ones(3, device="tpu") * 0.5)
    assert t.cpu().tolist() == [1, 1, 1]  # no data lost


def test_bad_device_index():
    with pytest.raises(RuntimeError, match="invalid device"):
        torch.ones(2, device="tpu:7")


# A 0-dim CPU tensor that an op writes (in-place self, out=) reached the tpu
# kernel through another argument (a tpu Generator, a tpu tensor) and failed
# deep in the allocator ("storage was not allocated by the tpu allocator").
# A DataLoader shuffling with a tpu Generator does this. Now the usual
# device-mismatch error, as for larger tensors; reads of 0-dim CPU tensors
# (scalars) stay allowed.
def test_written_cpu_scalar_tensor_is_a_device_mismatch():
    g = torch.Generator(device="tpu")
    calls = [
        lambda: torch.empty((), dtype=torch.int64).random_(0, 10, generator=g),
        lambda: torch.zeros(()).fill_(torch.tensor(5.0, device="tpu")),
        lambda: torch.add(torch.tensor(1.0, device="tpu"), torch.tensor(2.0, device="tpu"), out=torch.tensor(0.0)),
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            call()
    x = torch.ones(3, device="tpu")
    assert (x + torch.tensor(2.0)).cpu().tolist() == [3.0, 3.0, 3.0]
    assert x.add_(torch.tensor(2.0)).cpu().tolist() == [3.0, 3.0, 3.0]


@pytest.mark.parametrize("fn", [
    lambda t, c: torch.cat([t, c]),
    lambda t, c: torch.stack([t, c]),
])
def test_cpu_tensor_in_a_tensor_list_is_refused_like_cuda(fn):
    # the meta kernel used to name the meta device ("is not on the expected
    # device meta!"); CUDA says which devices met
    t, c = torch.randn(2, 3, device="tpu"), torch.randn(2, 3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*cpu and tpu"):
        fn(t, c)


def test_cpu_index_tensors_still_index_a_tpu_tensor():
    t = torch.arange(6.0, device="tpu")
    i = torch.tensor([1, 4])
    assert t[i].cpu().tolist() == [1.0, 4.0]
    t[i] = torch.tensor(9.0)
    assert t.cpu().tolist() == [0.0, 9.0, 2.0, 3.0, 9.0, 5.0]


def test_cat_of_a_zero_dim_tensor_raises_cpus_error():
    # PyTorch's meta kernel raised IndexError "list assignment index out of range"
    for tensors in ([torch.tensor(1.0), torch.tensor(2.0)], [torch.ones(2), torch.tensor(2.0)]):
        with pytest.raises(RuntimeError, match=r"zero-dimensional tensor \(at position \d\) cannot be concatenated"):
            torch.cat([t.to("tpu") for t in tensors])


_INT_INPUTS = {
    "softmax": lambda d: torch.softmax(torch.ones(2, 3, dtype=torch.int64, device=d), 1),
    "log_softmax": lambda d: torch.log_softmax(torch.ones(2, 3, dtype=torch.int32, device=d), 1),
    "glu": lambda d: torch.nn.functional.glu(torch.ones(2, 4, dtype=torch.int64, device=d)),
    "cross_entropy": lambda d: torch.nn.functional.cross_entropy(
        torch.ones(2, 3, dtype=torch.int64, device=d), torch.tensor([0, 1], device=d)),
    "eigh": lambda d: torch.linalg.eigh(torch.ones(2, 2, dtype=torch.int64, device=d)),
    "lu_factor": lambda d: torch.linalg.lu_factor(torch.ones(2, 2, dtype=torch.uint8, device=d)),
    # These keep an integer input's dtype, so tpu computed in float and
    # truncated (gelu of [-2, 3] gave [0, 2]) where CPU and CUDA refuse.
    "gelu": lambda d: torch.nn.functional.gelu(torch.tensor([-2, 3], device=d)),
    "hardshrink": lambda d: torch.nn.functional.hardshrink(torch.tensor([-2, 3], device=d)),
    "hypot": lambda d: torch.hypot(torch.tensor([3, 5], device=d), torch.tensor([4, 12], device=d)),
    "lerp": lambda d: torch.lerp(torch.tensor([0, 2], device=d), torch.tensor([4, 4], device=d), 0.5),
}


@pytest.mark.parametrize("name", sorted(_INT_INPUTS))
def test_dtype_the_op_has_no_kernel_for_raises_not_implemented_as_on_cpu(name):
    # Float-only ops given integers: CPU's dispatch raises NotImplementedError
    # ("... not implemented for 'Long'"); tpu once handed XLA a program it
    # rejected ("stablehlo.exponential op operand #0 must be ... float"), or
    # computed a truncated result.
    with pytest.raises(NotImplementedError) as cpu_err:
        _INT_INPUTS[name]("cpu")
    dtype = str(cpu_err.value).split("'")[-2]  # 'Long', 'Int', 'Byte'
    with pytest.raises(NotImplementedError, match=f"not implemented for '{dtype}'") as tpu_err:
        _INT_INPUTS[name]("tpu")
        torch.tpu.synchronize()
    assert "XLA" not in str(tpu_err.value)
    assert (torch.ones(2, device="tpu").softmax(0)).cpu().tolist() == [0.5, 0.5]


def test_index_put_values_that_do_not_broadcast():
    for d in ("cpu", "tpu"):
        x = torch.zeros(4, 3, device=d)
        idx = torch.tensor([0, 1], device=d)
        with pytest.raises(RuntimeError, match=r"value tensor of shape \[3, 2\] cannot be broadcast to indexing "
                                               r"result of shape \[2, 3\]"):
            x[idx] = torch.ones(3, 2, device=d)
        x[idx] = torch.ones(1, 1, 3, device=d) * 5  # leading size-1 dims are dropped
        x.index_put_((idx,), torch.tensor([1.0, 2.0, 3.0], device=d), accumulate=True)
        assert x.cpu().tolist() == [[6.0, 7.0, 8.0], [6.0, 7.0, 8.0], [0.0] * 3, [0.0] * 3]


def test_index_put_and_put_values_of_another_dtype():
    # CPU and CUDA refuse rather than convert: on tpu x[idx] = [1.5, 2.5] (and put_)
    # once wrote [1, 2] into an integer tensor.
    for d in ("cpu", "tpu"):
        x = torch.zeros(3, dtype=torch.long, device=d)
        idx = torch.tensor([0, 2], device=d)
        for accumulate in (False, True):
            with pytest.raises(RuntimeError, match="Index put requires the source and destination dtypes match, "
                                                   "got Long for the destination and Float for the source"):
                x.index_put_((idx,), torch.tensor([1.5, 2.5], device=d), accumulate=accumulate)
        with pytest.raises(RuntimeError, match="got Long for the destination and Float for the source"):
            x[idx] = torch.tensor([1.5, 2.5], device=d)
        with pytest.raises(RuntimeError, match="got Float for the destination and Long for the source"):
            torch.index_put(torch.zeros(3, device=d), (idx,), torch.tensor([1, 2], device=d))
        x[idx] = 7  # a Python number takes the tensor's dtype
        assert x.cpu().tolist() == [7, 0, 7]
        with pytest.raises(RuntimeError, match="put_\\(\\): self and source expected to have the same dtype, but got "
                                               "self.dtype = Long and source.dtype = Float"):
            x.put_(idx, torch.tensor([1.5, 2.5], device=d))


@pytest.mark.parametrize("name,fn", [
    ("lt", lambda a, b: a < b),
    ("ge", lambda a, b: torch.ge(a, b)),
    ("atan2", torch.atan2),
    ("xlogy", torch.xlogy),
    ("remainder", torch.remainder),
    ("fmod", torch.fmod),
    ("floor_divide", lambda a, b: torch.div(a, b, rounding_mode="floor")),
    ("trunc_divide", lambda a, b: torch.div(a, b, rounding_mode="trunc")),
])
def test_real_only_ops_refuse_complex_like_cpu(name, fn):
    # CPU and CUDA have no complex kernel for these. On tpu `<` answered
    # lexicographically, atan2 and xlogy computed something, and XLA:CPU
    # crashed the process compiling remainder of complex64.
    cases = [(torch.tensor([1 + 1j, 0.5 - 2j]), torch.tensor([2.0, -1.0]))]
    if name in ("remainder", "fmod", "floor_divide", "trunc_divide"):
        cases.append((torch.tensor([True, False]), torch.tensor([True, True])))
    for a, b in cases:
        # NotImplementedError (a RuntimeError): the type is checked for the
        # rounded divisions below.
        for d in ("cpu", "tpu"):
            with pytest.raises(RuntimeError, match="not implemented for"):
                fn(a.to(d), b.to(d))
                torch.tpu.synchronize()
    assert (torch.tensor([1.0, 3.0], device="tpu") < 2).cpu().tolist() == [True, False]


@pytest.mark.parametrize("fn", [
    lambda a, b: a // b,
    lambda a, b: torch.floor_divide(a.real, 2j),
    lambda a, b: torch.floor_divide(a.real.double(), 2j),
    lambda a, b: torch.div(a.real, b, rounding_mode="floor"),
    lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    lambda a, b: torch.div(a.real.double(), b, rounding_mode="floor"),
    lambda a, b: a.floor_divide_(b),
    lambda a, b: (a.real > 0) // (b.real > 0),
    lambda a, b: torch.div(a.real > 0, b.real > 0, rounding_mode="trunc"),
])
def test_rounded_division_of_complex_or_bool_raises_cpus_error_type(fn):
    # CPU and CUDA: NotImplementedError naming the rounding and the
    # quotient's dtype; here torch's meta kernel raised a RuntimeError first
    # ("torch.complex64 not supported for floor_divide").
    a, b = torch.tensor([1 + 2j, 3 - 1j]), torch.tensor([2 + 0j, 1 + 1j])
    with pytest.raises(NotImplementedError) as on_cpu:
        fn(a.clone(), b)
    want = str(on_cpu.value).replace("_cpu", "_tpu")
    with pytest.raises(NotImplementedError) as on_tpu:
        fn(a.to("tpu"), b.to("tpu"))
    assert str(on_tpu.value).split("\n")[0] == want.split("\n")[0]


def test_bincount_of_a_float_or_bool_tensor_raises_not_implemented_like_cpu():
    for x in (torch.tensor([0.0, 1.0]), torch.tensor([True, False])):
        for d in ("cpu", "tpu"):
            with pytest.raises(NotImplementedError, match="bincount.* not implemented for"):
                torch.bincount(x.to(d))
    with pytest.raises(RuntimeError, match="1-d non-negative integral"):
        torch.bincount(torch.tensor([-1, 2], device="tpu"))


@pytest.mark.parametrize("norm", [
    lambda x, w: torch.nn.functional.layer_norm(x, (4,), w, w),
    lambda x, w: torch.nn.functional.layer_norm(x, (4,), w, None),
    lambda x, w: torch.nn.functional.group_norm(x.view(2, 4, 1), 2, w, w),
], ids=["layer_norm", "layer_norm_weight_only", "group_norm"])
def test_norm_parameters_of_another_dtype_are_refused_like_cpu(norm):
    # A float32 input with float64 parameters computed on tpu; CPU and CUDA
    # refuse. A bfloat16 input with float32 parameters (mixed precision) is
    # allowed on both.
    x, w = torch.randn(2, 4), torch.randn(4, dtype=torch.float64)
    for d in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="dtype|scalar type"):
            norm(x.to(d), w.to(d))
            torch.tpu.synchronize()
    mixed = norm(x.bfloat16().to("tpu"), w.float().to("tpu"))
    assert mixed.dtype == torch.bfloat16
    torch.testing.assert_close(mixed.float().cpu(), norm(x.bfloat16(), w.float()).float(), atol=0.02, rtol=0.02)
