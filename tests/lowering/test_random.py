"""Random lowering rules: uniform_, normal, bernoulli, random_, exponential_,
geometric_, log_normal_, cauchy_, randperm. Checks reproducibility under
seeding, independence of consecutive calls, and distribution statistics with
loose (several-sigma) bounds."""

import math

import pytest
import torch

N = 100_000
FLOATS = [torch.float32, torch.bfloat16, torch.float64, torch.float16]


def ks_stat(samples: torch.Tensor, cdf) -> float:
    """Kolmogorov-Smirnov distance between samples and a CDF."""
    x, _ = samples.double().flatten().sort()
    n = x.numel()
    f = cdf(x)
    hi = torch.arange(1, n + 1, dtype=torch.float64) / n
    lo = torch.arange(0, n, dtype=torch.float64) / n
    return max((hi - f).max().item(), (f - lo).max().item())


def ks_bound(n: int) -> float:
    return 1.95 / math.sqrt(n)  # ~0.1% false-alarm rate


# ---- seeding ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "draw",
    [
        lambda: torch.rand(100, device="tpu"),
        lambda: torch.randn(100, device="tpu"),
        lambda: torch.randint(0, 1000, (100,), device="tpu"),
        lambda: torch.randperm(50, device="tpu"),
        lambda: torch.bernoulli(torch.full((100,), 0.5).to("tpu")),
        lambda: torch.empty(100, device="tpu").exponential_(),
    ],
)
def test_manual_seed_reproducible(draw):
    torch.manual_seed(0)
    a = draw().cpu()
    b = draw().cpu()
    torch.manual_seed(0)
    a2 = draw().cpu()
    assert torch.equal(a, a2)
    assert not torch.equal(a, b)


def test_generator_argument():
    g = torch.Generator(device="tpu").manual_seed(11)
    a = torch.rand(64, device="tpu", generator=g).cpu()
    g.manual_seed(11)
    b = torch.rand(64, device="tpu", generator=g).cpu()
    assert torch.equal(a, b)
    # Another seed gives other numbers.
    g.manual_seed(12)
    assert not torch.equal(a, torch.rand(64, device="tpu", generator=g).cpu())


def test_consecutive_calls_do_not_overlap():
    # Each call must draw a fresh stream, not the previous one shifted.
    torch.manual_seed(1)
    a = torch.rand(4096, device="tpu").cpu()
    b = torch.rand(4096, device="tpu").cpu()
    common = set(a.tolist()) & set(b.tolist())
    assert len(common) < 20
    # Nor are the streams correlated.
    c = torch.corrcoef(torch.stack([a, b]))[0, 1].item()
    assert abs(c) < 0.08


def test_shapes_and_zero_size():
    assert torch.rand(2, 3, 4, device="tpu").shape == (2, 3, 4)
    assert torch.rand(0, device="tpu").cpu().numel() == 0
    assert torch.randn((), device="tpu").cpu().shape == ()


# ---- uniform ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_rand_statistics(dtype):
    x = torch.rand(N, device="tpu", dtype=dtype)
    assert x.dtype == dtype and x.device.type == "tpu"
    x = x.cpu().double()
    assert 0.0 <= x.min().item() and x.max().item() < 1.0
    assert abs(x.mean().item() - 0.5) < 0.01
    assert abs(x.var().item() - 1 / 12) < 0.005
    if dtype in (torch.float32, torch.float64):
        assert ks_stat(x, lambda t: t.clamp(0, 1)) < ks_bound(N)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_uniform_range(dtype):
    x = torch.empty(N, dtype=dtype, device="tpu").uniform_(-2.0, 5.0).cpu().double()
    assert -2.0 <= x.min().item() and x.max().item() < 5.0
    assert abs(x.mean().item() - 1.5) < 0.05
    assert abs(x.std().item() - 7 / math.sqrt(12)) < 0.05


def test_uniform_noncontiguous_view():
    base = torch.zeros(8, 6, device="tpu")
    base[:, ::2].uniform_(1.0, 2.0)
    b = base.cpu()
    assert bool((b[:, 1::2] == 0).all())
    assert bool((b[:, ::2] >= 1).all()) and bool((b[:, ::2] < 2).all())


