"""The persistent compilation cache (TORCH_TPU_CACHE_DIR): a second process
loads what the first compiled, damaged entries are rebuilt, keys separate
what must not be shared, clear() empties it. Each run is a fresh subprocess
on its own temporary cache directory."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch_tpu

# A small MLP: forward, backward and an Adam step on tpu, the same on CPU.
# Prints the tpu results, their largest difference from CPU, and the stats.
SCRIPT = r"""
import json, torch, torch.nn as nn, torch.nn.functional as F
def run(device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 4)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(16, 8, generator=g), torch.randint(0, 4, (16,), generator=g)
    x, y = x.to(device), y.to(device)
    losses = []
    for _ in range(2):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]
losses, params = run("tpu")
ref_losses, ref_params = run("cpu")
diff = max(float((p - r).abs().max()) for p, r in zip(params, ref_params))
diff = max([diff] + [abs(a - b) for a, b in zip(losses, ref_losses)])
print("RESULT " + json.dumps({"losses": losses, "params": [p.flatten().tolist() for p in params],
                              "diff": diff, "stats": torch.tpu.compile_cache_stats()}))
"""


def _env(cache_dir, **extra):
    env = dict(os.environ)
    env.pop("TORCH_TPU_PERSISTENT_CACHE", None)
    # Strict Eager: these tests count and break per-op compiles, which Fused
    # Eager defers or replaces by fused programs.
    env.pop("TPU_DEFER_AND_FUSE", None)
    env["TORCH_TPU_CACHE_DIR"] = str(cache_dir)
    env.update(extra)
    return env


def _run(code, env):
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "Traceback" not in r.stderr, r.stderr[-4000:]
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, r.stdout[-2000:] + r.stderr[-2000:]
    return json.loads(lines[-1][len("RESULT "):]), r.stderr


def _entries(cache_dir):
    return sorted(p for p in Path(cache_dir).glob("*.xla"))


@pytest.fixture(scope="module")
def populated(tmp_path_factory):
    """One cold run on an empty directory: its results and the files it left."""
    cache_dir = tmp_path_factory.mktemp("cache")
    cold, _ = _run(SCRIPT, _env(cache_dir))
    return cache_dir, cold


def test_cold_run_compiles_and_stores(populated):
    cache_dir, cold = populated
    s = cold["stats"]
    assert cold["diff"] < 1e-4
    assert s["enabled"] and s["dir"] == str(cache_dir)
    assert s["hits"] == 0 and s["misses"] > 0
    assert s["compiles"] == s["misses"] == s["stores"]
    assert s["entries"] == len(_entries(cache_dir)) == s["stores"]
    assert s["bytes"] == sum(p.stat().st_size for p in _entries(cache_dir)) > 0
    assert s["program_misses"] > 0


def test_warm_run_loads_everything_and_matches(populated):
    cache_dir, cold = populated
    warm, stderr = _run(SCRIPT, _env(cache_dir))
    s = warm["stats"]
    assert s["compiles"] == 0 and s["misses"] == 0 and s["corrupt"] == 0
    assert s["hits"] == cold["stats"]["misses"]
    assert warm["losses"] == cold["losses"] and warm["params"] == cold["params"]
    # XLA's false CPU-feature alarm on every load is filtered out.
    assert "prefer-no-gather" not in stderr


def test_damaged_entries_are_rebuilt(populated, tmp_path):
    src, cold = populated
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    for p in _entries(src):
        (cache_dir / p.name).write_bytes(p.read_bytes())
    files = _entries(cache_dir)
    assert len(files) >= 3
    truncated, garbled, refused = files[0], files[1], files[2]
    data = truncated.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    data = bytearray(garbled.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 64):
        data[i] ^= 0x5A
    garbled.write_bytes(bytes(data))
    # Well-formed header and checksum around bytes XLA cannot load.
    import hashlib
    payload = b"not an executable" * 8
    header = refused.read_bytes().split(b"\n")[:2]
    refused.write_bytes(b"\n".join(header + [str(len(payload)).encode(), hashlib.sha256(payload).hexdigest().encode()])
                        + b"\n" + payload)

    again, _ = _run(SCRIPT, _env(cache_dir))
    s = again["stats"]
    assert s["corrupt"] == 3 and s["misses"] == 3 and s["compiles"] == 3 and s["stores"] == 3
    assert s["hits"] == cold["stats"]["misses"] - 3
    assert again["losses"] == cold["losses"] and again["params"] == cold["params"]
    # Rebuilt: a third run loads every entry again.
    third, _ = _run(SCRIPT, _env(cache_dir))
    assert third["stats"]["compiles"] == 0 and third["stats"]["corrupt"] == 0


def test_other_xla_flags_do_not_load_stale_entries(populated, tmp_path):
    src, cold = populated
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    for p in _entries(src):
        (cache_dir / p.name).write_bytes(p.read_bytes())
    r, _ = _run(SCRIPT, _env(cache_dir, XLA_FLAGS="--xla_cpu_enable_fast_math=false"))
    assert r["stats"]["hits"] == 0 and r["stats"]["compiles"] == cold["stats"]["compiles"]


def test_clear_removes_entries(populated, tmp_path):
    src, _ = populated
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    for p in _entries(src):
        (cache_dir / p.name).write_bytes(p.read_bytes())
    other = cache_dir / "keep.txt"
    other.write_text("not ours")
    code = ("import json, torch\n"
            "before = torch.tpu.compile_cache_stats()['entries']\n"
            "removed = torch.tpu.clear_compile_cache()\n"
            "after = torch.tpu.compile_cache_stats()\n"
            "import sys; print('RESULT ' + json.dumps([before, removed, after['entries'], after['bytes'],"
            " 'jax' in sys.modules]))\n")
    (before, removed, after, nbytes, jax_started), _ = _run(code, _env(cache_dir))
    assert before == removed == len(_entries(src)) > 0
    assert after == 0 and nbytes == 0 and _entries(cache_dir) == []
    assert other.read_text() == "not ours"
    assert not jax_started  # stats and clear do not start XLA


@pytest.mark.parametrize("how", [{"TORCH_TPU_PERSISTENT_CACHE": "0"}, {"TORCH_TPU_CACHE_DIR": ""}])
def test_disabled(tmp_path, how):
    cache_dir = tmp_path / "cache"
    env = _env(cache_dir)
    env.update(how)
    r, _ = _run(SCRIPT, env)
    s = r["stats"]
    assert not s["enabled"] and s["hits"] == s["misses"] == s["stores"] == 0 and s["compiles"] > 0
    assert r["diff"] < 1e-4
    assert not cache_dir.exists() or not _entries(cache_dir)


def test_default_dir_follows_xdg_cache_home(tmp_path):
    env = _env(tmp_path)
    del env["TORCH_TPU_CACHE_DIR"]
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    code = "import json, torch; print('RESULT ' + json.dumps(torch.tpu.compile_cache_stats()))"
    s, _ = _run(code, env)
    assert s["enabled"] and s["dir"] == str(tmp_path / "xdg" / "torch_tpu" / "xla")


# ---- the key ----------------------------------------------------------------

TEXT = "module @m { func.func public @main() -> () { return } }"


def test_key_inputs_describe_this_runtime():
    import jax
    from jax._src.lib import version_str

    inputs = torch_tpu._C._compile_cache_key_inputs()
    assert inputs["jaxlib_version"] == version_str and inputs["jax_version"] == jax.__version__
    assert inputs["platform"] == torch.tpu.platform()
    assert inputs["device_count"] == str(torch.tpu.device_count())
    for field in ("device_kind", "platform_version", "device_assignment", "format"):
        assert inputs[field]
    if inputs["platform"] == "cpu" and Path("/proc/cpuinfo").exists():
        models = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")]
        if models:
            assert inputs["cpu_model"] == models[0]
        assert len(inputs["cpu_flags"]) == 64


@pytest.mark.parametrize("field", ["jaxlib_version", "jax_version", "cpu_model", "cpu_flags", "platform",
                                   "platform_version", "device_kind", "device_count", "device_assignment",
                                   "format", "xla_flags"])
def test_key_changes_with_each_input(field):
    inputs = dict(torch_tpu._C._compile_cache_key_inputs())
    key = torch_tpu._C._compile_cache_key(TEXT, inputs)
    assert len(key) == 64 and key == torch_tpu._C._compile_cache_key(TEXT, dict(inputs))
    changed = dict(inputs)
    changed[field] = changed.get(field, "") + "-other"
    assert torch_tpu._C._compile_cache_key(TEXT, changed) != key


def test_key_changes_with_text_and_field_boundaries():
    inputs = {"a": "bc", "format": "1"}
    key = torch_tpu._C._compile_cache_key(TEXT, inputs)
    assert torch_tpu._C._compile_cache_key(TEXT + " ", inputs) != key
    # Moving bytes between a name and a value gives a different key.
    assert torch_tpu._C._compile_cache_key(TEXT, {"ab": "c", "format": "1"}) != key


def test_unwritable_dir_warns_and_still_runs(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    r, stderr = _run(SCRIPT, _env(blocker / "cache"))  # a directory cannot be made under a file
    s = r["stats"]
    assert s["enabled"] and s["stores"] == 0 and s["store_errors"] == s["misses"] > 0
    assert s["compiles"] == s["misses"] and r["diff"] < 1e-4
    assert stderr.count("could not write to the compilation cache") == 1


def test_size_cap_evicts_least_recently_used(populated, tmp_path):
    src, cold = populated
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    for p in _entries(src):
        (cache_dir / p.name).write_bytes(p.read_bytes())
    total = sum(p.stat().st_size for p in _entries(cache_dir))
    # An old, unused entry: the first to go.
    stale = cache_dir / ("0" * 64 + ".xla")
    stale.write_bytes(b"x" * 10000)
    os.utime(stale, (946684800, 946684800))
    # Other XLA flags: every program misses and is stored next to the old
    # ones, so the directory would hold about twice `total`.
    cap = total + total // 2
    r, _ = _run(SCRIPT, _env(cache_dir, XLA_FLAGS="--xla_cpu_enable_fast_math=false",
                             TORCH_TPU_CACHE_MAX_BYTES=str(cap)))
    s = r["stats"]
    assert s["max_bytes"] == cap and s["stores"] == cold["stats"]["stores"]
    assert s["evicted"] > 0 and not stale.exists()
    on_disk = sum(p.stat().st_size for p in _entries(cache_dir))
    assert on_disk == s["bytes"] <= cap
    # What was just written survives: the same run again loads everything.
    again, _ = _run(SCRIPT, _env(cache_dir, XLA_FLAGS="--xla_cpu_enable_fast_math=false",
                                 TORCH_TPU_CACHE_MAX_BYTES=str(cap)))
    assert again["stats"]["compiles"] == 0 and again["losses"] == cold["losses"]


def test_bad_size_cap_is_a_clear_error(tmp_path):
    env = _env(tmp_path, TORCH_TPU_CACHE_MAX_BYTES="lots")
    r = subprocess.run([sys.executable, "-c", "import torch; torch.ones(2, device='tpu') + 1"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode != 0 and "TORCH_TPU_CACHE_MAX_BYTES" in r.stderr
