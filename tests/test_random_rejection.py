"""Samplers with a data-dependent number of draws (lowering/random_rejection.cpp):
_standard_gamma, _sample_dirichlet, poisson and binomial, and the torch.distributions
built on them. Draws are not CPU's numbers, so each distribution is compared
with CPU's samples of the same parameters: a two-sample Kolmogorov-Smirnov
statistic below its 1e-4 critical value, and the means within 6 standard
errors. Seeds are fixed: the tpu generator is deterministic."""

import math

import pytest
import torch
import torch_tpu

N = 20000


def _ks(a: torch.Tensor, b: torch.Tensor) -> float:
    """Two-sample Kolmogorov-Smirnov statistic of two 1-D samples."""
    a, b = a.double().sort().values, b.double().sort().values
    both = torch.cat([a, b])
    fa = torch.searchsorted(a, both, right=True).double() / a.numel()
    fb = torch.searchsorted(b, both, right=True).double() / b.numel()
    return (fa - fb).abs().max().item()


def _same_distribution(tpu: torch.Tensor, cpu: torch.Tensor):
    tpu, cpu = tpu.flatten().double(), cpu.flatten().double()
    assert torch.isfinite(tpu).all()
    crit = math.sqrt(-math.log(1e-4 / 2) / 2) * math.sqrt(2 / N)
    assert _ks(tpu, cpu) < crit, (_ks(tpu, cpu), crit)
    se = math.sqrt(cpu.var().item() / N + tpu.var().item() / N)
    assert abs(tpu.mean().item() - cpu.mean().item()) <= 6 * se + 1e-12


@pytest.mark.parametrize("a", [0.05, 0.5, 1.0, 2.5, 30.0, 500.0])
def test_standard_gamma_matches_cpu_distribution(a):
    torch.manual_seed(0)
    cpu = torch._standard_gamma(torch.full((N,), a))
    tpu = torch._standard_gamma(torch.full((N,), a, device="tpu")).cpu()
    assert (tpu > 0).all()  # CPU's floor: never 0
    _same_distribution(tpu, cpu)


@pytest.mark.parametrize("rate", [0.3, 4.0, 9.99, 10.0, 60.0, 2000.0])
def test_poisson_matches_cpu_distribution(rate):
    torch.manual_seed(0)
    cpu = torch.poisson(torch.full((N,), rate))
    tpu = torch.poisson(torch.full((N,), rate, device="tpu")).cpu()
    assert (tpu == tpu.round()).all() and (tpu >= 0).all()
    _same_distribution(tpu, cpu)


@pytest.mark.parametrize("n,p", [(10, 0.3), (5, 0.9), (100, 0.05), (100, 0.5), (1000, 0.97), (10**6, 0.4)])
def test_binomial_matches_cpu_distribution(n, p):
    # inversion below n q = 10, BTRS above (q = min(p, 1 - p)); 10**6 tests
    # the float32 bound (its n log n terms cancel)
    torch.manual_seed(0)
    cpu = torch.binomial(torch.full((N,), float(n)), torch.full((N,), p))
    tpu = torch.binomial(torch.full((N,), float(n), device="tpu"), torch.full((N,), p, device="tpu")).cpu()
    assert (tpu == tpu.round()).all() and (tpu >= 0).all() and (tpu <= n).all()
    _same_distribution(tpu, cpu)
    expected_var = n * p * (1 - p)
    assert abs(tpu.double().var().item() - expected_var) < 6 * expected_var * math.sqrt(2 / N)


def test_binomial_edges_like_cpu():
    count = torch.tensor([0.0, 7.0, 7.0, 5.0, 3.0])
    prob = torch.tensor([0.5, 0.0, 1.0, float("nan"), 0.5])
    got = torch.binomial(count.to("tpu"), prob.to("tpu")).cpu()
    torch.testing.assert_close(got[:3], torch.tensor([0.0, 0.0, 7.0]))
    assert got[3].isnan() and torch.binomial(count, prob)[3].isnan()
    assert 0 <= got[4] <= 3
    dist = torch.distributions.Binomial(10, torch.tensor([0.2, 0.7], device="tpu"))
    assert dist.sample((3,)).device.type == "tpu"


def test_mixed_parameters_in_one_call():
    # every element runs its own branch (boosted or not, PTRS or products)
    torch.manual_seed(0)
    a = torch.tensor([0.2, 3.0, 40.0]).repeat(N)
    g = torch._standard_gamma(a.to("tpu")).cpu().view(N, 3)
    p = torch.poisson(a.to("tpu")).cpu().view(N, 3)
    for j, v in enumerate([0.2, 3.0, 40.0]):
        _same_distribution(g[:, j], torch._standard_gamma(torch.full((N,), v)))
        _same_distribution(p[:, j], torch.poisson(torch.full((N,), v)))


def test_poisson_rate_zero_and_bad_rates():
    assert torch.poisson(torch.zeros(5, device="tpu")).cpu().eq(0).all()
    for bad in (-1.0, float("nan")):
        with pytest.raises(RuntimeError, match="invalid Poisson rate"):
            torch.poisson(torch.tensor([1.0, bad], device="tpu")).cpu()


def test_dirichlet_and_beta():
    torch.manual_seed(0)
    conc = torch.tensor([0.5, 1.0, 3.0])
    tpu = torch.distributions.Dirichlet(conc.to("tpu")).sample((N,)).cpu()
    cpu = torch.distributions.Dirichlet(conc).sample((N,))
    torch.testing.assert_close(tpu.sum(-1), torch.ones(N), atol=1e-5, rtol=0)
    for j in range(3):
        _same_distribution(tpu[:, j], cpu[:, j])
    b = torch.distributions.Beta(torch.tensor(2.0, device="tpu"), torch.tensor(5.0, device="tpu")).sample((N,))
    _same_distribution(b.cpu(), torch.distributions.Beta(torch.tensor(2.0), torch.tensor(5.0)).sample((N,)))


@pytest.mark.parametrize("dist", [
    lambda d: torch.distributions.Gamma(torch.tensor([2.0], device=d), torch.tensor([3.0], device=d)),
    lambda d: torch.distributions.Chi2(torch.tensor([3.0], device=d)),
    lambda d: torch.distributions.StudentT(torch.tensor([4.0], device=d)),
    lambda d: torch.distributions.Poisson(torch.tensor([7.0], device=d)),
])
def test_distributions_sample_on_tpu(dist):
    torch.manual_seed(0)
    tpu = dist("tpu").sample((N,))
    assert tpu.device.type == "tpu"
    _same_distribution(tpu.cpu(), dist("cpu").sample((N,)))


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_dtypes_and_shapes(dtype):
    torch.manual_seed(0)
    a = torch.full((N // 4, 4), 2.0, dtype=dtype)
    g = torch._standard_gamma(a.to("tpu"))
    p = torch.poisson(a.to("tpu"))
    assert g.dtype == p.dtype == dtype and g.shape == p.shape == a.shape
    _same_distribution(g.cpu(), torch._standard_gamma(a.float()))
    assert torch._standard_gamma(torch.empty(0, 3, device="tpu")).shape == (0, 3)


def test_seeded_samples_repeat():
    a = torch.tensor([0.3, 2.0, 50.0], device="tpu")
    torch.manual_seed(7)
    first = (torch._standard_gamma(a).cpu(), torch.poisson(a).cpu())
    torch.manual_seed(7)
    again = (torch._standard_gamma(a).cpu(), torch.poisson(a).cpu())
    assert all(torch.equal(x, y) for x, y in zip(first, again))
    assert not torch.equal(torch._standard_gamma(a).cpu(), first[0])  # the stream moves on
