"""The `tpu` device as PyTorch users meet it: registration, torch.tpu,
transfers, printing, autoload."""

import os
import subprocess
import sys

import pytest
import torch

from utils import assert_close, make


def test_device_string_and_methods():
    t = torch.ones(2, 3, device="tpu")
    assert t.device.type == "tpu" and t.device.index == 0
    assert t.is_tpu
    assert torch.device("tpu:0") == t.device
    x = make((3,))
    assert x.tpu().is_tpu
    m = torch.nn.Linear(2, 2).tpu()
    assert m.weight.is_tpu


def test_device_module():
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() >= 1
    assert torch.tpu.current_device() == 0
    torch.tpu.set_device(0)
    with torch.tpu.device(0):
        assert torch.tpu.current_device() == 0
    name = torch.tpu.get_device_name()
    # A TPU names itself; elsewhere the name says what stands in for it
    # ("virtual TPU on XLA:CPU", or the GPU's own name).
    assert "TPU" in name or "tpu" in name or torch.tpu.platform() == "gpu"
    assert torch.tpu.get_device_properties(0).total_memory >= 0
    torch.tpu.synchronize()
    assert torch.tpu.is_initialized()


def test_accelerator_is_tpu():
    assert torch.accelerator.current_accelerator().type == "tpu"
    assert torch.accelerator.device_count() >= 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.bool])
def test_round_trip(dtype):
    x = make((5, 7), dtype)
    y = x.to("tpu")
    assert y.dtype == dtype and y.shape == x.shape
    assert torch.equal(y.cpu(), x)


def test_item_tolist_numpy():
    x = make((4,))
    y = x.to("tpu")
    assert y[2].item() == x[2].item()
    assert y.tolist() == x.tolist()
    assert (y.cpu().numpy() == x.numpy()).all()


def test_dtype_conversion_on_copy():
    x = make((6,))
    y = x.to("tpu").to(torch.int32)
    assert y.device.type == "tpu" and y.dtype == torch.int32
    assert torch.equal(y.cpu(), x.to(torch.int32))
    z = x.to("tpu", torch.bfloat16)
    assert torch.equal(z.cpu(), x.to(torch.bfloat16))


# PyTorch casts floats to uint8 through int64 on every device (c10's
# static_cast_with_inter_type): -1.7 -> 255, 300.2 -> 44. XLA's convert
# saturated (0, 255) before.
@pytest.mark.parametrize("src", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_float_to_uint8_wraps_like_pytorch(src):
    x = torch.tensor([-1.7, 0.5, 100.2, -128.9, 255.9, 300.2, -300.7], dtype=src)
    assert x.to("tpu").to(torch.uint8).cpu().tolist() == x.to(torch.uint8).tolist()
    assert (x.to("tpu") * 2).byte().cpu().tolist() == (x * 2).byte().tolist()


def test_copy_into_views_both_ways():
    base = torch.zeros(4, 5, device="tpu")
    src = make((5, 4))
    base.t().copy_(src)  # CPU -> strided tpu view
    assert_close(base, src.t())
    out = torch.empty(5, 4)
    out.copy_(base.t())  # strided tpu view -> CPU
    assert torch.equal(out, src)


def test_pin_memory_is_pinned():
    # As after CUDA's pin_memory(): is_pinned() is True for the pinned copy
    # and its views, False for ordinary CPU tensors (it was always False).
    x = torch.arange(6.0).pin_memory()
    assert x.is_pinned() and x[2:].is_pinned() and not torch.ones(2).is_pinned()
    assert x.to("tpu", non_blocking=True).cpu().tolist() == list(range(6))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(8.0)), batch_size=4,
                                         pin_memory=True)
    assert [batch.is_pinned() for (batch,) in loader] == [True, True]


def test_printing_shows_device():
    s = repr(torch.arange(3, device="tpu"))
    assert "device='tpu:0'" in s and "0, 1, 2" in s


def test_factories_on_device():
    assert torch.equal(torch.zeros(3, device="tpu").cpu(), torch.zeros(3))
    assert torch.equal(torch.ones(2, 2, device="tpu", dtype=torch.int64).cpu(), torch.ones(2, 2, dtype=torch.int64))
    assert torch.equal(torch.full((2,), 7.5, device="tpu").cpu(), torch.full((2,), 7.5))
    assert torch.equal(torch.arange(10, device="tpu").cpu(), torch.arange(10))
    assert_close(torch.arange(0, 1, 0.1, device="tpu"), torch.arange(0, 1, 0.1))
    assert_close(torch.linspace(-3, 1, 13, device="tpu"), torch.linspace(-3, 1, 13))
    assert torch.equal(torch.eye(3, 4, device="tpu").cpu(), torch.eye(3, 4))
    assert torch.empty(0, device="tpu").numel() == 0


