"""One configuration of benchmarks/compile.py, in its own process.

    python benchmarks/_compile_worker.py '<json config>'

Kinds: strict, fused, compiled (torch_tpu on "tpu"), cpu (PyTorch's own
eager on the CPU), inductor (torch.compile on CPU), torchax (jax.jit through
torchax on XLA:CPU). Every kind gets a fresh
process, so each one's first call compiles from cold (compile.py also points
every compilation cache at an empty directory) and torchax's global patches
of torch stay out of the others.

The last stdout line is `RESULT <json>`: train and inference seconds per step,
first-call seconds, the loss of every timed step, the inference loss, and
what exactly ran (`notes`). An exception is reported as `RESULT` with
`error`, so compile.py can print what failed instead of dying.
"""

import json
import statistics
import os
import sys
import time
import traceback
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import _gpt2_small as gpt2  # noqa: E402

# torch.optim.AdamW's defaults, written out because the torchax side
# implements the same update by hand.
BETAS = (0.9, 0.999)
EPS = 1e-8
WEIGHT_DECAY = 0.01


class WithLoss(torch.nn.Module):
    """forward + cross-entropy as one module, so torch.compile captures the loss too."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, idx, targets):
        return gpt2.loss_fn(self.model(idx), targets)


def timed_loop(cfg, step, sync, keep_all=True):
    """First call (timed alone: it traces and compiles), `warmup - 1` more
    calls, then `steps` timed calls, each closed by a sync. Returns (first s,
    first call's process CPU s, median s/call, all timed s/call, outputs of
    the timed calls). The median of synced calls rather than one long loop:
    the 2-core machine is shared, and a median ignores the calls another
    process's burst slowed down. A training step depends on the previous
    one's parameters, so the per-call sync costs little overlap. `keep_all=False` keeps only the last output:
    an inference loop uses each result and drops it (holding all 21 logits
    tensors, 51 MB each, would keep any runtime from reusing their memory)."""
    start, cpu = time.perf_counter(), time.process_time()
    sync([step()])
    first, first_cpu = time.perf_counter() - start, time.process_time() - cpu
    for _ in range(cfg["warmup"] - 1):
        sync([step()])
    times, outs = [], []
    for _ in range(cfg["steps"]):
        start = time.perf_counter()
        out = step()
        sync([out])
        times.append(time.perf_counter() - start)
        if not keep_all:
            outs.clear()
        outs.append(out)
        del out
    return first, first_cpu, statistics.median(times), times, outs


# ---------------------------------------------------------------- torch kinds


def setup_torch(cfg, backend=None):
    """Model, data, optimizer and step functions of a torch kind, none called
    yet, as a namespace: train_step (and its parts train_fn, opt, opt_step,
    idx, tgt on the device), infer_step, sync, ctx (the eager mode to run
    them in), device, notes. `backend`: the compiled kinds' Dynamo
    backend in place of "tpu"/"inductor" (first_call.py wraps ours to time
    it)."""
    kind = cfg["kind"]
    notes = []
    if kind == "compiled3":  # compiled, with TORCH_TPU_REPLAY_CHAIN=0 (compile.py sets it)
        kind = "compiled"
        notes.append("replays not chained: forward, backward and optimizer are three programs per step")
    shape = cfg.get("shape", "gpt2")
    idx, tgt = gpt2.batch(cfg["batch"], cfg["seq"], shape=shape)
    model = gpt2.build(cfg["layers"], cfg["attn"], shape=shape)
    if kind in ("inductor", "cpu"):
        device = "cpu"
        torch.set_num_threads(cfg["threads"]) if cfg.get("threads") else None
        what = "torch.compile(backend='inductor')" if kind == "inductor" else "PyTorch eager"
        notes.append(f"{what} on CPU, {torch.get_num_threads()} threads")
    elif kind in ("cuda", "inductor_cuda"):
        # The reference on a GPU machine: PyTorch's own CUDA path, on the
        # same GPU that XLA runs torch_tpu's programs on.
        device = "cuda"
        model = model.to(device)
        what = "torch.compile(backend='inductor')" if kind == "inductor_cuda" else "PyTorch eager"
        notes.append(f"{what} on {torch.cuda.get_device_name()}")
    else:
        import torch_tpu

        device = "tpu"
        model = model.to(device)  # keeps the head tied (Parameters survive the move)
        assert model.lm_head.weight is model.wte.weight
    idx, tgt = idx.to(device), tgt.to(device)
    # A compiled step on tpu keeps AdamW's step counters on the device
    # (capturable=True): with CPU counters the graph updates a CPU tensor, so
    # it cannot be replayed from C++ and re-runs op by op each call.
    capturable = kind == "compiled" and cfg["compile_opt"]
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY,
                            capturable=capturable)
    if capturable:
        notes.append("AdamW(capturable=True): step counters on tpu, so the compiled step is replayed")

    mode = "fused" if kind == "fused" else "strict"
    train_fn, infer_fn, opt_step = WithLoss(model), model, opt.step
    if kind in ("compiled", "inductor", "inductor_cuda"):
        name = "tpu" if kind == "compiled" else "inductor"
        backend = backend or name
        train_fn = torch.compile(train_fn, backend=backend)
        infer_fn = torch.compile(infer_fn, backend=backend)
        if cfg["compile_opt"]:
            opt_step = torch.compile(opt.step, backend=backend)
            notes.append(f"model+loss and optimizer step compiled (backend={name})")
        else:
            eager = f"{mode} eager" if device == "tpu" else "eager on CPU"
            notes.append(f"model+loss compiled (backend={name}); optimizer step {eager}")

    def train_step():
        opt.zero_grad(set_to_none=True)
        loss = train_fn(idx, tgt)
        loss.backward()
        opt_step()
        return loss.detach()

    if device == "tpu":
        from torch_tpu import mark_step
    else:
        def mark_step():
            pass

    def infer_step():
        with torch.no_grad():
            out = infer_fn(idx)
        # Fused Eager flushes at host reads and optimizer steps, neither of
        # which an inference loop has: without a mark_step per call, the
        # timed calls would be deferred into one trace and compiled as one
        # new program inside the timing. (A no-op in the other modes.)
        mark_step()
        return out

    if device == "tpu":
        def sync(_outs):
            torch.tpu.synchronize()
    elif device == "cuda":
        def sync(_outs):
            torch.cuda.synchronize()
    else:
        def sync(_outs):
            pass  # CPU ops have finished when they return

    if device == "tpu":
        import torch_tpu

        ctx = torch_tpu.eager_mode(mode)
    else:
        import contextlib

        ctx = contextlib.nullcontext()
    return types.SimpleNamespace(train_step=train_step, train_fn=train_fn, opt=opt, opt_step=opt_step, idx=idx,
                                 tgt=tgt, infer_step=infer_step, sync=sync, ctx=ctx, device=device, notes=notes)


def run_torch(cfg):
    s = setup_torch(cfg)
    train_step, infer_step, sync, ctx, device, tgt, notes = (s.train_step, s.infer_step, s.sync, s.ctx, s.device,
                                                             s.tgt, s.notes)
    with ctx:
        t_first, t_first_cpu, t_step, t_all, losses = timed_loop(cfg, train_step, sync)
        i_first, _, i_step, i_all, logits = timed_loop(cfg, infer_step, sync, keep_all=False)
        losses = [float(l.item()) for l in losses]
        infer_loss = float(gpt2.loss_fn(logits[-1].cpu(), tgt.cpu()).item())
    res = dict(train_first_s=t_first, train_first_cpu_s=t_first_cpu, train_step_s=t_step, infer_first_s=i_first,
               infer_step_s=i_step, train_all_s=t_all, infer_all_s=i_all,
               losses=losses, infer_loss=infer_loss, notes=notes)
    if device == "tpu":
        import torch_tpu

        res["tpu_stats"] = torch_tpu.compile_stats()
        res["tpu_stats"]["chained_replays"] = torch_tpu._C._fusion_stats()["chained_replays"]
    return res


# ---------------------------------------------------------------- torchax


def _import_torchax():
    """torchax 0.0.13 (the newest) names aten overloads that take Dimname,
    which torch 2.13 no longer has (e.g. aten.prod.dim_Dimname) in tables
    it builds at import and when the environment loads its ops. Those
    entries are never used here; while torchax loads, a missing overload
    resolves to an inert placeholder instead of raising. Restored after."""
    import torch._ops as ops

    original = ops.OpOverloadPacket.__getattr__
    missing = []

    def lenient(self, key):
        try:
            return original(self, key)
        except AttributeError:
            if key.startswith("__"):
                raise
            missing.append(f"{self._qualified_op_name}.{key}")
            return ("missing aten overload", self._qualified_op_name, key)

    ops.OpOverloadPacket.__getattr__ = lenient
    try:
        import torchax

        env = torchax.default_env()
    finally:
        ops.OpOverloadPacket.__getattr__ = original
    return torchax, env, missing


def setup_torchax(cfg):
    """torchax's training step, not called yet, as a namespace: train_step,
    sync, and what inference needs (jm, state, env, idx_t, tgt), notes."""
    torchax, env, missing = _import_torchax()
    import jax
    import jax.numpy as jnp
    from torchax import interop

    notes = [f"torchax {getattr(torchax, '__version__', '?')}, jax {jax.__version__} on {jax.devices()[0].platform}"]
    if missing:
        notes.append(f"{len(missing)} Dimname aten overloads torch {torch.__version__.split('+')[0]} lacks were stubbed at torchax import")
    shape = cfg.get("shape", "gpt2")
    idx, tgt = gpt2.batch(cfg["batch"], cfg["seq"], shape=shape)
    model = gpt2.build(cfg["layers"], cfg["attn"], shape=shape)
    with env:
        model = gpt2.to_device(model, "jax")
        idx_t, tgt_t = idx.to("jax"), tgt.to("jax")
    # torchax.compile: a JittableModule whose forward is jax.jit of the
    # module's functional call (tied weights are de-duplicated).
    jm = torchax.compile(model)
    params = interop.jax_view(dict(jm.params))
    buffers = interop.jax_view(dict(jm.buffers))
    idx_j, tgt_j = interop.jax_view(idx_t), interop.jax_view(tgt_t)

    def loss_of(p, b, x, y):  # torch code, run on torchax tensors
        return gpt2.loss_fn(jm.functional_call("forward", p, b, x), y)

    def jax_loss(p, b, x, y):
        return interop.call_torch(loss_of, p, b, x, y)

    lr, (b1, b2) = cfg["lr"], BETAS

    def adamw(p, g, m, v, t):
        # torch.optim.AdamW's update (decoupled weight decay, bias correction).
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p * (1 - lr * WEIGHT_DECAY)
        denom = jnp.sqrt(v) / jnp.sqrt(1 - b2**t) + EPS
        return p - (lr / (1 - b1**t)) * m / denom, m, v

    def step(p, m, v, t, b, x, y):
        loss, g = jax.value_and_grad(jax_loss)(p, b, x, y)
        t = t + 1
        out = {k: adamw(p[k], g[k], m[k], v[k], t) for k in p}
        return (loss, {k: o[0] for k, o in out.items()}, {k: o[1] for k, o in out.items()},
                {k: o[2] for k, o in out.items()}, t)

    jstep = jax.jit(step, donate_argnums=(0, 1, 2))
    notes.append("train: one jax.jit of value_and_grad over torchax's functional call + AdamW written in jax")
    notes.append("inference: torchax.compile(model) (jax.jit of forward)")
    state = {"p": params, "m": jax.tree.map(jnp.zeros_like, params),
             "v": jax.tree.map(jnp.zeros_like, params), "t": jnp.zeros((), jnp.float32)}

    def train_step():
        loss, state["p"], state["m"], state["v"], state["t"] = jstep(
            state["p"], state["m"], state["v"], state["t"], buffers, idx_j, tgt_j)
        return loss

    def sync(outs):
        jax.block_until_ready((outs, state["p"]))

    return types.SimpleNamespace(train_step=train_step, sync=sync, jm=jm, state=state, env=env, idx_t=idx_t,
                                 tgt=tgt, notes=notes)


def run_torchax(cfg):
    s = setup_torchax(cfg)  # imports torchax (through the shim), so only then:
    import jax
    from torchax import interop

    train_step, sync, jm, state, env, idx_t, tgt, notes = (s.train_step, s.sync, s.jm, s.state, s.env, s.idx_t,
                                                           s.tgt, s.notes)
    t_first, t_first_cpu, t_step, t_all, losses = timed_loop(cfg, train_step, sync)
    # Inference with the trained weights, through the JittableModule.
    jm.params = interop.torch_view(state["p"])

    def infer_step():
        with env, torch.no_grad():
            return interop.jax_view(jm(idx_t))

    i_first, _, i_step, i_all, logits = timed_loop(cfg, infer_step, lambda outs: jax.block_until_ready(outs),
                                                   keep_all=False)
    losses = [float(l) for l in losses]
    last = torch.from_numpy(__import__("numpy").asarray(logits[-1]))
    infer_loss = float(gpt2.loss_fn(last, tgt).item())
    return dict(train_first_s=t_first, train_first_cpu_s=t_first_cpu, train_step_s=t_step, infer_first_s=i_first,
                infer_step_s=i_step, train_all_s=t_all, infer_all_s=i_all,
                losses=losses, infer_loss=infer_loss, notes=notes)


def main():
    cfg = json.loads(sys.argv[1])
    try:
        res = run_torchax(cfg) if cfg["kind"] == "torchax" else run_torch(cfg)
    except Exception as e:  # reported, not raised: compile.py prints it in the table
        traceback.print_exc()
        res = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:400]}
    res["kind"] = cfg["kind"]
    sys.stdout.flush()
    print("RESULT " + json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
