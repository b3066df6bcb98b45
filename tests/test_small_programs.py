"""Small programs (runtime/compile_tier.h): on XLA:CPU a program under 8 KiB
of StableHLO whose every tensor has at most 16,384 elements is compiled with
XLA:CPU's elemental emitters (about half the compile time), and a tiny one
(at most 256 elements a tensor) also at LLVM -O0; never rebuilt; larger
programs keep XLA's defaults. Results are checked against CPU like every
op's; here: which programs count as small or tiny, that the rule applies
and can be turned off, and that such programs give CPU's values, the same
bits on every call."""

import os
import subprocess
import sys

import pytest
import torch

import torch_tpu
from torch_tpu import _C
from utils import assert_close

# The rule is XLA:CPU's (other platforms compile everything with their defaults).
on_cpu_only = pytest.mark.skipif(_C._platform()[0] != "cpu", reason="small programs are an XLA:CPU rule")


def _module(*types):
    args = ", ".join(f"%arg{i}: tensor<{t}>" for i, t in enumerate(types))
    return ("module @m {\n  func.func public @main(" + args + ") -> (tensor<" + types[0] + ">) {\n"
            "    \"func.return\"(%arg0) : (tensor<" + types[0] + ">) -> ()\n  }\n}")


@pytest.mark.parametrize("types, small", [
    (["f32"], True),                         # 0-dim
    (["4x4xf32", "i64"], True),
    (["128x128xf32"], True),                 # 16,384 elements: the bound
    (["128x129xf32"], False),
    (["2x2x3x3xf32", "2xui64"], True),       # a conv weight's init
    (["1x70000xi64"], False),
    (["8xcomplex<f32>"], True),
    (["4x?xf32"], False),                    # a dynamic dimension: size unknown
    (["99999999999999999999x2xf32"], False),  # no overflow
])
def test_which_programs_are_small(types, small):
    assert _C._is_small_program(_module(*types)) is small


@pytest.mark.parametrize("types, tiny", [
    (["f32"], True),
    (["16x16xf32", "i64"], True),            # 256 elements: the bound
    (["257xf32"], False),                    # small, not tiny
    (["4x4xf32", "300xi32"], False),         # any tensor over the bound
    (["4x?xf32"], False),
])
def test_which_programs_are_tiny(types, tiny):
    assert _C._is_tiny_program(_module(*types)) is tiny


def test_long_texts_are_not_small():
    text = _module("4xf32") + "\n" + "// padding\n" * 1000  # over 8 KiB
    assert not _C._is_small_program(text)


def _small_compiles():
    return torch_tpu.compile_stats()["small_compiles"]


def _tiny_compiles():
    return torch_tpu.compile_stats()["tiny_compiles"]


@on_cpu_only
def test_small_ops_compile_small_and_match_cpu():
    # Shapes no other test uses, so each op compiles here.
    x = torch.randn(7, 13, 3)
    before = _small_compiles()
    got = torch.tanh(x.to("tpu")).sum(1)  # a reduction: its last bit may differ from the fusion emitters'
    assert_close(got.cpu(), torch.tanh(x).sum(1))
    assert _small_compiles() > before
    big = torch.randn(131, 127)
    before = _small_compiles()
    assert_close(torch.tanh(big.to("tpu")).cpu(), torch.tanh(big))
    assert _small_compiles() == before


@on_cpu_only
def test_tiny_ops_compile_at_O0_match_cpu_and_keep_their_bits():
    # Shapes no other test uses, so each op compiles here; transcendentals,
    # whose last bits are what -O0 can change.
    x = torch.randn(3, 5, 11) * 3
    xt = x.to("tpu")
    fns = (torch.tanh, torch.exp, torch.erf, lambda v: v.sin().sum(-1))
    before, small_before = _tiny_compiles(), _small_compiles()
    # Each result read at once, so that in Fused Eager too each op (or two)
    # is a program of its own.
    outs = [[f(xt).cpu() for f in fns] for _ in range(5)]
    assert _tiny_compiles() > before
    assert _small_compiles() - small_before >= _tiny_compiles() - before  # tiny ones count as small too
    for got, f in zip(outs[0], fns):
        assert_close(got, f(x))
    # Never rebuilt: the fifth call gives the first call's bits.
    for later in outs[1:]:
        for a, b in zip(outs[0], later):
            assert torch.equal(a, b)


@on_cpu_only
def test_conv_weight_init_is_a_small_program():
    torch.manual_seed(0)
    before = _small_compiles()
    conv = torch.nn.Conv2d(5, 3, 3, device="tpu")  # kaiming_uniform_ of a [3, 5, 3, 3] weight
    w = conv.weight.detach().cpu()
    assert _small_compiles() > before
    bound = 1 / (5 * 3 * 3) ** 0.5
    assert w.abs().max() <= bound and w.std() > bound / 4


SCRIPT = r"""
import torch, torch_tpu
x = torch.arange(60, dtype=torch.float32).reshape(6, 10) / 7
y = (x.to("tpu").exp().sum(0) * 3).cpu()
ref = x.exp().sum(0) * 3
assert torch.allclose(y, ref, rtol=1e-6), (y, ref)
s = torch_tpu.compile_stats()
print("SMALL", s["small_compiles"], s["tiny_compiles"], s["xla_compiles"])
"""


@on_cpu_only
@pytest.mark.mode_independent
@pytest.mark.parametrize("setting", ["1", "0"])
def test_env_turns_it_off(setting, tmp_path):
    env = dict(os.environ, TORCH_TPU_SMALL_PROGRAM_OPTIONS=setting, TORCH_TPU_CACHE_DIR=str(tmp_path))
    env.pop("TPU_DEFER_AND_FUSE", None)
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    small, tiny, compiles = map(int, r.stdout.split("SMALL")[1].split())
    assert compiles > 0
    assert small == (compiles if setting == "1" else 0)
    assert tiny == small  # every tensor of the script has at most 60 elements
