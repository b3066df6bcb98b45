"""`torch.compile(model, backend="tpu")`.

Dynamo captures FX graphs (graph breaks run eagerly on tpu, as usual);
AOTAutograd turns each into forward and backward ATen graphs. Every ATen
graph is compiled here into a function that runs its ops through the normal
eager engine in Fused Eager mode and flushes once at its end: the graph
becomes one fused StableHLO program, built by the same C++ lowering rules as
eager ops and cached by the fused runtime, so calling it again with the same
shapes compiles nothing (docs/design.md, "torch.compile").
"""

from __future__ import annotations

import functools
import operator
import sys
import threading
from typing import Any, Callable

import torch

from . import _C, _import_hooks, auto_bucket, compile_errors, compile_log, compile_options
from .graph_replay import ReplayCache, replay_stats

__all__ = ["compile_stats", "decompositions", "tpu_backend"]

_FUSED = 2  # runtime::EagerMode::kFused

_stats = {"graphs": 0, "graph_calls": 0}
_stats_lock = threading.Lock()


@functools.lru_cache(maxsize=None)
def decompositions() -> dict:
    """PyTorch's core-ATen decompositions, less those of ops that have a
    lowering rule: a rule lowers its op to one StableHLO pattern (often one
    fused reduction or select), where the decomposition would give several
    ops. Ops without a rule are decomposed into core ATen ops, which mostly
    have one."""
    from torch._decomp import core_aten_decompositions

    rules = set(_C._lowered_ops())
    table = {}
    for op, fn in core_aten_decompositions().items():
        # detach is a view here (metadata only). Decomposed, it becomes an
        # alias of its input, and torch's check of a scan body's backward
        # then refuses the body as "aliasing the input or the output".
        if op is torch.ops.aten.detach.default:
            continue
        name = op._schema.name.split("::")[-1] if isinstance(op, torch._ops.OpOverload) else None
        if name is not None and (name in rules or name.rstrip("_") in rules):
            continue
        table[op] = fn
    return table


def _fused_graph_compiler(gm: torch.fx.GraphModule, example_inputs: list, quick_first: bool = True) -> Callable:
    """Returns a boxed function (it takes the argument list, so AOTAutograd
    may free the inputs) that runs `gm` as one fused program. `quick_first`:
    its first call compiles quick (graph_replay.py)."""
    from torch.fx.graph import _BoxedCodeGen

    compile_errors.check_graph_lowerable(gm)  # an op with no lowering fails here, not mid-run
    gm.graph.set_codegen(_BoxedCodeGen())
    gm.recompile()
    forward = gm.forward
    with _stats_lock:
        _stats["graphs"] += 1

    def run_ops(args: list) -> Any:
        prev = _C._get_eager_mode()
        _C._set_eager_mode(_FUSED)
        try:
            with auto_bucket.in_graph():
                return forward(args)
        except Exception as exc:
            raise compile_errors.annotate_graph_error(gm, exc)  # names the op and the user's line
        finally:
            # Flush even on error: the ops deferred so far run (or raise)
            # here rather than leak into the caller's next trace.
            try:
                _C._mark_step()
            finally:
                _C._set_eager_mode(prev)

    # Calls after the first run as a replay of the fused program when the
    # graph allows (graph_replay.py): no per-op dispatch.
    replay = ReplayCache(run_ops, quick_first=quick_first)

    def run(args: list) -> Any:
        with _stats_lock:
            _stats["graph_calls"] += 1
        return replay(args)

    run._boxed_call = True
    return run


def _inference_graph_compiler(gm: torch.fx.GraphModule, example_inputs: list, options=None) -> Callable:
    """Inference graphs with symbolic sizes run padded to size buckets
    (bounded_graph.py; `options`, torch.compile's, may choose them); others
    as `_fused_graph_compiler`."""
    from .bounded_graph import make_runner

    # Not quick: an optimizer step is an inference graph, and its
    # elementwise updates over every parameter run ~6x slower at -O0 than
    # the compile saves (docs/design.md, "First-call compile time").
    return make_runner(gm, _fused_graph_compiler(gm, example_inputs, quick_first=False), options)