# ---- normal ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_randn_statistics(dtype):
    x = torch.randn(N, device="tpu", dtype=dtype).cpu().double()
    assert abs(x.mean().item()) < 0.02
    assert abs(x.std().item() - 1) < 0.02
    if dtype in (torch.float32, torch.float64):
        assert ks_stat(x, torch.special.ndtr) < ks_bound(N)


def test_normal_overloads():
    x = torch.empty(N, device="tpu").normal_(3.0, 0.5).cpu()
    assert abs(x.mean().item() - 3) < 0.02 and abs(x.std().item() - 0.5) < 0.02
    mean = torch.tensor([-10.0, 0.0, 10.0]).repeat(N // 10)
    y = torch.normal(mean.to("tpu"), 2.0).cpu()
    assert y.shape == mean.shape
    assert torch.allclose((y - mean).view(-1, 3).mean(0), torch.zeros(3), atol=0.1)
    assert abs((y - mean).std().item() - 2) < 0.05
    std = torch.tensor([0.1, 1.0]).repeat(N // 10)
    z = torch.normal(1.0, std.to("tpu")).cpu()
    assert torch.allclose(((z - 1) / std).view(-1, 2).std(0), torch.ones(2), atol=0.05)
    w = torch.normal(mean.to("tpu"), torch.full_like(mean, 0.5).to("tpu")).cpu()
    assert abs(((w - mean) / 0.5).std().item() - 1) < 0.05
    v = torch.normal(2.0, 3.0, size=(N,), device="tpu").cpu()
    assert abs(v.mean().item() - 2) < 0.1 and abs(v.std().item() - 3) < 0.1


def test_log_normal_and_cauchy():
    x = torch.empty(N, device="tpu").log_normal_(0.5, 0.25).cpu()
    assert bool((x > 0).all())
    assert abs(x.log().mean().item() - 0.5) < 0.01 and abs(x.log().std().item() - 0.25) < 0.01
    c = torch.empty(N, device="tpu").cauchy_(1.0, 2.0).cpu().double()
    assert abs(c.median().item() - 1.0) < 0.05
    assert ks_stat(c, lambda t: 0.5 + torch.atan((t - 1.0) / 2.0) / math.pi) < ks_bound(N)


# ---- bernoulli ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_bernoulli_float_p(dtype):
    x = torch.empty(N, dtype=dtype, device="tpu").bernoulli_(0.3).cpu()
    assert x.dtype == dtype
    assert set(x.unique().tolist()) <= {0, 1}
    assert abs(x.double().mean().item() - 0.3) < 0.01


def test_bernoulli_tensor_p():
    p = torch.linspace(0, 1, 5).repeat(N // 5)
    x = torch.bernoulli(p.to("tpu")).cpu()
    assert x.dtype == torch.float32
    means = x.view(-1, 5).mean(0)
    assert torch.allclose(means, torch.linspace(0, 1, 5), atol=0.015)
    assert means[0].item() == 0 and means[-1].item() == 1
    y = torch.zeros(N, dtype=torch.float64, device="tpu").bernoulli_(p.double().to("tpu")).cpu()
    assert torch.allclose(y.view(-1, 5).mean(0), torch.linspace(0, 1, 5, dtype=torch.float64), atol=0.015)
    z = torch.bernoulli(torch.zeros(N, device="tpu"), 0.75).cpu()
    assert abs(z.mean().item() - 0.75) < 0.01


# ---- random_ / randint ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32, torch.bfloat16])
def test_randint(dtype):
    x = torch.randint(-3, 7, (N,), device="tpu", dtype=dtype).cpu()
    assert x.dtype == dtype
    assert x.min().item() == -3 and x.max().item() == 6
    counts = torch.bincount((x.long() + 3))
    assert counts.numel() == 10
    assert (counts.double() / N - 0.1).abs().max().item() < 0.01


def test_random_overloads():
    x = torch.empty(N, dtype=torch.int64, device="tpu").random_(5).cpu()
    assert x.min().item() == 0 and x.max().item() == 4
    b = torch.empty(N, dtype=torch.bool, device="tpu").random_().cpu()
    assert abs(b.double().mean().item() - 0.5) < 0.01
    i = torch.empty(N, dtype=torch.int32, device="tpu").random_().cpu()
    assert i.min().item() >= 0 and i.max().item() > 2**30
    f = torch.empty(N, dtype=torch.float32, device="tpu").random_().cpu()
    assert f.min().item() >= 0 and f.max().item() <= 2**24 and bool((f == f.round()).all())
    big = torch.empty(N, dtype=torch.int64, device="tpu").random_(2**40, None).cpu()
    assert big.min().item() >= 2**40 and big.max().item() > 2**62
    with pytest.raises(RuntimeError):
        torch.empty(3, dtype=torch.int64, device="tpu").random_(5, 2)


# ---- exponential / geometric -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_exponential(dtype):
    x = torch.empty(N, dtype=dtype, device="tpu").exponential_(2.0).cpu().double()
    assert x.min().item() >= 0
    assert abs(x.mean().item() - 0.5) < 0.01
    if dtype != torch.bfloat16:
        assert ks_stat(x, lambda t: 1 - torch.exp(-2.0 * t)) < ks_bound(N)


def test_geometric():
    x = torch.empty(N, device="tpu").geometric_(0.25).cpu()
    assert x.min().item() >= 1 and bool((x == x.round()).all())
    assert abs(x.mean().item() - 4.0) < 0.1


# ---- randperm ---------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_randperm(n):
    p = torch.randperm(n, device="tpu")
    assert p.dtype == torch.int64 and p.device.type == "tpu"
    assert torch.equal(p.cpu().sort().values, torch.arange(n))


def test_randperm_uniform_first_position():
    counts = torch.zeros(4)
    for _ in range(200):
        counts[torch.randperm(4, device="tpu").cpu()[0]] += 1
    assert counts.min().item() > 20


# ---- complex draws and dtypes the fills refuse ---------------------------------------------

def _parts(z):
    z = z.cpu()
    return z.real.double(), z.imag.double()


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_normal_draws_both_parts_like_cpu(dtype):
    # CPU and CUDA draw real and imaginary parts independently, each with
    # std / sqrt(2); tpu once drew the real part with std and left the
    # imaginary part zero.
    torch.manual_seed(0)
    for z, mean, var in ((torch.randn(N, dtype=dtype, device="tpu"), 0.0, 0.5),
                         (torch.empty(N, dtype=dtype, device="tpu").normal_(1.0, 2.0), 1.0, 2.0)):
        assert z.dtype == dtype
        for part in _parts(z):
            assert abs(part.mean().item() - mean) < 5 * math.sqrt(var / N)
            assert abs(part.var().item() / var - 1) < 0.03
        re, im = _parts(z)
        assert abs(torch.corrcoef(torch.stack([re, im]))[0, 1].item()) < 0.02
    z = torch.normal(torch.full((N,), 1 + 2j, device="tpu"), torch.full((N,), 2.0, device="tpu"))
    re, im = _parts(z)
    assert abs(re.mean().item() - 1) < 0.03 and abs(im.mean().item() - 2) < 0.03
    assert abs(re.var().item() / 2 - 1) < 0.03 and abs(im.var().item() / 2 - 1) < 0.03


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_uniform_fills_both_parts_like_cpu(dtype):
    torch.manual_seed(0)
    z = torch.empty(N, dtype=dtype, device="tpu").uniform_(-1.0, 3.0)
    for part in _parts(z):
        assert part.min().item() >= -1.0 and part.max().item() < 3.0
        assert ks_stat(part, lambda x: ((x + 1) / 4).clamp(0, 1)) < ks_bound(N)


def test_uniform_of_integers_and_random_out_of_range_raise_as_on_cpu():
    for d in ("cpu", "tpu"):
        with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
            torch.zeros(4, dtype=torch.int64, device=d).uniform_(0, 10)
        for dtype, lo, hi, msg in ((torch.int8, 0, 1000, "to - 1 is out of bounds for signed char"),
                                   (torch.uint8, -1, 5, "from is out of bounds for unsigned char"),
                                   (torch.bool, 0, 3, "to - 1 is out of bounds for bool")):
            with pytest.raises(RuntimeError, match=msg):
                torch.zeros(4, dtype=dtype, device=d).random_(lo, hi)
        with pytest.raises(RuntimeError, match="check_random_bounds handles only"):
            torch.zeros(4, dtype=torch.complex64, device=d).random_(0, 5)
        with pytest.raises(NotImplementedError, match="not implemented for 'ComplexFloat'"):
            torch.zeros(4, dtype=torch.complex64, device=d).bernoulli_(0.5)
    b = torch.zeros(1000, dtype=torch.bool, device="tpu").random_(0, 2).cpu()
    assert 300 < b.sum().item() < 700
