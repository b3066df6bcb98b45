"""A program compiles once per op, dtypes and shapes: running the same
OpInfo samples again in the same process compiles nothing."""

import pytest
import torch
import torch_tpu

from opinfo import harness

# A spread of families; every entry here passes its float32 samples.
ENTRIES = ["add", "mul", "div.no_rounding_mode", "sin", "exp", "sum", "mean", "amax", "argmax",
           "softmax", "nn.functional.relu", "nn.functional.gelu", "matmul", "addmm", "cat",
           "index_select", "gather", "where", "clamp", "cumsum", "nonzero", "unique"]


@pytest.fixture(scope="module")
def entries():
    table = harness.all_entries()
    return [table[name] for name in ENTRIES]


def test_second_pass_compiles_nothing(entries):
    for op in entries:
        assert harness.run_forward(op, torch.float32, max_samples=4).status == "pass", op.name
    first = torch_tpu._C._compile_count()
    assert first > 0
    for op in entries:
        assert harness.run_forward(op, torch.float32, max_samples=4).status == "pass", op.name
    assert torch_tpu._C._compile_count() == first


def test_new_scalar_values_do_not_recompile():
    x = torch.randn(8, device="tpu")
    x.mul(2.0).add_(1.0)
    before = torch_tpu._C._compile_count()
    for v in (0.5, 3.0, -7.25):
        x.mul(v).add_(v)
    assert torch_tpu._C._compile_count() == before
