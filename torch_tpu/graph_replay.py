"""Capture and replay of graph calls (docs/design.md, "torch.compile").

`ReplayCache(run_ops)` wraps a function that runs a graph's ops eagerly in
Fused Eager and flushes once (the torch.compile backend's graph runner). Per
argument signature (tensor geometry, dtype, device, storage sharing and
buffer state; other values as they are), a call is first run plainly; the
next one is run under a *capture*; if all its ops became one fused program
whose parameters are inputs, constants and random keys, later calls with
that signature *replay* it from C++: gather the inputs' buffers, run the
program once, wrap its results, with no per-op dispatch. A signature whose
capture was refused (a value read on the host, a CPU tensor uploaded, ...)
keeps running plainly.

The plain call before the capture is the one that compiles (and lets a
graph's first-call work, such as out= resizing, happen outside the capture).

TORCH_TPU_GRAPH_REPLAY=0 turns replay off (read on every call);
TORCH_TPU_LOG_REPLAY=1 prints why a capture was refused.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import OrderedDict
from typing import Any, Callable

import torch

from . import _C

__all__ = ["ReplayCache", "replay_stats", "replay_enabled"]

_stats = {"replays": 0, "captures": 0, "replay_refused": 0}
_lock = threading.Lock()
_MISSING = object()


def replay_enabled() -> bool:
    return os.environ.get("TORCH_TPU_GRAPH_REPLAY", "1") != "0"


def replay_stats() -> dict:
    """`replays` (calls served by a replay), `captures` (replays recorded),
    `replay_refused` (captures that could not be replayed)."""
    with _lock:
        return dict(_stats)


def _count(name: str) -> None:
    with _lock:
        _stats[name] += 1


# ---- output structure ------------------------------------------------------
# A spec mirrors the output: ("t", i) the i-th tpu tensor of the replay's
# results, ("a", i) the i-th argument itself, ("c", value) a constant,
# ("l"/"u", [specs]) a list / tuple.

class _NotReplayable(Exception):
    pass


def _flatten(out: Any, args: list, tensors: list) -> tuple:
    for i, a in enumerate(args):
        if out is a and isinstance(a, torch.Tensor):
            return ("a", i)
    if isinstance(out, torch.Tensor):
        if out.device.type != "tpu":
            raise _NotReplayable(f"an output is a {out.device.type} tensor")
        if out.layout != torch.strided:  # a sparse gradient: its indices and values are not one buffer
            raise _NotReplayable(f"an output is a {out.layout} tensor")
        tensors.append(out)
        return ("t", len(tensors) - 1)
    if isinstance(out, (list, tuple)) and type(out) in (list, tuple):
        return ("l" if type(out) is list else "u", [_flatten(o, args, tensors) for o in out])
    if out is None or isinstance(out, (int, float, bool, str, torch.dtype, torch.device)):
        return ("c", out)
    raise _NotReplayable(f"an output is a {type(out).__name__}")


def _build(spec: tuple, args: list, tensors: list) -> Any:
    kind, v = spec
    if kind == "t":
        return tensors[v]
    if kind == "a":
        return args[v]
    if kind == "c":
        return v
    items = [_build(s, args, tensors) for s in v]
    return items if kind == "l" else tuple(items)


def _device_of(args: list) -> int | None:
    for a in args:
        if isinstance(a, torch.Tensor) and a.device.type == "tpu":
            return a.device.index or 0
    return None


class _Entry:
    __slots__ = ("replay", "spec", "calls")

    def __init__(self):
        self.replay = None  # _C._GraphReplay once captured
        self.spec = None
        self.calls = 0      # plain calls so far


class ReplayCache:
    """Runs `run_ops(args)` (boxed: it may clear `args`), replaying it when
    it can. `max_entries` signatures are kept (least recently used out);
    `capture_after` plain calls of a signature precede its capture;
    `quick_first`: a signature's first call compiles quick."""

    def __init__(self, run_ops: Callable[[list], Any], max_entries: int = 64, capture_after: int = 1,
                 quick_first: bool = False):
        self.run_ops = run_ops
        self.quick_first = quick_first
        self.max_entries = max_entries
        self.capture_after = capture_after
        self._entries: OrderedDict = OrderedDict()
        self.refusals: dict = {}  # signature -> why it is not replayed

    def __call__(self, args: list) -> Any:
        if not replay_enabled():
            return self.run_ops(args)
        key = _C._replay_key(args)
        if key is None:
            return self.run_ops(args)
        entry = self._entries.get(key, _MISSING)
        if entry is _MISSING:
            entry = self._entries[key] = _Entry()
            while len(self._entries) > self.max_entries:
                self.refusals.pop(self._entries.popitem(last=False)[0], None)
        else:
            self._entries.move_to_end(key)
        if entry is None:  # refused before
            return self._run_plain(args)
        if entry.replay is not None:
            inputs = list(args)
            args.clear()  # boxed convention: the callee drops the caller's references
            out = _build(entry.spec, inputs, entry.replay.run(inputs))
            _count("replays")
            return out
        if entry.calls < self.capture_after or _C._replay_capture_active():
            # (Another graph being captured, e.g. on another thread: this
            # call runs plainly, and that capture will be refused.)
            entry.calls += 1
            return self._run_plain(args, quick=self.quick_first and entry.calls == 1)
        return self._capture(key, args)

    def _run_plain(self, args: list, quick: bool = False) -> Any:
        # Deferred eager work from before the call runs first, as the capture
        # does: every call of a signature then builds the same trace (in
        # Fused Eager it would otherwise join the graph's trace), so the
        # capture finds the fused program the plain calls compiled.
        _C._mark_step()
        # The inputs stay referenced until the graph's trace has run, as in
        # a capture: a buffer only the trace holds is donated to its results
        # (runtime/donation.h), so an input dropped early would make this
        # call's program differ from the capture's and compile twice.
        inputs = list(args)
        # A signature's first call compiles its programs quick (LLVM -O0 and
        # XLA:CPU's cheaper emitters, runtime/compile_tier.h): with chained
        # replays they run on this call and the capture only; a third run
        # rebuilds them optimised.
        prev = _C._set_quick_compile(True) if quick else None
        try:
            return self.run_ops(args)
        finally:
            if quick:
                _C._set_quick_compile(prev)
            del inputs

    def _capture(self, key: bytes, args: list) -> Any:
        inputs = list(args)  # run_ops clears args
        device = _device_of(inputs)
        if device is None:
            device = _C._current_device()
        cpu_versions = [(a, a._version) for a in inputs
                        if isinstance(a, torch.Tensor) and a.device.type != "tpu"]
        _C._replay_capture_begin(inputs, device)
        tensors: list = []
        try:
            out = self.run_ops(args)
            spec = _flatten(out, inputs, tensors)
            if any(a._version != v for a, v in cpu_versions):
                raise _NotReplayable("the graph modified a CPU tensor argument")
        except _NotReplayable as e:
            _C._replay_capture_abort()
            self._refuse(key, str(e))
            return out
        except BaseException:
            _C._replay_capture_abort()
            raise
        replay, why = _C._replay_capture_end(tensors)
        if replay is None:
            self._refuse(key, why)
            return out
        entry = _Entry()
        entry.replay, entry.spec = replay, spec
        self._entries[key] = entry
        _count("captures")
        return out

    def _refuse(self, key: bytes, why: str) -> None:
        self._entries[key] = None
        self.refusals[key] = why
        _count("replay_refused")
        if os.environ.get("TORCH_TPU_LOG_REPLAY", "0") not in ("", "0"):
            print(f"torch_tpu: graph not replayed: {why}", file=sys.stderr)
