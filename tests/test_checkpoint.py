"""Checkpoints with tpu tensors: torch.save / torch.load (with and without
map_location), state dicts across devices, optimizer state, safetensors,
copy.deepcopy, and resuming training in a fresh process.

Every loaded value is compared with the CPU original it came from (exact:
serialization moves bytes, it computes nothing)."""

import copy
import io
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

from utils import assert_close, make

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "train_checkpoint.py")

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32,
          torch.int8, torch.uint8, torch.bool, torch.complex64]


def sample(shape, dtype, seed):
    if dtype.is_complex:
        return torch.view_as_complex(make((*shape, 2), seed=seed)).to(dtype)
    if dtype == torch.uint8:
        return make(shape, dtype, low=0, high=255, seed=seed)
    return make(shape, dtype, seed=seed)


def roundtrip(obj, **load_kw):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kw)


def same(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch.equal(actual.cpu(), expected.cpu())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("map_location", [None, "tpu", "cpu", "tpu:0", torch.device("tpu")])
def test_save_load_tensor(dtype, map_location):
    host = sample((5, 7), dtype, seed=3)
    loaded = roundtrip(host.to("tpu"), map_location=map_location)
    expected_device = "cpu" if map_location == "cpu" else "tpu"
    assert loaded.device.type == expected_device
    same(loaded, host)


def test_tpu_checkpoint_reads_like_a_cpu_one():
    """A tpu tensor's file, loaded on CPU, equals loading a CPU-saved file;
    a CPU file loads onto tpu with map_location."""
    host = make((3, 4, 5), seed=1)
    from_tpu = roundtrip({"w": host.to("tpu")}, map_location="cpu")["w"]
    from_cpu = roundtrip({"w": host}, map_location="cpu")["w"]
    assert torch.equal(from_tpu, from_cpu)
    onto_tpu = roundtrip({"w": host}, map_location="tpu")["w"]
    assert onto_tpu.device.type == "tpu"
    same(onto_tpu, host)
    mapped = roundtrip({"w": host}, map_location={"cpu": "tpu:0"})["w"]
    assert mapped.device == torch.device("tpu:0")
    same(mapped, host)


def test_views_and_shared_storage_survive():
    """Views saved together keep sharing one storage after loading, as on CPU:
    a write through one is seen by the other."""
    host = make((6, 8), seed=2)
    t = host.to("tpu")
    obj = {"base": t, "rows": t[2:5], "col": t[:, 3], "tr": t.t()}
    for loc in (None, "cpu"):
        back = roundtrip(obj, map_location=loc)
        same(back["rows"], host[2:5])
        same(back["col"], host[:, 3])
        same(back["tr"], host.t())
        assert back["col"].stride() == host[:, 3].stride()
        assert back["rows"].untyped_storage().data_ptr() == back["base"].untyped_storage().data_ptr()
        back["base"].fill_(7.0)
        assert back["rows"].cpu().eq(7).all() and back["col"].cpu().eq(7).all()


def test_storage_roundtrips():
    t = make((4, 4), seed=4).to("tpu")
    s = t.untyped_storage()
    assert s.device.type == "tpu" and s.nbytes() == 64
    host = s.cpu()
    assert host.device.type == "cpu"
    assert torch.equal(torch.tensor([], dtype=torch.float32).set_(host).view(4, 4), t.cpu())
    back = host.tpu()
    assert back.device.type == "tpu"
    assert torch.equal(torch.empty(0, device="tpu").set_(back).view(4, 4).cpu(), t.cpu())


def test_untyped_storage_resize_like_cpu():
    """UntypedStorage.resize_ keeps the leading bytes, as on CPU; resize_(0)
    releases the device memory (FSDP frees parameters this way)."""
    before = torch.tpu.memory_allocated()
    results = {}
    for device in ("cpu", "tpu"):
        s = torch.arange(8.0, device=device).untyped_storage()
        s.resize_(16)
        shrunk = torch.empty(0, device=device).set_(s).cpu().clone()
        s.resize_(32)
        grown = torch.empty(0, device=device).set_(s)[:4].cpu().clone()
        assert s.nbytes() == 32
        s.resize_(0)
        assert s.nbytes() == 0
        results[device] = (shrunk, grown)
        del s
    assert torch.equal(results["tpu"][0], results["cpu"][0]) and results["cpu"][0].tolist() == [0, 1, 2, 3]
    assert torch.equal(results["tpu"][1], results["cpu"][1])
    assert torch.tpu.memory_allocated() == before
    with pytest.raises(RuntimeError, match="not a multiple of 4"):
        torch.ones(3, device="tpu").untyped_storage().resize_(5)


def test_legacy_format_pickle_and_map_location_callable(tmp_path):
    """The raw-pointer paths: the pre-zipfile format and plain pickle wrap a
    tpu storage's address in a non-owning storage (at::from_blob)."""
    import pickle

    host = make((4, 5), seed=12)
    t = host.to("tpu")
    for loc in (None, "cpu", "tpu"):
        buf = io.BytesIO()
        torch.save({"t": t, "v": t[1:, 2:]}, buf, _use_new_zipfile_serialization=False)
        buf.seek(0)
        back = torch.load(buf, map_location=loc, weights_only=False)
        assert back["t"].device.type == ("cpu" if loc == "cpu" else "tpu")
        same(back["t"], host)
        same(back["v"], host[1:, 2:])
    p = pickle.loads(pickle.dumps(t))
    assert p.device.type == "tpu"
    same(p, host)
    # map_location as a function, the CUDA idiom `lambda s, loc: s.cuda()`
    torch.save({"t": host}, tmp_path / "c.pt")
    back = torch.load(tmp_path / "c.pt", map_location=lambda storage, loc: storage.tpu())["t"]
    assert back.device.type == "tpu"
    same(back, host)
    back = torch.load(tmp_path / "c.pt", map_location="tpu", mmap=True)["t"]
    assert back.device.type == "tpu"
    same(back, host)


def test_meta_init_then_load():
    """Large-model loading: build on meta, then to_empty(device="tpu") and
    load_state_dict, or load_state_dict(assign=True) with tpu tensors."""
    src = nn.Linear(6, 3)
    with torch.device("meta"):
        a, b = nn.Linear(6, 3), nn.Linear(6, 3)
    a.to_empty(device="tpu")
    a.load_state_dict(src.state_dict())
    b.load_state_dict({k: v.to("tpu") for k, v in src.state_dict().items()}, assign=True)
    x = make((2, 6), seed=13)
    for m in (a, b):
        assert m.weight.device.type == "tpu" and isinstance(m.weight, nn.Parameter)
        assert_close(m(x.to("tpu")), src(x), atol=1e-6, rtol=1e-6)


def small_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5))


