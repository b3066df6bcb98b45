"""8-bit float dtypes on tpu (float8_e4m3fn, float8_e5m2 and their fnuz
variants): what CPU and CUDA do with them (store, move, convert, compare,
select, abs, matmul) gives CPU's bits, and the arithmetic they refuse is
refused with CPU's NotImplementedError. An fp8 checkpoint loads onto tpu and
upcasts there."""

import io

import pytest
import torch

from utils import assert_close

FLOAT8 = [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]


def _values():
    """Ordinary values, ties, tiny and huge ones, and the specials."""
    g = torch.Generator().manual_seed(0)
    special = torch.tensor([0.0, -0.0, 1.0, -1.5, 0.3, 1e-3, -1e-5, 240.0, 448.0, 500.0, 6e4, 1e6, float("inf"),
                            -float("inf"), float("nan")])
    return torch.cat([special, torch.randn(200, generator=g) * 10, torch.randn(200, generator=g) * 1e-2])


def _bits(t):
    return t.view(torch.uint8)


def _same(got, expected):
    """Equal bit for bit, except that any NaN matches any NaN (e5m2 has
    several NaN encodings; CPU and XLA pick different ones)."""
    got = got.cpu()
    nan = expected.float().isnan()
    return torch.equal(got.float().isnan(), nan) and torch.equal(_bits(got)[~nan], _bits(expected)[~nan])


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_conversions_match_cpu_bits(dtype):
    x = _values()
    expected = x.to(dtype)
    got = x.to("tpu").to(dtype)
    assert got.dtype == dtype and got.device.type == "tpu"
    assert _same(got, expected)
    # Back up to every wider float, on tpu.
    for wide in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
        assert_close(got.to(wide).cpu(), expected.to(wide), atol=0, rtol=0)
    # From bfloat16 and between the 8-bit formats.
    assert _same(x.bfloat16().to("tpu").to(dtype), x.bfloat16().to(dtype))
    assert _same(x.double().to("tpu").to(dtype), x.double().to(dtype))
    for other in FLOAT8:
        assert _same(got.to(other), expected.to(other)), other


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
def test_storage_ops_match_cpu(dtype):
    x = (torch.randn(6, 5, generator=torch.Generator().manual_seed(1)) * 4).to(dtype)
    t = x.to("tpu")
    assert torch.equal(_bits(t.cpu()), _bits(x))  # host -> device -> host
    cases = {
        "transpose": lambda a: a.t().contiguous(),
        "slice": lambda a: a[1:5:2, 1:].contiguous(),
        "cat": lambda a: torch.cat([a, a[:2]]),
        "index": lambda a: a[torch.tensor([4, 0, 4], device=a.device)],
        "where": lambda a: torch.where(a.float() > 0, a, a[torch.tensor([5, 4, 3, 2, 1, 0], device=a.device)]),
        "abs": lambda a: a.abs(),
        "clone": lambda a: a.clone(),
        "index_put": lambda a: a.clone().index_put_((torch.tensor([1, 3], device=a.device),),
                                                    torch.tensor(2.5).to(dtype).to(a.device)),
        "copy_from_f32": lambda a: torch.empty(6, 5, dtype=dtype, device=a.device).copy_(a.float() * 0.5),
        "full": lambda a: torch.full((3,), -1.75, dtype=dtype, device=a.device),
        "zeros": lambda a: torch.zeros(2, 3, dtype=dtype, device=a.device),
    }
    for name, fn in cases.items():
        expected, got = fn(x), fn(t)
        assert got.dtype == dtype, name
        assert _same(got, expected), name
    assert torch.equal((t == t.t().t().contiguous()).cpu(), x == x.t().t().contiguous())
    assert torch.equal(t.view(torch.uint8).cpu(), x.view(torch.uint8))
    assert "float8" in repr(t)


def test_matmul_matches_cpu():
    a = (torch.randn(8, 16, generator=torch.Generator().manual_seed(2))).to(torch.float8_e4m3fn)
    b = (torch.randn(16, 4, generator=torch.Generator().manual_seed(3))).to(torch.float8_e4m3fn)
    expected = a @ b
    got = a.to("tpu") @ b.to("tpu")
    assert got.dtype == expected.dtype
    assert_close(got.float().cpu(), expected.float(), atol=0, rtol=0.07)  # one e4m3 step of the rounded result


@pytest.mark.parametrize("op", ["add", "mul", "neg", "sum", "exp", "clamp"])
def test_arithmetic_refused_like_cpu(op):
    fns = {"add": lambda a: a + a, "mul": lambda a: a * 2, "neg": lambda a: -a, "sum": lambda a: a.sum(),
           "exp": lambda a: a.exp(), "clamp": lambda a: a.clamp(-1, 1)}
    x = torch.ones(4).to(torch.float8_e4m3fn)
    with pytest.raises(NotImplementedError) as cpu_error:
        fns[op](x)
    with pytest.raises(NotImplementedError, match="Float8_e4m3fn") as tpu_error:
        fns[op](x.to("tpu"))
    assert "Float8_e4m3fn" in str(cpu_error.value) and "Float8_e4m3fn" in str(tpu_error.value)


def test_fp8_checkpoint_loads_and_upcasts():
    """A model saved with float8 weights (an fp8 checkpoint) loads with
    map_location="tpu" and upcasts there, as on CPU."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    state = {k: v.to(torch.float8_e4m3fn) for k, v in model.state_dict().items()}
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    loaded = torch.load(buf, map_location="tpu")
    assert all(v.device.type == "tpu" and v.dtype == torch.float8_e4m3fn for v in loaded.values())
    tpu_model = torch.nn.Linear(8, 4).to("tpu")
    tpu_model.load_state_dict({k: v.float() for k, v in loaded.items()})
    cpu_model = torch.nn.Linear(8, 4)
    cpu_model.load_state_dict({k: v.float() for k, v in state.items()})
    x = torch.randn(3, 8)
    assert_close(tpu_model(x.to("tpu")).detach().cpu(), cpu_model(x).detach())
