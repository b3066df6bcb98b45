"""torch.compile(..., backend="tpu", options=...): the reference backend's
option names are checked and applied (torch_tpu/compile_options.py)."""

import logging
import warnings

import pytest
import torch

import torch_tpu
from torch_tpu.compile_options import CompileOptions, parse
from utils import assert_close

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def bounded_compiles():
    return torch_tpu.compile_stats()["bounded_compiles"]


def test_padded_sizes_each_option_chooses():
    assert CompileOptions().bucket(5, 2, 64) is None  # the power-of-two buckets
    # [2, 64] cut into 4 parts of 16: tops 17, 33, 49 and the bound 64
    four = CompileOptions(num_dynamic_buckets=4)
    assert [four.bucket(v, 2, 64) for v in (2, 17, 18, 33, 50, 64)] == [17, 17, 33, 33, 64, 64]
    assert {CompileOptions(num_dynamic_buckets=1).bucket(v, 2, 64) for v in range(2, 65)} == {64}
    assert four.bucket(100, 2, None) is None  # no upper bound: powers of two
    sixteen = CompileOptions(bucket_size=16)
    assert [sixteen.bucket(v, 2, 40) for v in (1, 16, 17, 33, 40)] == [16, 16, 32, 40, 40]


@pytest.mark.parametrize("bad, error", [
    ({"bogus": 1}, "unknown torch.compile option"),
    ({"num_dynamic_buckets": 9}, "must be 1..8"),
    ({"num_dynamic_buckets": 2.0}, "takes an int"),
    ({"bucket_size": 0}, "must be >= 1"),
    ({"bucket_size": 8, "num_dynamic_buckets": 2}, "give one"),
    ({"name": 3}, "takes a str"),
    ({"debug_callback": 3}, "must be callable"),
    ({"async_compile": "yes"}, "takes a bool"),
])
def test_bad_options_raise_naming_the_option(bad, error):
    with pytest.raises((TypeError, ValueError), match=error):
        parse(bad)
    f = torch.compile(lambda t: t * 2, backend="tpu", options=bad)
    with pytest.raises(Exception, match=error):
        f(torch.ones(3, device="tpu"))


def _run_sizes(options, sizes, width, hi=64):
    """Fused programs compiled for `sizes` of a marked dim; `width` differs
    per call, so no program of an earlier call is reused."""
    def f(x, w):
        return torch.softmax(x @ w, dim=0).sum(0)

    w = torch.randn(8, width)
    torch._dynamo.reset()  # no automatic dynamic width from an earlier call
    fn = torch.compile(f, backend="tpu", options=options)
    before = bounded_compiles()
    with torch.no_grad():
        for n in sizes:
            x = torch.randn(n, 8)
            xt = x.to("tpu")
            torch._dynamo.mark_dynamic(xt, 0, min=2, max=hi)
            assert_close(fn(xt, w.to("tpu")).cpu(), f(x, w), atol=1e-5, rtol=1e-5)
    return bounded_compiles() - before


def test_num_dynamic_buckets_bounds_the_programs_and_matches_cpu():
    sizes = list(range(2, 65, 3))
    assert _run_sizes(None, sizes, 5) >= 5  # 2, 4, 8, 16, 32, 64
    assert _run_sizes({"num_dynamic_buckets": 2}, sizes, 6) == 2
    assert _run_sizes({"num_dynamic_buckets": 1}, sizes, 7) == 1


def test_bucket_size_pads_to_its_multiples_and_matches_cpu():
    assert _run_sizes({"bucket_size": 32}, [3, 17, 31, 33, 50, 64], 9) == 2


def test_name_debug_callback_and_accepted_options():
    seen = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = torch.compile(lambda t: t.sin() + 1, backend="tpu",
                          options={"name": "my_step", "debug_callback": lambda gm, ex: seen.append((gm, len(ex))),
                                   "serializable": True, "async_compile": True})
        x = torch.randn(5)
        assert_close(f(x.to("tpu")).cpu(), x.sin() + 1)
    assert len(seen) == 1 and isinstance(seen[0][0], torch.fx.GraphModule) and seen[0][1] == 1
    assert any(r["kind"] == "graph" and r["what"].startswith("my_step: graph") for r in torch_tpu.recompile_log())
    assert any("async_compile=True changes nothing" in str(w.message) for w in caught)


def test_modes_run_the_same_and_a_misspelt_one_raises():
    # AOTAutograd logs "ignoring extra kwargs" for a mode its backend drops
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("torch._dynamo.backends.common")
    logger.addHandler(handler)
    x = torch.randn(4)
    try:
        for mode in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
            torch._dynamo.reset()
            f = torch.compile(lambda t: t.cos() * 3, backend="tpu", mode=mode)
            assert_close(f(x.to("tpu")).cpu(), x.cos() * 3)
    finally:
        logger.removeHandler(handler)
    assert not any("ignoring extra kwargs" in r.getMessage() for r in records)
    torch._dynamo.reset()
    f = torch.compile(lambda t: t * 2, backend="tpu", mode="reduce_overhead")
    with pytest.raises(Exception, match="unknown torch.compile mode 'reduce_overhead'"):
        f(x.to("tpu"))