def test_module_state_dict_across_devices():
    x = make((2, 3, 8, 8), seed=5)
    cpu_model = small_model()
    cpu_model(x)  # update BatchNorm running stats (buffers go into the checkpoint too)
    cpu_model.eval()
    expected = cpu_model(x)

    # a CPU state dict into a tpu model
    tpu_model = small_model().to("tpu")
    tpu_model.load_state_dict(cpu_model.state_dict())
    tpu_model.eval()
    assert_close(tpu_model(x.to("tpu")), expected, atol=1e-5, rtol=1e-5)

    # the tpu model's checkpoint, on CPU and back on tpu
    sd = roundtrip(tpu_model.state_dict(), map_location="cpu")
    for k, v in cpu_model.state_dict().items():
        assert sd[k].device.type == "cpu"
        same(sd[k], v)
    fresh = small_model()
    fresh.load_state_dict(sd)
    fresh.eval()
    assert torch.equal(fresh(x), expected)
    sd_tpu = roundtrip(tpu_model.state_dict())
    assert all(v.device.type == "tpu" for v in sd_tpu.values())
    assert int(sd_tpu["1.num_batches_tracked"].item()) == 1

    # whole-module pickling
    whole = roundtrip(tpu_model, weights_only=False)
    assert next(whole.parameters()).device.type == "tpu"
    assert_close(whole(x.to("tpu")), expected, atol=1e-5, rtol=1e-5)


def train_steps(model, opt, sched, device, steps, seed):
    for i in range(steps):
        g = torch.Generator().manual_seed(seed + i)
        x, y = torch.randn(8, 3, 8, 8, generator=g), torch.randint(0, 5, (8,), generator=g)
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()


def make_opt(model):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    return opt, torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)


