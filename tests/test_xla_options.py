"""A user's XLA compile options (torch_tpu/xla_options.py): the reference's
`torch.tpu.compiler.custom_compiler_options` blocks and
`torch.tpu.allow_excess_precision`. An option reaching XLA is seen through
`xla_dump_to`, which makes XLA write the programs it compiles to a folder."""

import os

import pytest
import torch

import torch_tpu
from utils import assert_close


@pytest.fixture(autouse=True)
def restore():
    prev = torch_tpu.get_eager_mode()
    yield
    torch_tpu.eager_mode(prev)
    torch.tpu.allow_excess_precision = None
    assert torch_tpu._C._compiler_options() == []


def _compiles():
    return torch_tpu._C._compile_count() + torch_tpu.fusion_stats()["compiles"]


def _dumped(folder):
    return len(os.listdir(folder)) if os.path.isdir(folder) else 0


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_options_reach_xla_inside_the_block_only(mode, tmp_path):
    torch_tpu.eager_mode(mode)
    x, y = torch.randn(37, 5), torch.randn(37, 5)
    a, b = x.to("tpu"), y.to("tpu")
    before = (a * b + a).cpu()  # compiled outside: with XLA's defaults
    dump = tmp_path / "dump"
    with torch.tpu.compiler.custom_compiler_options({"xla_dump_to": str(dump)}):
        inside = a * b + a  # in Fused Eager: deferred, run at the block's end
    assert _dumped(dump) > 0, "the block's program was not compiled with its options"
    n = _dumped(dump)
    assert_close(inside.cpu(), x * y + x)
    assert_close(before, x * y + x)
    # After the block: the programs compiled before it, no new compile, no dump.
    c = _compiles()
    assert_close((a * b + a).cpu(), x * y + x)
    assert _compiles() == c and _dumped(dump) == n


def test_same_options_find_their_programs_again(tmp_path):
    a = torch.randn(11, device="tpu")
    (a - 1).cpu()
    options = {"xla_cpu_enable_fast_math": False, "xla_dump_to": str(tmp_path)}
    c = _compiles()
    with torch.tpu.compiler.custom_compiler_options(options):
        (a - 1).cpu()
    assert _compiles() == c + 1  # another program under other options
    with torch.tpu.compiler.custom_compiler_options(dict(options)):
        (a - 1).cpu()
    assert _compiles() == c + 1


def test_blocks_nest_inner_wins_and_key_the_disk_cache(tmp_path):
    with torch.tpu.compiler.custom_compiler_options({"xla_optimization_level": "O1", "xla_dump_to": "a"}):
        with torch.tpu.compiler.custom_compiler_options({"xla_dump_to": str(tmp_path)}):
            assert torch_tpu._C._compiler_options() == [("xla_dump_to", str(tmp_path)),
                                                        ("xla_optimization_level", "O1")]
            inputs = torch_tpu._C._compile_cache_key_inputs()
            assert inputs["compiler_options"] == f"xla_dump_to={tmp_path};xla_optimization_level=O1;"
            a = torch.arange(6.0, device="tpu")
            assert_close((a * 3).cpu(), torch.arange(6.0) * 3)
        assert torch_tpu._C._compiler_options() == [("xla_dump_to", "a"), ("xla_optimization_level", "O1")]
    assert "compiler_options" not in torch_tpu._C._compile_cache_key_inputs()


def test_compiled_graph_called_in_a_block(tmp_path):
    f = torch.compile(lambda x: torch.sin(x) * 2 + 1, backend="tpu")
    x = torch.randn(8, 3)
    with torch.tpu.compiler.custom_compiler_options({"xla_dump_to": str(tmp_path)}):
        out = f(x.to("tpu"))
    assert_close(out.cpu(), torch.sin(x) * 2 + 1)
    assert _dumped(tmp_path) > 0


def test_bad_options_raise_clearly():
    a = torch.randn(9, device="tpu")
    # Fused Eager names the deferred op it was running (a RuntimeError around it).
    with pytest.raises((ValueError, RuntimeError), match="refused the options in force.*xla_no_such_option"):
        with torch.tpu.compiler.custom_compiler_options({"xla_no_such_option": "1"}):
            (a + 7).cpu()
    with pytest.raises(ValueError, match="not an XLA option"):
        with torch.tpu.compiler.custom_compiler_options({"optimization_level": "O1"}):
            pass
    with pytest.raises(ValueError, match="'O0', 'O1', 'O2' or 'O3'"):
        with torch.tpu.compiler.custom_compiler_options({"xla_optimization_level": "fast"}):
            pass
    with pytest.raises(TypeError, match="dict"):
        with torch.tpu.compiler.custom_compiler_options([("xla_dump_to", "x")]):
            pass
    assert torch_tpu._C._compiler_options() == []  # every block closed
    assert_close((a + 7).cpu(), a.cpu() + 7)  # and the device still works


def test_other_platforms_options_are_ignored_with_a_warning():
    a = torch.randn(5, device="tpu")
    other = "xla_gpu_enable_latency_hiding_scheduler" if torch.tpu.platform() == "cpu" else "xla_cpu_enable_fast_math"
    with pytest.warns(UserWarning, match=f"{other} is an option of another platform"):
        with torch.tpu.compiler.custom_compiler_options({other: True}):
            assert_close((a * 5).cpu(), a.cpu() * 5)


def test_refused_inside_torch_compile():
    def f(x):
        with torch.tpu.compiler.custom_compiler_options({"xla_optimization_level": "O1"}):
            return x + 1

    with pytest.raises(Exception, match="cannot be used inside a torch.compile"):
        torch.compile(f, backend="tpu", fullgraph=True)(torch.ones(3, device="tpu"))


def test_allow_excess_precision_property():
    platform_default = torch.tpu.platform() == "cpu" and "xla_allow_excess_precision" not in os.environ.get(
        "XLA_FLAGS", "")
    assert torch.tpu.allow_excess_precision is platform_default
    a = torch.randn(13, device="tpu")
    torch_tpu.mark_step()  # in Fused Eager, `a`'s own program: not fused with `* 4`
    (a * 4).cpu()
    c = _compiles()
    torch.tpu.allow_excess_precision = not platform_default
    assert torch.tpu.allow_excess_precision is (not platform_default)
    assert torch_tpu._C._compiler_options() == [("xla_allow_excess_precision", str(not platform_default).lower())]
    assert_close((a * 4).cpu(), a.cpu() * 4)
    assert _compiles() == c + 1  # a new setting is a new program
    torch.tpu.allow_excess_precision = None
    assert torch.tpu.allow_excess_precision is platform_default
    (a * 4).cpu()
    assert _compiles() == c + 1  # and the old one is found again
    with pytest.raises(TypeError, match="True or False"):
        torch.tpu.allow_excess_precision = "yes"
