"""torch.cuda names that a script changed from "cuda" to "tpu" reaches:
the legacy tensor type classes (torch_tpu/legacy_tensor_types.py),
is_current_stream_capturing, torch.tpu.random and torch.tpu.nvtx
(torch_tpu/torch_tpu_names/). Each is checked against torch.cuda's names
and signatures and against the CPU classes' behaviour (no CUDA here)."""

import inspect
import pickle
import subprocess
import sys
import threading

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import torch_tpu  # noqa: F401

# torch.cuda's legacy tensor types, read from torch.cuda itself.
TYPE_NAMES = sorted(n for n in torch.cuda.__all__ if n.endswith("Tensor"))
DTYPES = [torch.bfloat16, torch.bool, torch.uint8, torch.int8, torch.float64, torch.float32,
          torch.float16, torch.int32, torch.int64, torch.int16]


def _param_names(fn):
    return [p.name for p in inspect.signature(fn).parameters.values()]


# ---- legacy tensor types ----------------------------------------------------------


def test_legacy_type_names_are_torch_cudas():
    assert len(TYPE_NAMES) == 10
    for name in TYPE_NAMES:
        assert name in torch.tpu.__all__, name
        cls = getattr(torch.tpu, name)
        assert cls.__name__ == cls.__qualname__ == torch.cuda.__dict__[name].__name__ == name
        assert cls.__module__ == "torch.tpu"
        assert repr(cls) == repr(torch.cuda.__dict__[name]).replace("torch.cuda.", "torch.tpu.")


@pytest.mark.parametrize("name", TYPE_NAMES)
def test_legacy_type_class_attributes_match_torch_cuda(name):
    ours, cuda, cpu = getattr(torch.tpu, name), getattr(torch.cuda, name), getattr(torch, name)
    assert ours.dtype == cuda.dtype == cpu.dtype
    assert ours.layout == cuda.layout == torch.strided
    assert ours.is_sparse is cuda.is_sparse is False
    assert ours.is_sparse_csr is cuda.is_sparse_csr is False
    assert cuda.is_cuda is True and ours.is_cuda is False and ours.is_tpu is True
    assert issubclass(ours, torch.Tensor) is issubclass(cuda, torch.Tensor) is False
    assert pickle.loads(pickle.dumps(ours)) is ours


def test_isinstance_truth_table_matches_cpu_classes():
    for dtype in DTYPES:
        cpu_x = torch.zeros(2, dtype=dtype)
        tpu_x = cpu_x.to("tpu")
        for name in TYPE_NAMES:
            expected = isinstance(cpu_x, getattr(torch, name))
            assert isinstance(tpu_x, getattr(torch.tpu, name)) is expected, (dtype, name)
            assert isinstance(cpu_x, getattr(torch.tpu, name)) is False, (dtype, name)
            assert isinstance(tpu_x, getattr(torch, name)) is False, (dtype, name)
        assert sum(isinstance(tpu_x, getattr(torch.tpu, n)) for n in TYPE_NAMES) == 1, dtype
    assert isinstance(torch.ones(3, device="tpu"), torch.tpu.FloatTensor)
    assert not isinstance(torch.ones(3, device="tpu", dtype=torch.float64), torch.tpu.FloatTensor)
    assert not isinstance(torch.ones(3), torch.tpu.FloatTensor)
    assert isinstance(torch.nn.Parameter(torch.ones(3, device="tpu")), torch.tpu.FloatTensor)
    assert isinstance(torch.nn.Parameter(torch.ones(3)), torch.FloatTensor)  # as on CPU
    assert not isinstance(3.0, torch.tpu.FloatTensor) and not isinstance("x", torch.tpu.FloatTensor)


