"""Errors raised inside a torch.compile graph on tpu, told in the user's terms.

The backend runs a graph's ATen ops through the eager engine (Fused Eager),
so an op that has no lowering, or whose checks refuse its inputs, raises in
the graph's generated `forward` — a file named `<eval_with_key_N>` the user
never wrote. `annotate_graph_error` finds the graph node that raised (the
traceback's line in the generated code, through the GraphModule's line map)
and re-raises the same exception type with the ATen op and the user's source
lines (the node's `stack_trace`, which AOTAutograd carries over from Dynamo's
graph) added to the message. Only the error path pays for this.
"""

from __future__ import annotations

import torch

__all__ = ["annotate_graph_error", "annotate_node_error", "check_graph_lowerable", "node_for_error"]

_MARK = "\n\ntorch_tpu: raised by "


def node_for_error(gm: torch.fx.GraphModule, exc: BaseException) -> torch.fx.Node | None:
    """The node of `gm` whose line of the generated code raised `exc`, or None
    (the error came from elsewhere: the flush of the fused program, Python
    glue...)."""
    code = getattr(getattr(gm, "forward", None), "__code__", None)
    lineno_map = getattr(gm, "_lineno_map", None)
    if code is None or not lineno_map:
        return None
    lineno = None
    tb = exc.__traceback__
    while tb is not None:  # the innermost frame of the generated forward
        if tb.tb_frame.f_code is code:
            lineno = tb.tb_lineno
        tb = tb.tb_next
    if lineno is None:
        return None
    index = lineno_map.get(lineno - code.co_firstlineno)
    if index is None:
        return None
    nodes = list(gm.graph.nodes)
    return nodes[index] if 0 <= index < len(nodes) else None


def _user_lines(node: torch.fx.Node) -> str:
    trace = node.meta.get("stack_trace")
    if not trace:
        return "  (no source line recorded for this node)"
    return "\n".join("  " + ln for ln in trace.rstrip().splitlines())


def annotate_graph_error(gm: torch.fx.GraphModule, exc: BaseException) -> BaseException:
    """`exc` again, as the same exception type, its message naming the ATen op
    and the user's source line that produced the failing node; `exc` itself
    when the node cannot be found or the type cannot be rebuilt from a
    message. Meant for `raise annotate_graph_error(gm, exc)` in an except
    block."""
    if not isinstance(exc, Exception) or _MARK in str(exc):
        return exc
    try:
        node = node_for_error(gm, exc)
    except Exception:  # never hide the user's error behind ours
        return exc
    return annotate_node_error(node, exc) if node is not None else exc


def annotate_node_error(node: torch.fx.Node, exc: BaseException) -> BaseException:
    """As annotate_graph_error, for a caller that already knows the node
    (an interpreter loop such as bounded_graph's)."""
    if node.op != "call_function" or not isinstance(exc, Exception) or _MARK in str(exc):
        return exc
    msg = (f"{exc}{_MARK}{node.target} (graph node '{node.name}') in a graph compiled by "
           f"torch.compile(backend=\"tpu\"); from user code:\n{_user_lines(node)}")
    try:
        new = type(exc)(msg)
    except Exception:
        return exc
    new.__cause__ = None
    new.__suppress_context__ = True
    return new.with_traceback(exc.__traceback__)


# Dispatch keys whose kernel, if an op has one, runs instead of the boxed
# lowering fallback (the dispatcher prefers a backend kernel, then these
# composites, then the fallback).
# SparsePrivateUse1: the sparse tpu kernels (aten/sparse_coo.cpp), which an
# op reaches only with a sparse tensor among its arguments (the sparse
# gradient of an Embedding(sparse=True) in a backward graph).
_KERNEL_KEYS = ("PrivateUse1", "SparsePrivateUse1", "CompositeExplicitAutogradNonFunctional",
                "CompositeExplicitAutograd", "CompositeImplicitAutograd")


def _reaches_missing_lowering(op: torch._ops.OpOverload, rules: frozenset) -> bool:
    # Mirrors the C++ path exactly: no kernel for tpu or a composite means
    # the fallback, and the fallback needs a rule by op name ("add_" uses
    # "add"; lowering/registry.cpp find_rule). Anything unsure is "fine".
    if op.namespace != "aten":
        return False
    base = op._schema.name.split("::")[-1]
    if base in rules or (base.endswith("_") and not base.endswith("__") and base[:-1] in rules):
        return False
    try:
        return not any(torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), k) for k in _KERNEL_KEYS)
    except RuntimeError:
        return False


def _on_tpu(node: torch.fx.Node) -> bool:
    # An op sees the PrivateUse1 kernels only with a tpu tensor among its
    # inputs or outputs (the graph's fake values record their devices).
    vals = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]
    flat = torch.utils._pytree.tree_leaves(vals)
    return any(isinstance(v, torch.Tensor) and v.device.type == "tpu" for v in flat)


def check_graph_lowerable(gm: torch.fx.GraphModule) -> None:
    """Raises NotImplementedError, before anything runs, for the first op of
    an ATen graph that would reach the lowering fallback on tpu without a
    lowering rule (no tpu kernel, no composite, no rule: the op would raise
    the same error when the graph runs). Called by the backend's graph
    compiler, so Dynamo reports it while compiling, with the graph."""
    from . import _C

    if _C._cpu_fallback_enabled():  # such ops run on the CPU (torch_tpu.cpu_fallback)
        return
    rules = frozenset(_C._lowered_ops())
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        if _reaches_missing_lowering(node.target, rules) and _on_tpu(node):
            raise NotImplementedError(
                f"torch_tpu: {node.target._schema.name} has no tpu lowering (no lowering rule, no decomposition, "
                f"no tpu kernel); no CPU fallback is taken (torch_tpu.cpu_fallback(True) or TORCH_TPU_CPU_FALLBACK=1 "
                f"runs such ops on the CPU). Used by graph node '{node.name}' "
                f"({node.target}) from user code:\n{_user_lines(node)}")
