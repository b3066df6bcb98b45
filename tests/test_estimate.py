"""torch_tpu.estimate (torch_tpu/roofline.py): XLA's cost analysis of the
programs a step runs, projected on a TPU chip, checked against a matmul
computed by hand."""

import pytest
import torch

import torch_tpu
from torch_tpu.roofline import CHIPS

M, K, N = 256, 512, 128


def _matmul_inputs():
    return torch.randn(M, K).to("tpu"), torch.randn(K, N).to("tpu")


@pytest.mark.parametrize("chip", ["v5e", "v6e", "v7x"])
def test_matmul_matches_hand_computation(chip):
    a, b = _matmul_inputs()
    e = torch_tpu.estimate(lambda x, y: x @ y, a, b, chip=chip, measure=False)
    flops = 2 * M * K * N
    nbytes = 4 * (M * K + K * N + M * N)  # read both operands, write the result, float32
    assert e.flops == flops
    assert e.bytes_accessed == nbytes
    c = CHIPS[chip]
    t = max(flops / c["peak_flops"], nbytes / c["hbm_bytes_per_s"])
    assert e.projected_s == pytest.approx(t, rel=1e-12)
    assert e.mfu == pytest.approx(flops / (t * c["peak_flops"]), rel=1e-12)
    # 0.1 ms of bytes against microseconds of flops: memory-bound on every chip.
    assert e.bound == "memory"
    assert e.memory_bytes == nbytes and e.fits


def test_a_step_sums_its_programs_and_this_machine_is_measured():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)).to("tpu")
    x = torch.randn(32, 64).to("tpu")

    def step():
        m.zero_grad(set_to_none=True)
        loss = m(x).square().mean()
        loss.backward()
        return loss

    e = torch_tpu.estimate(step, chip="v6e")
    # Forward and backward matmuls: 3 per linear layer (minus the input's gradient), 2 flops a MAC.
    matmul_flops = 2 * 32 * (64 * 128 + 128 * 8) * 3 - 2 * 32 * 64 * 128
    assert e.flops >= matmul_flops
    assert e.flops < 1.5 * matmul_flops  # elementwise work is small beside it
    assert sum(p.flops for p in e.programs) == e.flops
    assert e.host_peak_flops > 0 and e.host_bytes_per_s > 0 and e.host_measured_s > 0
    assert e.host_ratio == pytest.approx(e.host_projected_s / e.host_measured_s)
    assert e.reference_ratio > 0
    assert "v6e" in str(e) and "ratio" in str(e)


def test_unknown_chip():
    with pytest.raises(ValueError, match="unknown chip 'v9'"):
        torch_tpu.estimate(lambda: None, chip="v9")