def _run(code, **env):
    import os

    e = dict(os.environ)
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=300)


def test_autoload_without_import_and_lazy_runtime():
    # `import torch` alone registers "tpu" but does not start XLA (jax).
    r = _run(
        "import sys, torch\n"
        "assert 'jax' not in sys.modules, 'jax imported at torch import'\n"
        "t = torch.ones(2, device='tpu')\n"
        "assert 'jax' in sys.modules\n"
        "print(t.cpu().tolist())\n"
    )
    assert r.returncode == 0, r.stderr
    assert "[1.0, 1.0]" in r.stdout


@pytest.mark.skipif(torch.tpu.platform() != "cpu", reason="TORCH_TPU_NUM_DEVICES splits XLA:CPU into virtual "
                    "devices; an accelerator has the devices it has")
def test_virtual_devices():
    r = _run(
        "import torch\n"
        "assert torch.tpu.device_count() == 2, torch.tpu.device_count()\n"
        "a = torch.ones(3, device='tpu:1')\n"
        "b = (a + a).cpu()\n"
        "assert a.device.index == 1\n"
        "c = a.to('tpu:0')\n"
        "assert c.device.index == 0 and c.cpu().tolist() == [1.0, 1.0, 1.0]\n"
        "try:\n"
        "    a + c\n"
        "except RuntimeError as e:\n"
        "    assert 'same device' in str(e)\n"
        "else:\n"
        "    raise AssertionError('no error')\n"
        "print('ok', b.tolist())\n",
        TORCH_TPU_NUM_DEVICES="2",
    )
    assert r.returncode == 0, r.stderr
    assert "ok [2.0, 2.0, 2.0]" in r.stdout


def test_import_torch_tpu_first():
    r = _run("import torch_tpu, torch\nprint(torch.ones(2, device='tpu').cpu().tolist())\n")
    assert r.returncode == 0, r.stderr
    assert "[1.0, 1.0]" in r.stdout


_FORK_CHILD = """
import os, torch, torch_tpu
torch.ones(2, device="tpu").sum().item()  # the runtime starts in the parent
pid = os.fork()
if pid == 0:
    try:
        torch.zeros(2).sum()  # CPU work is fine in the child
        torch.manual_seed(0)  # a DataLoader worker seeds: tpu is skipped, as CUDA's in a bad fork
        assert torch.tpu._is_in_bad_fork()
        torch.ones(3, device="tpu").sum().item()
        os._exit(3)
    except RuntimeError as e:
        os._exit(0 if "forked subprocess" in str(e) and "spawn" in str(e) else 4)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status), torch.tpu._is_in_bad_fork())
print("parent", torch.ones(2, device="tpu").sum().item())
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_tpu_in_a_forked_child_raises_instead_of_hanging():
    # jax's client and threads stay in the parent: the child's first device
    # call waited forever (a DataLoader worker making tpu tensors hung)
    p = subprocess.Popen([sys.executable, "-W", "ignore", "-c", _FORK_CHILD], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)  # the forked child too
        p.communicate()
        raise
    assert p.returncode == 0, err[-2000:]
    assert "child 0 False" in out and "parent 2.0" in out, out


_FORK_WARNINGS = """
import os, torch, torch_tpu
import warnings
with warnings.catch_warnings():  # restores the filters on exit, the runtime's too
    torch.ones(2, device="tpu").sum().item()  # the runtime (and jax's fork warning) starts
ds = torch.utils.data.TensorDataset(torch.arange(8.0))
batches = [b for (b,) in torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2)]
assert [b.tolist() for b in batches] == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]
print("loader done", flush=True)
pid = os.fork()  # user code's own fork: jax's warning stays
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
print("forked", flush=True)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_dataloader_workers_fork_without_jax_deadlock_warning():
    # Forked DataLoader workers are safe (the test above): jax's generic
    # "will likely lead to a deadlock" warning printed for each one.
    p = subprocess.Popen([sys.executable, "-c", _FORK_WARNINGS], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.communicate()
        raise
    assert p.returncode == 0, err[-2000:]
    assert "loader done" in out and "forked" in out, out
    warned = [line for line in err.splitlines() if "os.fork() was called" in line]
    assert len(warned) == 1, err[-2000:]  # the direct os.fork() only
    assert "popen_fork" not in err, err[-2000:]
