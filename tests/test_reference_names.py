"""The reference backend's spellings work beside ours (docs/REFERENCE.md):
execution modes, torch.tpu names, torch.accelerator, Dynamo's device
interface."""

import os
import subprocess
import sys

import pytest
import torch

import torch_tpu
from utils import assert_close


@pytest.fixture(autouse=True)
def restore_mode():
    prev = torch_tpu.get_eager_mode()
    yield
    torch_tpu.eager_mode(prev)


# ---- execution modes ---------------------------------------------------------------


def test_eager_mode_enum_values():
    E = torch.tpu.EagerMode
    assert [m.name for m in E] == ["DEFER_NEVER", "DEFER_NEVER_AND_LAUNCH_BLOCKING", "DEFER_AND_FUSE"]
    assert (E.DEFER_NEVER, E.DEFER_NEVER_AND_LAUNCH_BLOCKING, E.DEFER_AND_FUSE) == ("strict", "debug", "fused")


def test_eager_mode_property_read_and_assign():
    E = torch.tpu.EagerMode
    torch_tpu.eager_mode("strict")
    assert torch.tpu.eager_mode is E.DEFER_NEVER
    torch.tpu.eager_mode = E.DEFER_AND_FUSE
    assert torch.tpu.eager_mode is E.DEFER_AND_FUSE and torch_tpu.get_eager_mode() == "fused"
    x = torch.ones(3, device="tpu") * 2
    assert torch_tpu.fusion_stats()["pending_ops"] > 0  # really deferred
    torch.tpu.eager_mode = E.DEFER_NEVER_AND_LAUNCH_BLOCKING
    assert torch_tpu.get_eager_mode() == "debug" and torch_tpu.fusion_stats()["pending_ops"] == 0
    assert x.cpu().tolist() == [2.0, 2.0, 2.0]
    torch.tpu.eager_mode = "strict"  # our names are accepted too
    assert torch.tpu.eager_mode == "strict"
    with pytest.raises(ValueError, match="strict, debug, fused"):
        torch.tpu.eager_mode = "lazy"


def test_eager_mode_still_callable_as_our_api():
    torch_tpu.eager_mode("strict")
    with torch.tpu.eager_mode("fused"):
        assert torch_tpu.get_eager_mode() == "fused"
    assert torch_tpu.get_eager_mode() == "strict"
    torch.tpu.eager_mode("debug")
    assert torch.tpu.get_eager_mode() == "debug"
    with torch_tpu.eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE):
        assert torch_tpu.get_eager_mode() == "fused"


def test_set_eager_mode_context_manager():
    E = torch.tpu.EagerMode
    torch_tpu.eager_mode("strict")
    with torch.tpu.set_eager_mode(E.DEFER_AND_FUSE):
        assert torch.tpu.eager_mode is E.DEFER_AND_FUSE
        with torch.tpu.set_eager_mode(E.DEFER_NEVER_AND_LAUNCH_BLOCKING):
            assert torch_tpu.get_eager_mode() == "debug"
        assert torch_tpu.get_eager_mode() == "fused"
    assert torch.tpu.eager_mode is E.DEFER_NEVER
    torch.tpu.set_eager_mode(E.DEFER_AND_FUSE)  # plain call: stays set
    assert torch_tpu.get_eager_mode() == "fused"


@pytest.mark.parametrize("env,mode", [
    ({"TORCH_TPU_LAUNCH_BLOCKING": "1"}, "debug"),
    ({"TORCH_TPU_DEFER_AND_FUSE": "1"}, "fused"),
    ({"TPU_LAUNCH_BLOCKING": "1"}, "debug"),
    ({"TPU_DEFER_AND_FUSE": "1"}, "fused"),
    ({"TORCH_TPU_DEFER_AND_FUSE": "1", "TORCH_TPU_LAUNCH_BLOCKING": "1"}, "debug"),
    ({}, "strict"),
])
def test_mode_environment_spellings(env, mode):
    clean = {k: v for k, v in os.environ.items()
             if k not in ("TPU_LAUNCH_BLOCKING", "TPU_DEFER_AND_FUSE", "TORCH_TPU_LAUNCH_BLOCKING",
                          "TORCH_TPU_DEFER_AND_FUSE")}
    code = "import torch, torch_tpu; print(torch_tpu.get_eager_mode(), torch.tpu.eager_mode.name)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**clean, **env})
    assert out.returncode == 0, out.stderr
    names = {"strict": "DEFER_NEVER", "debug": "DEFER_NEVER_AND_LAUNCH_BLOCKING", "fused": "DEFER_AND_FUSE"}
    assert out.stdout.split() == [mode, names[mode]]