@pytest.fixture
def strict_mode():
    """Bitwise comparisons between runs need Strict Eager: in Fused Eager two
    runs of the same steps may be split into different traces, and XLA fuses
    (and rounds) differently (~1e-7 apart)."""
    import torch_tpu

    with torch_tpu.eager_mode("strict"):
        yield


def test_optimizer_state_checkpoint_matches_cpu(strict_mode):
    """AdamW + StepLR: 3 steps, checkpoint (tpu optimizer state), reload into
    new objects, 3 more steps. Same as CPU doing the same (float32 training
    drift over 6 steps: within 1e-5, measured ~1e-7)."""
    results = {}
    for device in ("cpu", "tpu"):
        model = small_model().to(device)
        opt, sched = make_opt(model)
        train_steps(model, opt, sched, device, 3, seed=0)
        ckpt = roundtrip({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict()},
                         map_location=device)
        if device == "tpu":
            state = ckpt["opt"]["state"][0]
            assert state["exp_avg"].device.type == "tpu" and state["exp_avg_sq"].device.type == "tpu"
            cpu_state = results["cpu_ckpt"]["opt"]["state"][0]
            assert_close(state["exp_avg"], cpu_state["exp_avg"], atol=1e-5, rtol=1e-4)
            assert float(state["step"]) == float(cpu_state["step"]) == 3
        else:
            results["cpu_ckpt"] = copy.deepcopy(ckpt)  # load_state_dict shares, training mutates
        model2 = small_model().to(device)
        opt2, sched2 = make_opt(model2)
        model2.load_state_dict(ckpt["model"])
        opt2.load_state_dict(ckpt["opt"])
        sched2.load_state_dict(ckpt["sched"])
        assert opt2.state[next(iter(model2.parameters()))]["exp_avg"].device.type == device
        assert sched2.get_last_lr() == sched.get_last_lr()
        train_steps(model2, opt2, sched2, device, 3, seed=3)
        # and uninterrupted, from the same start
        model.load_state_dict(ckpt["model"])
        train_steps(model, opt, sched, device, 3, seed=3)
        for a, b in zip(model.parameters(), model2.parameters()):
            assert torch.equal(a.detach().cpu(), b.detach().cpu())
        results[device] = [p.detach().cpu() for p in model2.parameters()]
    for t, c in zip(results["tpu"], results["cpu"]):
        assert_close(t, c, atol=1e-5, rtol=1e-5)


def test_deepcopy_model():
    """copy.deepcopy of a tpu model: equal parameters, buffers and outputs,
    independent storages; .grad follows CPU (Parameter.__deepcopy__ drops it,
    a plain leaf tensor keeps it)."""
    x = make((2, 3, 8, 8), seed=6)
    cpu_model = small_model()
    cpu_model(x).sum().backward()
    tpu_model = small_model().to("tpu")
    tpu_model(x.to("tpu")).sum().backward()
    cpu_copy, tpu_copy = copy.deepcopy(cpu_model), copy.deepcopy(tpu_model)
    for (name, p), (_, c), (_, cp) in zip(tpu_model.named_parameters(), tpu_copy.named_parameters(),
                                          cpu_copy.named_parameters()):
        assert c.device.type == "tpu" and c.requires_grad and isinstance(c, nn.Parameter)
        assert torch.equal(c.detach().cpu(), p.detach().cpu()), name
        assert c.untyped_storage().data_ptr() != p.untyped_storage().data_ptr()
        assert (c.grad is None) == (cp.grad is None)
    for (name, b), (_, c) in zip(tpu_model.named_buffers(), tpu_copy.named_buffers()):
        assert torch.equal(c.cpu(), b.cpu()), name
    tpu_model.eval(), tpu_copy.eval()
    assert torch.equal(tpu_copy(x.to("tpu")).detach().cpu(), tpu_model(x.to("tpu")).detach().cpu())
    # independent: changing the copy leaves the original alone
    before = tpu_model[0].weight.detach().cpu()
    with torch.no_grad():
        tpu_copy[0].weight.add_(1.0)
    assert torch.equal(tpu_model[0].weight.detach().cpu(), before)
    assert torch.equal(tpu_copy[0].weight.detach().cpu(), before + 1)

    leaf = make((3, 3), seed=7).to("tpu").requires_grad_()
    (leaf * 2).sum().backward()
    dup = copy.deepcopy(leaf)
    assert dup.grad is not None and dup.grad.device.type == "tpu"
    assert torch.equal(dup.grad.cpu(), torch.full((3, 3), 2.0))
    assert dup.grad.untyped_storage().data_ptr() != leaf.grad.untyped_storage().data_ptr()
    # views deep-copied together keep sharing one (new) storage
    base = make((4, 4), seed=8).to("tpu")
    a, b = copy.deepcopy([base, base[1:]])
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
    same(b, base[1:].cpu())