@pytest.mark.parametrize("name", TYPE_NAMES)
def test_legacy_constructors_match_cpu(name):
    ours, cpu = getattr(torch.tpu, name), getattr(torch, name)
    for args in [(2, 3), (torch.Size([4]),), ()]:
        x, ref = ours(*args), cpu(*args)
        assert x.device.type == "tpu" and x.dtype == ref.dtype == ours.dtype
        assert x.shape == ref.shape
        assert isinstance(x, ours)
    for data in ([1, 0, 2], [[1.0, 2.0], [0.0, 3.0]]):
        x, ref = ours(data), cpu(data)
        assert x.device.type == "tpu" and x.dtype == ref.dtype
        assert torch.equal(x.cpu(), ref)
    other = ours([1, 2])
    assert torch.equal(ours(other).cpu(), cpu(other.cpu()))  # the same tensor, as cpu(t)
    wrong = torch.zeros(2, dtype=torch.float64 if ours.dtype != torch.float64 else torch.float32)
    with pytest.raises(TypeError):
        cpu(wrong)
    with pytest.raises(TypeError):
        ours(wrong.to("tpu"))
    with pytest.raises(TypeError):
        ours(torch.zeros(2, dtype=ours.dtype))  # a CPU tensor: torch.cuda's types refuse it too


def test_uninitialised_constructor_can_be_filled():
    x = torch.tpu.FloatTensor(2, 3).fill_(1.5)
    assert x.cpu().tolist() == [[1.5] * 3] * 2
    assert torch.tpu.LongTensor().numel() == 0 and torch.tpu.LongTensor().dtype == torch.int64
    assert torch.tpu.FloatTensor(2, device="tpu:0").device == torch.device("tpu", 0)


@pytest.mark.parametrize("name", TYPE_NAMES)
def test_tensor_type_accepts_the_class(name):
    cls = getattr(torch.tpu, name)
    for x in (torch.tensor([1.0, 0.0, 2.5]), torch.tensor([1.0, 0.0, 2.5], device="tpu", dtype=torch.float64)):
        y, by_name = x.type(cls), x.type(f"torch.tpu.{name}")
        assert y.device.type == "tpu" and y.dtype == by_name.dtype == cls.dtype
        assert isinstance(y, cls)
        assert torch.equal(y.cpu(), by_name.cpu())
        assert y.type() == f"torch.tpu.{name}" and getattr(torch.tpu, y.type().split(".")[-1]) is cls
    x = torch.ones(2, device="tpu")
    assert x.type(torch.tpu.FloatTensor) is x  # already that type: as torch's Tensor.type


# ---- is_current_stream_capturing --------------------------------------------------


def test_is_current_stream_capturing_is_false():
    assert "is_current_stream_capturing" in torch.tpu.__all__
    assert _param_names(torch.tpu.is_current_stream_capturing) == _param_names(
        torch.cuda.is_current_stream_capturing) == []
    assert torch.tpu.is_current_stream_capturing() is False
    with torch.tpu.stream(torch.tpu.Stream()):
        torch.ones(2, device="tpu").add_(1)
        assert torch.tpu.is_current_stream_capturing() is False


# ---- torch.tpu.random --------------------------------------------------------------


def test_random_module_names_are_the_top_level_functions():
    import torch.tpu.random as r

    assert r is torch.tpu.random
    assert sorted(r.__all__) == sorted(torch.cuda.random.__all__)
    for name in torch.cuda.random.__all__:
        fn = getattr(r, name)
        assert fn is getattr(torch.tpu, name), name
        assert _param_names(fn) == _param_names(getattr(torch.cuda.random, name)), name


def test_random_module_round_trip():
    r = torch.tpu.random
    r.manual_seed(123)
    assert r.initial_seed() == 123
    state = r.get_rng_state()
    a = torch.rand(4, device="tpu").cpu()
    r.set_rng_state_all(new_states=[state] * torch.tpu.device_count())
    assert torch.equal(torch.rand(4, device="tpu").cpu(), a)


# ---- torch.tpu.nvtx ---------------------------------------------------------------


def test_nvtx_names_and_signatures_match_torch_cuda():
    import torch.tpu.nvtx as nvtx

    assert nvtx is torch.tpu.nvtx
    assert sorted(nvtx.__all__) == sorted(torch.cuda.nvtx.__all__)
    for name in torch.cuda.nvtx.__all__:
        assert _param_names(getattr(nvtx, name)) == _param_names(getattr(torch.cuda.nvtx, name)), name