# ---- torch.tpu names -------------------------------------------------------------------


def test_precision_enum():
    P = torch.tpu.Precision
    assert [m.name for m in P] == ["DEFAULT", "HIGH", "HIGHEST"]
    assert P.HIGH == "HIGH"
    prev = torch.get_float32_matmul_precision()
    try:
        with torch.tpu.precision(P.HIGHEST):
            assert torch.get_float32_matmul_precision() == "highest" and torch.tpu.get_precision() == P.HIGHEST
        torch.tpu.precision(P.DEFAULT)
        assert torch.get_float32_matmul_precision() == "medium"
        torch.tpu.precision("high")
        assert torch.tpu.get_precision() == P.HIGH
    finally:
        torch.set_float32_matmul_precision(prev)


def test_device_of():
    x = torch.ones(2, device="tpu")
    with torch.tpu.device_of(x):
        assert torch.tpu.current_device() == x.get_device()
    with torch.tpu.device_of(torch.ones(2)):  # a CPU tensor: no change
        assert torch.tpu.current_device() == 0
    if torch.tpu.device_count() > 1:
        y = torch.ones(2, device="tpu:1")
        with torch.tpu.device_of(y):
            assert torch.tpu.current_device() == 1
        assert torch.tpu.current_device() == 0


def test_is_initialized_initial_seed_default_generators():
    torch.ones(1, device="tpu")
    assert torch.tpu.is_initialized() is True
    gens = torch.tpu.default_generators
    assert isinstance(gens, tuple) and len(gens) == torch.tpu.device_count()
    assert all(isinstance(g, torch.Generator) and g.device.type == "tpu" for g in gens)
    assert gens[0] is torch.tpu.default_generators[0] or gens[0].initial_seed() == torch.tpu.initial_seed()
    torch.tpu.manual_seed(1234)
    assert torch.tpu.initial_seed() == 1234 == gens[0].initial_seed()
    a = torch.rand(4, device="tpu")
    gens[0].manual_seed(1234)
    assert_close(torch.rand(4, device="tpu"), a.cpu())


@pytest.mark.parametrize("start", ["torch.ones(1, device='tpu')", "torch.tpu.init()"], ids=["device_use", "init"])
def test_is_initialized_false_until_device_use_or_init(start):
    code = f"import torch, torch_tpu; print(torch.tpu.is_initialized()); {start}; print(torch.tpu.is_initialized())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]


def test_is_bf16_supported_counts_emulation_on_xla_cpu_only():
    assert torch.tpu.is_bf16_supported() is True
    assert torch.tpu.is_bf16_supported(including_emulation=False) is (torch.tpu.platform() != "cpu")


def test_reference_names_listed():
    for name in ("is_available", "device_count", "current_device", "set_device", "device", "device_of",
                 "synchronize", "get_device_name", "get_device_properties", "manual_seed", "manual_seed_all",
                 "initial_seed", "get_rng_state", "set_rng_state", "default_generators", "is_initialized",
                 "get_amp_supported_dtype", "Stream", "Event", "current_stream", "default_stream", "set_stream",
                 "stream", "precision", "Precision", "EagerMode", "eager_mode", "set_eager_mode"):
        assert hasattr(torch.tpu, name), name
        assert name in torch.tpu.__all__, name


# ---- torch.accelerator ----------------------------------------------------------------


