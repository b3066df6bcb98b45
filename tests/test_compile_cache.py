"""A program compiles once per op, dtypes and shapes: running the same
OpInfo samples again in the same process compiles nothing."""

import os
import subprocess
import sys

import torch
import torch_tpu

# A spread of families; every entry here passes its float32 samples.
ENTRIES = ["add", "mul", "div.no_rounding_mode", "sin", "exp", "sum", "mean", "amax", "argmax",
           "softmax", "nn.functional.relu", "nn.functional.gelu", "matmul", "addmm", "cat",
           "index_select", "gather", "where", "clamp", "cumsum", "nonzero", "unique"]


SECOND_PASS = r"""
import sys, torch, torch_tpu
sys.path.insert(0, "tests")
from opinfo import harness
table = harness.all_entries()
entries = [table[name] for name in sys.argv[1].split(",")]
for op in entries:
    assert harness.run_forward(op, torch.float32, max_samples=4).status == "pass", op.name
first = torch_tpu._C._compile_count()
for op in entries:
    assert harness.run_forward(op, torch.float32, max_samples=4).status == "pass", op.name
print(first, torch_tpu._C._compile_count())
"""


def test_second_pass_compiles_nothing():
    # A fresh process with no disk cache: the count must not depend on what
    # the suite compiled before (the in-memory program cache is bounded).
    env = dict(os.environ, TORCH_TPU_CACHE_DIR="", TPU_DEFER_AND_FUSE="0")
    out = subprocess.run([sys.executable, "-c", SECOND_PASS, ",".join(ENTRIES)], env=env, capture_output=True,
                         text=True, timeout=900, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr[-3000:]
    first, second = map(int, out.stdout.split()[-2:])
    assert first > 0
    assert second == first, f"the second pass compiled {second - first} programs"


def test_new_scalar_values_do_not_recompile():
    x = torch.randn(8, device="tpu")
    x.mul(2.0).add_(1.0)
    before = torch_tpu._C._compile_count()
    for v in (0.5, 3.0, -7.25):
        x.mul(v).add_(v)
    assert torch_tpu._C._compile_count() == before


BOUNDED = r"""
import torch, torch_tpu
def maps():
    return sum(1 for _ in open("/proc/self/maps"))
torch.ones(3, device="tpu").cpu()
m0 = maps()
for i in range(1, 201):
    # two programs per size (mul, neg); the fill of ones compiles none
    # (exec/fill.h writes it on the host)
    y = (torch.ones(i, device="tpu") * 2).neg().cpu()
    assert torch.equal(y, torch.full((i,), -2.0)), i
programs, hits, misses = torch_tpu._C._program_cache_stats()
print(programs, misses, maps() - m0)
"""


def test_program_cache_is_bounded():
    # Each XLA executable holds code mappings; an unbounded cache made long
    # runs reach the kernel's map limit (65530) and segfault. With 16 slots,
    # 400 distinct programs leave at most 16 alive and the map count flat.
    env = dict(os.environ, TORCH_TPU_PROGRAM_CACHE_SIZE="16", TORCH_TPU_CACHE_DIR="", TPU_DEFER_AND_FUSE="0")
    out = subprocess.run([sys.executable, "-c", BOUNDED], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    programs, misses, growth = map(int, out.stdout.split()[-3:])
    assert programs <= 16 and misses >= 400
    assert growth < 400, f"memory maps grew by {growth} for 16 live programs"
