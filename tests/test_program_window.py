"""`_C._begin_program_window()` counts the distinct fused programs that run
from then on, found in the cache or compiled (runtime/modes.h). The zoo's
(c) budget uses it: counting only compiles undercounts a generate whose
programs an earlier model in the same process left cached."""

import pytest
import torch

import torch_tpu
from torch_tpu import _C

# The test sets Fused Eager itself: run once, in the Strict pass.
pytestmark = pytest.mark.mode_independent


def _step(x, w):
    return torch.tanh(x @ w + 1.0).sum(0)


def _run(n, width):
    x, w = torch.randn(n, width), torch.randn(width, width)
    with torch_tpu.eager_mode("fused"):
        got = _step(x.to("tpu"), w.to("tpu")).cpu()
    torch.testing.assert_close(got, _step(x, w), rtol=1e-5, atol=1e-5)


def test_window_counts_cached_programs_once_and_new_ones():
    _run(5, 7)  # leaves this trace's program in the fused cache
    before = _C._fusion_stats()["compiles"]
    _C._begin_program_window()
    assert _C._fusion_stats()["window_programs"] == 0
    _run(5, 7)
    _run(5, 7)
    s = _C._fusion_stats()
    assert s["compiles"] == before  # found in the cache: compiles alone would say 0
    assert s["window_programs"] == 1  # once, however often it runs
    _run(6, 7)  # another shape: a second program
    assert _C._fusion_stats()["window_programs"] == 2
    _C._begin_program_window()
    assert _C._fusion_stats()["window_programs"] == 0
