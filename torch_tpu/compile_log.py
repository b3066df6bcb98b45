"""Graph-level recompile reasons for torch.compile on tpu.

The C++ engine says why an op or a fused program needed a new program
(runtime/recompile_log.h); only the backend knows about graphs. Dynamo
compiles a frame again when a guard fails (another shape, dtype, Python
value...); here each such compile is compared with the previous compile of
the same frame, by graph input name, and recorded in the same log as the
engine's entries: `torch_tpu.recompile_log()`, and one stderr line per graph
under TORCH_TPU_LOG_RECOMPILES=1 (which also turns on Dynamo's own
guard-failure log, `torch._logging.set_logs(recompiles=True)`).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import torch

from . import _C

__all__ = ["note_graph_compile", "recompile_log", "recompile_stats"]

_lock = threading.Lock()
# frame id -> (graphs compiled for it, {input name: {aspect: value}} of the last)
_frames: dict[int, tuple[int, dict]] = {}
_dynamo_logs_on = False


def _describe(value: Any) -> dict:
    if isinstance(value, torch.Tensor):
        return {"shape": str(list(value.shape)), "dtype": str(value.dtype).replace("torch.", ""),
                "strides": str(list(value.stride())), "device": str(value.device)}
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return {"value": f"symbolic ({value})"}
    return {"value": repr(value)}


def _diff(before: dict, now: dict) -> str:
    out = []
    for name, facts in now.items():
        old = before.get(name)
        if old is None:
            out.append(f"new input '{name}' " + ", ".join(f"{k} {v}" for k, v in facts.items()))
            continue
        for aspect, value in facts.items():
            if old.get(aspect) != value:
                out.append(f"input '{name}' {aspect} {old.get(aspect, '(none)')} -> {value}")
    out += [f"input '{name}' removed" for name in before if name not in now]
    if not out:
        return "same graph inputs (a guard on something else failed)"
    shown = out[:4]
    return "; ".join(shown) + (f"; (+{len(out) - 4} more)" if len(out) > 4 else "")


def _dynamo_reason() -> str | None:
    # Dynamo's own first guard failure for this compile, when it has one
    # (kept in its compile metrics; private, hence the fallback to None).
    try:
        from torch._dynamo.utils import get_metrics_context

        return get_metrics_context()._metrics.get("recompile_reason")
    except Exception:
        return None


def _enable_dynamo_log() -> None:
    global _dynamo_logs_on
    if _dynamo_logs_on or os.environ.get("TORCH_LOGS"):
        return  # TORCH_LOGS, if set, is the user's choice: set_logs would override it
    _dynamo_logs_on = True
    torch._logging.set_logs(recompiles=True)


def note_graph_compile(gm: torch.fx.GraphModule, example_inputs: list, name: str | None = None) -> None:
    """Records (and with TORCH_TPU_LOG_RECOMPILES=1 logs) why Dynamo handed
    the backend this graph: the first compile of a frame, or which graph input
    changed since the frame's previous compile. Called once per Dynamo graph,
    never per call. `name`: torch.compile's option, shown before the graph."""
    log = _C._log_recompiles()
    if log:
        _enable_dynamo_log()
    compile_id = getattr(gm, "meta", {}).get("dynamo_compile_id")
    if compile_id is None:
        from torch._guards import CompileContext

        compile_id = CompileContext.current_compile_id()
    frame = getattr(compile_id, "frame_id", None)
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    facts = {names[i] if i < len(names) else f"input {i}": _describe(x) for i, x in enumerate(example_inputs)}
    what = f"graph {compile_id if compile_id is not None else '?'}{_where(gm)}"
    if name:
        what = f"{name}: {what}"
    with _lock:
        count, before = _frames.get(frame, (0, None)) if frame is not None else (0, None)
        count += 1
        if frame is not None:
            _frames[frame] = (count, facts)
    if before is None:
        reason = "first compile" if count == 1 else "first compile seen by this backend"
    else:
        reason = _diff(before, facts)
        dynamo = _dynamo_reason()
        if dynamo:
            reason += f" (Dynamo: {dynamo.strip()})"
    _C._record_compile("graph", what, reason, count, "trace")
    if log:
        print(f"torch_tpu: compile {what} (#{count} for this frame): {reason}", file=sys.stderr, flush=True)


def _where(gm: torch.fx.GraphModule) -> str:
    # The user's function, from the first node that has a stack trace.
    for node in gm.graph.nodes:
        trace = node.meta.get("stack_trace")
        if trace:
            files = [ln.strip() for ln in trace.strip().splitlines() if ln.strip().startswith("File ")]
            if files:
                # 'File "x.py", line 3, in f' -> ' of f (x.py:3)'
                head = files[0]
                try:
                    path = head.split('"')[1]
                    line = head.split(", line ")[1].split(",")[0]
                    fn = head.rsplit(" in ", 1)[1]
                    return f" of {fn} ({os.path.basename(path)}:{line})"
                except IndexError:
                    return ""
    return ""


def recompile_log(n: int = 256) -> list:
    """The last `n` new programs (up to 256 are kept), oldest first, as dicts:
    `kind` ("op", "fused" or "graph"), `what` (the op, fused program or
    graph), `reason` ("first compile", or what changed since the previous
    program of the same op / op sequence / frame), `count` (this one's number
    for it: over 1 is a recompile) and `how` ("compile": XLA compiled it,
    "load": from the disk cache, "trace": a graph handed to the backend)."""
    return _C._recompile_log(n)


def recompile_stats() -> dict:
    """Counters: `recompiles` (new programs for an op, op sequence or frame
    that had one before with other inputs), by kind (`op_recompiles`,
    `fused_recompiles`, `graph_recompiles`), `programs` (all recorded), and
    `op_reloads` (programs evicted from the in-memory cache and built again:
    not recompiles)."""
    return _C._recompile_stats()