def test_safetensors_roundtrip(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    host = {"w": make((4, 6), seed=9), "h": make((5,), torch.bfloat16, seed=10),
            "i": make((3,), torch.int64, seed=11)}
    tpu = {k: v.to("tpu") for k, v in host.items()}
    st.save_file(tpu, tmp_path / "tpu.safetensors")
    st.save_file(host, tmp_path / "cpu.safetensors")
    # the file of tpu tensors is byte-for-byte the file of their CPU copies
    assert (tmp_path / "tpu.safetensors").read_bytes() == (tmp_path / "cpu.safetensors").read_bytes()
    on_cpu = st.load_file(tmp_path / "tpu.safetensors")
    for k, v in host.items():
        same(on_cpu[k], v)
    # safetensors parses device names itself; torch_tpu's wrapper of
    # safe_open (torch_tpu/safetensors_compat.py) makes it take tpu ones
    for device in ("tpu", "tpu:0", torch.device("tpu"), torch.tpu.current_device()):
        on_tpu = st.load_file(tmp_path / "tpu.safetensors", device=device)
        for k, v in host.items():
            assert on_tpu[k].device.type == "tpu", device
            same(on_tpu[k], v)
    from safetensors import safe_open
    with safe_open(tmp_path / "tpu.safetensors", framework="pt", device="tpu") as f:
        assert sorted(f.keys()) == sorted(host)
        same(f.get_tensor("w"), host["w"])
        assert f.get_tensor("w").device.type == "tpu"
    # a model's weights through safetensors
    model = small_model().to("tpu")
    st.save_model(model, tmp_path / "model.safetensors")
    fresh = small_model()
    with torch.no_grad():
        for p in fresh.parameters():
            p.zero_()
    fresh = fresh.to("tpu")
    st.load_model(fresh, tmp_path / "model.safetensors", device="tpu")
    for (k, a), (_, b) in zip(model.state_dict().items(), fresh.state_dict().items()):
        assert torch.equal(a.cpu(), b.cpu()), k


SAFETENSORS_FIRST = """
import safetensors.torch as st
import torch
import torch_tpu
st.save_file({"a": torch.arange(6.0).to("tpu")}, PATH)
a = st.load_file(PATH, device="tpu")["a"]
assert a.device.type == "tpu" and a.cpu().tolist() == [0, 1, 2, 3, 4, 5], a
print("ok")
"""


def test_safetensors_imported_before_torch_tpu(tmp_path):
    """safetensors.torch imported first, torch_tpu later (no autoload):
    device="tpu" still works."""
    pytest.importorskip("safetensors.torch")
    env = dict(os.environ, PYTHONPATH=ROOT, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    code = SAFETENSORS_FIRST.replace("PATH", repr(str(tmp_path / "a.safetensors")))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout + proc.stderr


TWO_DEVICES = """
import copy, io, pickle
import torch
h = torch.arange(12.0).reshape(3, 4)
t = h.to("tpu:1")
buf = io.BytesIO()
torch.save({"t": t, "z": torch.ones(2, device="tpu:0")}, buf)
for loc, want_t, want_z in [(None, "tpu:1", "tpu:0"), ("cpu", "cpu", "cpu"), ("tpu:0", "tpu:0", "tpu:0"),
                            ({"tpu:1": "tpu:0"}, "tpu:0", "tpu:0")]:
    buf.seek(0)
    r = torch.load(buf, map_location=loc)
    assert str(r["t"].device) == want_t and str(r["z"].device) == want_z, (loc, r["t"].device, r["z"].device)
    assert str(r["t"].untyped_storage().device) == want_t
    assert torch.equal(r["t"].cpu(), h) and torch.equal(r["z"].cpu(), torch.ones(2))
for dup in (copy.deepcopy(t), pickle.loads(pickle.dumps(t))):
    assert str(dup.device) == "tpu:1" and torch.equal(dup.cpu(), h)
print("ok")
"""


def test_checkpoint_on_second_device():
    """Two virtual devices: storages keep their tpu:N location through save,
    load, map_location remapping, deepcopy and pickle."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), TORCH_TPU_NUM_DEVICES="2")
    proc = subprocess.run([sys.executable, "-c", "import torch_tpu\n" + TWO_DEVICES], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout + proc.stderr


def test_grad_scaler_state_checkpoint():
    """GradScaler("tpu") state survives a checkpoint and behaves like CPU's
    after an overflow step (scale halved, growth tracker reset)."""
    results = {}
    for device in ("cpu", "tpu"):
        torch.manual_seed(0)
        model = nn.Linear(4, 2).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 8, growth_interval=2)
        for i, bad in enumerate([False, False, True, False]):
            x = torch.full((3, 4), float("inf") if bad else 1.0 + i, device=device)
            opt.zero_grad()
            scaler.scale(model(x).sum()).backward()
            scaler.step(opt)
            scaler.update()
        state = roundtrip(scaler.state_dict())
        fresh = torch.amp.GradScaler(device)
        fresh.load_state_dict(state)
        results[device] = (state, fresh.get_scale(), [p.detach().cpu() for p in model.parameters()])
    assert results["tpu"][0] == results["cpu"][0]
    assert results["tpu"][1] == results["cpu"][1] == 2.0 ** 8
    for a, b in zip(results["tpu"][2], results["cpu"][2]):
        assert_close(a, b, atol=1e-5, rtol=1e-5)


def run_example(*args, tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TPU_DEFER_AND_FUSE", None)  # bitwise comparisons: see strict_mode below
    proc = subprocess.run([sys.executable, EXAMPLE, *args, "--ckpt-dir", str(tmp_path / "ckpt"), "--log-every", "5"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_resume_in_fresh_process_matches_uninterrupted(tmp_path):
    """examples/train_checkpoint.py: 20 steps saving at 10 and 20; a new
    process resumes from step 10 and trains to 20. AdamW state, the
    warmup+cosine schedule, dropout RNG and clip_grad_norm_ all carry over, so
    the parameters are bitwise those of the uninterrupted run."""
    out = run_example("--steps", "20", "--save-every", "10", "--dump", str(tmp_path / "a.pt"), tmp_path=tmp_path)
    assert "step    10/20" in out and "step    20/20" in out
    assert "saved" in out and (tmp_path / "ckpt" / "step_000010.pt").exists()
    resumed = run_example("--steps", "20", "--save-every", "10", "--resume", str(tmp_path / "ckpt" / "step_000010.pt"),
                          "--dump", str(tmp_path / "b.pt"), tmp_path=tmp_path)
    assert "resumed from" in resumed and "at step 10" in resumed
    assert "step     5/20" not in resumed and "step    20/20" in resumed
    a, b = torch.load(tmp_path / "a.pt"), torch.load(tmp_path / "b.pt")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), (k, (a[k] - b[k]).abs().max())
    # `--resume` with no path takes the latest checkpoint (step 20: nothing to do)
    latest = run_example("--steps", "20", "--resume", "--save-every", "0", "--dump", str(tmp_path / "c.pt"),
                         tmp_path=tmp_path)
    assert "at step 20" in latest
    c = torch.load(tmp_path / "c.pt")
    assert all(torch.equal(a[k], c[k]) for k in a)


def test_example_matches_cpu():
    """The example's training on tpu and on CPU (dropout off so no RNG is
    involved): float32 parameters agree within 1e-5 after 20 steps
    (measured 2.2e-7)."""
    sys.path.insert(0, os.path.dirname(EXAMPLE))
    try:
        import train_checkpoint as ex
    finally:
        sys.path.pop(0)
    params = {}
    for device in ("cpu", "tpu"):
        args = ex.parse_args(["--steps", "20", "--save-every", "0", "--dropout", "0", "--device", device,
                              "--log-every", "100"])
        params[device] = {k: v.detach().cpu() for k, v in ex.train(args).state_dict().items()}
    for k, c in params["cpu"].items():
        assert_close(params["tpu"][k], c, atol=1e-5, rtol=1e-5)