def test_nvtx_depths_and_empty_pop():
    nvtx = torch.tpu.nvtx
    assert nvtx.range_pop() == -1  # nothing pushed: no error
    assert nvtx.range_push("a") == 0
    assert nvtx.range_push("b") == 1
    assert nvtx.range_pop() == 1
    assert nvtx.range_pop() == 0
    assert nvtx.range_pop() == -1
    nvtx.range_end(nvtx.range_start("s"))
    nvtx.range_end(987654321)  # unknown id: ignored
    nvtx.mark("m")
    with nvtx.range("r{}", 1):
        assert nvtx.range_push("inner") == 1
        nvtx.range_pop()
    assert nvtx.range_pop() == -1


def test_nvtx_stack_is_per_thread():
    nvtx = torch.tpu.nvtx
    nvtx.range_push("main")
    seen = []
    t = threading.Thread(target=lambda: seen.extend([nvtx.range_pop(), nvtx.range_push("t"), nvtx.range_pop()]))
    t.start()
    t.join()
    assert seen == [-1, 0, 0]
    assert nvtx.range_pop() == 0


def _keys(prof):
    return {e.key: e.count for e in prof.key_averages()}


def test_nvtx_ranges_show_in_torch_profiler():
    nvtx = torch.tpu.nvtx

    @nvtx.range("decorated_fn")
    def step(x):
        return x * 2

    x = torch.ones(4, device="tpu")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with nvtx.range("my_range_{}", 7):
            y = (x + 1).cpu()
        nvtx.range_push("pushed_range")
        z = step(x).sum().item()
        nvtx.range_pop()
        nvtx.mark("marked_point")
        rid = nvtx.range_start("cross_thread_range")
        t = threading.Thread(target=nvtx.range_end, args=(rid,))
        t.start()
        t.join()
    assert y.tolist() == [2.0] * 4 and z == 8.0
    keys = _keys(prof)
    for name in ("my_range_7", "pushed_range", "decorated_fn", "marked_point", "cross_thread_range"):
        assert keys.get(name) == 1, (name, sorted(keys))
    events = {e.name: e for e in prof.events()}
    outer, inner = events["my_range_7"], events["pushed_range"]
    # tpu ops run inside the ranges: some event nests in each.
    assert any(e.time_range.start >= outer.time_range.start and e.time_range.end <= outer.time_range.end
               and e.name.startswith(("aten::", "tpu:")) for e in prof.events()), sorted(keys)
    assert any(e.time_range.start >= inner.time_range.start and e.time_range.end <= inner.time_range.end
               and e.name.startswith(("aten::", "tpu:")) for e in prof.events()), sorted(keys)


def test_nvtx_without_profiler_records_nothing_and_survives_profiler_edges():
    nvtx = torch.tpu.nvtx
    nvtx.range_push("before_profile")  # opened with no profiler on
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        assert nvtx.range_pop() == 0  # closes a range the profiler never saw
        nvtx.range_push("open_at_exit")  # still open when the profile ends
        torch.ones(2, device="tpu").add(1).cpu()
    assert nvtx.range_pop() == 0
    keys = _keys(prof)
    assert "before_profile" not in keys
    with profile(activities=[ProfilerActivity.CPU]) as prof2:
        torch.ones(2, device="tpu").add(1).cpu()
    nvtx.range_push("after_profile")
    nvtx.mark("after_mark")
    nvtx.range_pop()
    assert not {"after_profile", "after_mark"} & set(_keys(prof2))


def test_imports_and_nvtx_start_no_device():
    code = (
        "import torch, torch_tpu, torch.tpu.nvtx, torch.tpu.random\n"
        "assert torch.tpu.FloatTensor.dtype == torch.float32\n"
        "assert not isinstance(torch.ones(1), torch.tpu.FloatTensor)\n"
        "torch.tpu.nvtx.range_push('a'); torch.tpu.nvtx.mark('m'); torch.tpu.nvtx.range_pop()\n"
        "torch.tpu.is_current_stream_capturing()\n"
        "print(torch.tpu.is_initialized())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False"]