def _partition(joint_module: torch.fx.GraphModule, joint_inputs, **kwargs):
    """AOTAutograd's default partitioner, except that the random ops of a
    checkpointed region (torch.utils.checkpoint under torch.compile) are
    saved instead of recomputed in the backward graph. To recompute them
    AOTAutograd wraps them in `run_and_save_rng_state`, whose device table
    (torch/_prims/rng_prims.py) knows cuda, cpu, hpu and xpu only, so such a
    graph failed on tpu; recomputed with a fresh key they would draw other
    dropout masks. Saved, the recomputed ops downstream read the forward's
    values: the gradients are exact, at the memory of those ops' outputs."""
    from torch._functorch.partitioners import default_partition, must_recompute
    from torch.utils.checkpoint import CheckpointPolicy

    for node in joint_module.graph.nodes:
        if node.op == "call_function" and must_recompute(node) and \
                torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ()):
            # a multi-output op (native_dropout) is saved through its getitems
            for saved in [node, *(u for u in node.users if u.target is operator.getitem)]:
                saved.meta["recompute"] = CheckpointPolicy.MUST_SAVE
    return default_partition(joint_module, joint_inputs, **kwargs)


# One AOTAutograd wrapper per distinct options (a stateless callable: the
# compiled graphs live in Dynamo's caches). Bounded, since each
# `debug_callback` closure is a distinct key; an evicted entry is rebuilt.
@functools.lru_cache(maxsize=64)
def _aot_backend(options: compile_options.CompileOptions):
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(
        fw_compiler=_fused_graph_compiler,
        bw_compiler=_fused_graph_compiler,
        inference_compiler=functools.partial(_inference_graph_compiler, options=options),
        partition_fn=_partition,
        decompositions=decompositions,  # called on the first compile
        keep_inference_input_mutations=True,
    )


def tpu_backend(gm: torch.fx.GraphModule, example_inputs: list, options: dict | None = None,
                mode: str | None = None, **kwargs: Any) -> Callable:
    """The "tpu" Dynamo backend (see the module docstring). `options` and
    `mode`: torch.compile's, checked here (compile_options.py)."""
    compile_options.check_mode(mode)
    opts = compile_options.parse(options)
    if opts.debug_callback is not None:
        opts.debug_callback(gm, example_inputs)
    compile_log.note_graph_compile(gm, example_inputs, opts.name)  # why this (re)compile: compile_log.py
    return _aot_backend(opts)(gm, example_inputs, **kwargs)


# ---- registration ----------------------------------------------------------
# Importing torch._dynamo takes seconds, and torch_tpu is imported by every
# `import torch`; so nothing of Dynamo or Inductor is imported here. A
# meta-path hook waits for the modules below to load and registers into each
# through its own registration API, right after the module has run:
# - Dynamo's backend registry: "tpu" as a lazy entry (like those of the
#   "torch_dynamo_backends" entry-point group; Dynamo calls its load() on the
#   first lookup of the name), and, through `set_default_backend`, the
#   backend torch.compile uses when given none (`_DefaultBackend`: ours for
#   tpu inputs, Inductor otherwise);
# - Dynamo's device interfaces: `tpu` (torch_tpu/dynamo_device.py);
# - Inductor's per-device code generators: `tpu` refuses with a clear error
#   (Inductor's own tpu path generates code for the reference backend's
#   private modules).

_REGISTRY = "torch._dynamo.backends.registry"
_DEVICE_INTERFACE = "torch._dynamo.device_interface"
_INDUCTOR_CODEGEN = "torch._inductor.codegen.common"


class _LazyBackend:
    name = "tpu"

    def load(self) -> Callable:
        return tpu_backend


def _has_tpu_tensor(values) -> bool:
    return any(isinstance(v, torch.Tensor) and v.device.type == "tpu" for v in values)


def _on_tpu(gm: torch.fx.GraphModule, example_inputs) -> bool:
    """The graph takes or makes tpu tensors. A graph with no tpu input can
    still make them (transformers compiles `create_block_mask`, whose graph
    builds its masks from `arange(..., device="tpu")` and takes no tensor)."""
    if _has_tpu_tensor(example_inputs):
        return True
    return any(_has_tpu_tensor(torch.utils._pytree.tree_leaves(node.meta.get("example_value")))
               for node in gm.graph.nodes)


