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


def test_views_at_new_offsets_do_not_recompile():
    # An op that writes none of its arguments reads a view's nonzero storage
    # offset at run time: a loop over x[i] runs one program, not one per i
    # (each compile was a new program, a recompile per index).
    base = torch.arange(96.0).reshape(8, 12)
    x = base.to("tpu")
    torch.tpu.synchronize()  # Fused Eager: no earlier test's ops join the first trace below
    views = {
        "row": lambda t, i: t[i],
        "column": lambda t, i: t[:, i],
        "element": lambda t, i: t[i, i],
        "strided block": lambda t, i: t.t()[i:i + 3, 1:6:2],
        "overlapping (gather)": lambda t, i: t.as_strided((3, 3), (2, 3), i),
    }
    for name, view in views.items():
        (view(x, 1) * 2).cpu()  # the first nonzero offset compiles
        before = torch_tpu._C._compile_count()
        for i in range(2, 6):
            got = (view(x, i) * 2).cpu()
            assert torch.equal(got, view(base, i) * 2), (name, i)
        assert torch_tpu._C._compile_count() == before, f"{name}: a new offset recompiled"
    # Tensor lists too; offset 0 keeps its own program (a whole-storage read).
    for i in range(0, 7):
        got = torch.cat([x[i], x[i + 1], x[:, i]]).cpu()
        assert torch.equal(got, torch.cat([base[i], base[i + 1], base[:, i]])), i
    # An op that writes keeps offsets in its programs (its write-back reads
    # them) and still writes the right elements.
    out = torch.zeros(8, 12, device="tpu")
    tripled = torch.zeros(8, 12, device="tpu")
    for i in range(8):
        out[i].copy_(x[7 - i])
        torch.mul(x[i], 3, out=tripled[i])
    assert torch.equal(out.cpu(), base.flip(0))
    assert torch.equal(tripled.cpu(), base * 3)


def test_equal_scalar_values_do_not_recompile():
    # Uploaded scalars share one buffer per value; in Fused Eager a trace's
    # wiring must not depend on which of its scalars happen to be equal
    # (the second line reused the first program's shape only when 2 != 3).
    x = torch.arange(12.0).to("tpu")
    torch.tpu.synchronize()
    (x * 2 + 3).cpu()
    before = torch_tpu._C._compile_count()
    for a, b in [(2, 2), (5, 7), (4, 4)]:
        got = (x * a + b).cpu()  # outside the assert: pytest's rewrite would keep x * a alive
        assert torch.equal(got, torch.arange(12.0) * a + b), (a, b)
    assert torch_tpu._C._compile_count() == before