def test_torch_accelerator():
    acc = torch.accelerator
    assert acc.is_available()
    assert acc.current_accelerator() == torch.device("tpu")
    assert acc.device_count() == torch.tpu.device_count()
    assert acc.current_device_index() == 0
    x = torch.ones(1000, device="tpu") * 3
    acc.synchronize()
    acc.synchronize(0)
    before = acc.memory_allocated()
    y = torch.empty(1 << 20, device="tpu")
    assert acc.memory_allocated() >= before + (4 << 20)
    assert acc.max_memory_allocated() >= acc.memory_allocated()
    del y
    s = acc.current_stream()
    assert s.device == torch.device("tpu", 0)
    n = acc.device_count()
    acc.set_device_index(n - 1)
    try:
        assert acc.current_device_index() == n - 1 == torch.tpu.current_device()
    finally:
        acc.set_device_index(0)
    with acc.device_index(n - 1):
        assert torch.tpu.current_device() == n - 1
    assert torch.tpu.current_device() == 0
    assert x.sum().item() == 3000


# ---- Dynamo's device interface ----------------------------------------------------------


def test_dynamo_device_interface():
    from torch._dynamo.device_interface import get_interface_for_device, get_registered_device_interfaces

    from torch_tpu.dynamo_device import TpuDeviceInterface

    di = get_interface_for_device("tpu")
    assert di is TpuDeviceInterface
    assert get_interface_for_device(torch.device("tpu")) is di
    assert dict(get_registered_device_interfaces())["tpu"] is di
    assert di.is_available() and di.device_count() == torch.tpu.device_count()
    assert di.current_device() == 0 and di.Worker.current_device() == 0
    assert di.is_bf16_supported() and di.is_dtype_supported(torch.float64)
    di.synchronize()
    assert di.get_device_properties(0).multi_processor_count == 1
    assert di.get_device_properties(0).total_memory == torch.tpu.get_device_properties(0).total_memory
    assert di.memory_allocated() == torch.tpu.memory_allocated()
    with di.device(0):
        assert di.current_device() == 0
    assert isinstance(di.current_stream(), torch.Stream)
    e = di.Event()
    e.record()
    e.synchronize()


# ---- warning categories ---------------------------------------------------------------


def test_warnings_carry_the_reference_prefixes_and_filters_select_them():
    # A reference user's filter ("<TorchTpu/Performance/") silences our
    # Performance warnings, C++ and Python alike, and leaves the others.
    import warnings

    from torch_tpu import warning_categories as wc

    assert wc.get_prefix(wc.PERFORMANCE) == "<TorchTpu/Performance/> "
    assert wc.get_prefix(wc.TCMALLOC) == "<TorchTpu/Performance/TcMalloc/> "
    assert wc.get_prefix(wc.DEPRECATED_API) == "<TorchTpu/ApiStage/DeprecatedApi/> "
    with pytest.raises(ValueError, match="no warning category"):
        wc.get_prefix("SPEED")

    def caught(filters):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for f in filters:
                warnings.filterwarnings("ignore", message=f)
            torch.tpu.set_sync_debug_mode("warn")  # a C++ warning, Performance
            try:
                torch.ones(2, device="tpu").cpu()
            finally:
                torch.tpu.set_sync_debug_mode(0)
            wc.warn("a Python one", wc.CORRECTNESS)
            wc.warn("old name", wc.DEPRECATED_API)
        return [(w.category, str(w.message).split(" ", 1)[0]) for w in seen]

    assert caught([]) == [(UserWarning, "<TorchTpu/Performance/>"), (UserWarning, "<TorchTpu/Correctness/>"),
                          (DeprecationWarning, "<TorchTpu/ApiStage/DeprecatedApi/>")]
    assert caught(["<TorchTpu/Performance/"]) == [(UserWarning, "<TorchTpu/Correctness/>"),
                                                  (DeprecationWarning, "<TorchTpu/ApiStage/DeprecatedApi/>")]
    assert caught(["<TorchTpu/ApiStage/>"]) == caught([])  # "/>": that category alone, not its children
    assert caught(["<TorchTpu/"]) == []