class _DefaultBackend:
    """torch.compile's backend when none is given: "tpu" for graphs with tpu
    inputs (as the reference backend does), Inductor, configured exactly as
    torch.compile would (mode, options), for every other graph."""

    compiler_name = "inductor"

    def __init__(self):
        self._inductor: dict = {}

    def _inductor_for(self, mode, options):
        key = (mode, repr(sorted(options.items())) if options else None)
        if key not in self._inductor:
            self._inductor[key] = torch._TorchCompileInductorWrapper(mode or "default", options, None)
        return self._inductor[key]

    def __call__(self, gm, example_inputs, mode=None, options=None):
        if _on_tpu(gm, example_inputs):
            return tpu_backend(gm, example_inputs)
        return self._inductor_for(mode, options)(gm, example_inputs)

    def reset(self) -> None:
        for w in self._inductor.values():
            w.reset()

    def __repr__(self):
        return "torch_tpu.dynamo_backend._DefaultBackend()"


_default_backend = _DefaultBackend()


def _add_to_registry(registry) -> None:
    from . import fake_impls

    fake_impls.install()  # fake kernels Dynamo needs for tpu tensors
    registry._BACKENDS.setdefault("tpu", _LazyBackend())
    # Only where the user has not chosen another default (torch before 2.13
    # has no settable default backend: torch.compile() means inductor there).
    if hasattr(registry, "get_default_backend") and registry.get_default_backend() == "inductor":
        registry.set_default_backend(_default_backend)


def _add_device_interface(module) -> None:
    from .dynamo_device import TpuDeviceInterface

    # Dynamo fills its table (its own TpuInterface included) on first use;
    # filling it now lets ours replace that entry for good.
    if not module._device_initialized:
        module.init_device_reg()
    module.register_interface_for_device("tpu", TpuDeviceInterface)


def _add_inductor_refusal(module) -> None:
    if module.get_scheduling_for_device("tpu") is None:
        from .dynamo_device import InductorRefusal

        module.register_backend_for_device("tpu", InductorRefusal, InductorRefusal)


_HOOKS = {_REGISTRY: _add_to_registry, _DEVICE_INTERFACE: _add_device_interface,
          _INDUCTOR_CODEGEN: _add_inductor_refusal}


def install() -> None:
    _import_hooks.install(_HOOKS)


def compile_stats() -> dict:
    """Counters of torch.compile on tpu: `graphs` (ATen graphs compiled by the
    backend: forward, backward or inference), `graph_calls`, and of the
    runtime below it: `xla_compiles` (every XLA compile of the process,
    eager ops included), `fused_compiles` / `fused_cache_hits` (fused
    programs built / found in the cache), `quick_compiles` /
    `quick_rebuilds` (programs a graph's first call compiled quick: LLVM -O0,
    runtime/compile_tier.h / those of them rebuilt optimised at their third
    run; rebuilds are not in `xla_compiles`), `small_compiles` (XLA
    compiles of small programs, on XLA:CPU built with the elemental
    emitters: compile_tier.h) and `tiny_compiles` (those of them also
    built at LLVM -O0), `replays` (graph calls served by a
    replay of a captured fused program, no per-op dispatch), `captures`
    (replays recorded) and `replay_refused` (captures that could not be
    replayed). A graph called again with the same shapes adds to
    `graph_calls` and `fused_cache_hits` (second call) or `replays` (later
    calls) only. Graphs with symbolic sizes run padded to buckets
    (bounded_graph.py) count `bounded_calls` and `bounded_compiles` (their
    fused programs). `recompiles`: new programs of an op, op sequence or
    Dynamo frame that had one before with other inputs (`graph_recompiles`,
    `fused_recompiles`, `op_recompiles` by kind); `torch_tpu.recompile_log()`
    says why."""
    with _stats_lock:
        out = dict(_stats)
    from . import bounded_graph

    out.update(bounded_graph.stats)
    fusion = _C._fusion_stats()
    out.update(xla_compiles=_C._compile_count(), fused_compiles=fusion["compiles"],
               fused_cache_hits=fusion["cache_hits"], **replay_stats())
    quick = _C._quick_compile_stats()
    out.update(quick_compiles=quick["quick_compiles"], quick_rebuilds=quick["quick_rebuilds"],
               small_compiles=quick["small_compiles"], tiny_compiles=quick["tiny_compiles"])
    rec = _C._recompile_stats()
    out.update({k: rec[k] for k in ("recompiles", "graph_recompiles", "fused_recompiles", "op_recompiles")})
    return out
