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
