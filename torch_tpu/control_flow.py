"""torch's `scan`, `map` and `while_loop` on tpu tensors as one
`stablehlo.while`, and `cond` as one `stablehlo.if` (docs/design.md, "Loops as one
stablehlo.while").

torch runs these higher-order ops, eagerly and inside a `torch.compile` graph
alike, through their dense kernels: a Python loop calling the body once per
step. On tpu that unrolls a scan into its steps' ops (a program that grows
with the length) and reads a while_loop's predicate on the host at every
step. Here the body runs once, on placeholders, while the C++ runtime records
its ops (runtime/regions.h); the engine builds the loop program around the
recorded body (exec/region_loop.h), and the loop runs as one op of the
`tpu_jax` library whose program text is that module. A body the loop cannot
hold (it reads a value on the host, checks data on the device, draws random
numbers, needs gradients) runs through torch's dense kernel as before. An
op in the body that checks data on the device (an index range) keeps its
check: the loop carries each flag's first failure out, and it is reported at
the next synchronisation like any op's.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Sequence

import torch
from torch._C import DispatchKey
from torch._higher_order_ops.cond import cond_op, cond_op_dense
from torch._higher_order_ops.map import map_dense, map_impl
from torch._higher_order_ops.scan import scan_op, scan_op_dense
from torch._higher_order_ops.while_loop import while_loop_dense, while_loop_op

from . import _C
from .jax_op import _TORCH_TO_JAX, JaxOp

_EAGER_FUSED = 2  # runtime::EagerMode::kFused
# TORCH_TPU_LOOPS=0: scan, map, while_loop and cond run through torch's dense kernels (to compare).
_ENABLED = os.environ.get("TORCH_TPU_LOOPS", "1") != "0"
_EAGER_DEBUG = 1

# spec -> (module text, [(shape, jax dtype name)] of the 1-D results). Kept for
# the process: the engine asks again for the text when its program cache
# dropped the program.
_PROGRAMS: dict[str, tuple[str, list]] = {}


class _LoopOp(JaxOp):
    """`tpu_jax::tpu_loop(Tensor[] tensors, str spec) -> Tensor[]`: runs the
    module registered under `spec`. Called below autograd only."""

    def __init__(self):
        super().__init__("tpu_loop", None, _flat=lambda spec: None)

    def eval_shape(self, spec: str, avals):
        return _PROGRAMS[spec][1]

    def lower(self, spec: str, avals) -> str:
        return _PROGRAMS[spec][0]


_LOOP = _LoopOp()
stats = {"loops": 0, "dense": 0}  # loops run as one program, bodies refused (tests)
last_refusal = ""


def _run(text: str, operands: list[torch.Tensor], results: list[tuple[torch.Size, torch.dtype]], body):
    """Runs the loop program; returns its results shaped as `results`. The
    body's check flags (its last results) join the device's pending checks."""
    flags = [(torch.Size([2]), torch.int64)] * body.num_checks
    spec = "loop:" + hashlib.sha1(text.encode()).hexdigest()
    if spec not in _PROGRAMS:
        _PROGRAMS[spec] = (text, [((_numel(s),), _TORCH_TO_JAX[dt]) for s, dt in results + flags])
    flat = _LOOP.op(operands, spec)
    stats["loops"] += 1
    if flags:
        _C._region_defer_checks(body, flat[len(results):])
    return [f.view(s) for f, (s, _) in zip(flat, results)]


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _flat(t: torch.Tensor) -> torch.Tensor:
    """The tensor as a fresh-enough 1-D array: its storage holds exactly its elements."""
    t = t.contiguous()
    if t.storage_offset() != 0 or t.untyped_storage().nbytes() != t.numel() * t.element_size():
        t = t.clone()
    return t.view(-1)


def _refusal(tensors: Sequence[Any]) -> str:
    """Why these loop inputs run densely, or ''."""
    if not _ENABLED:
        return "TORCH_TPU_LOOPS=0"
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            return f"a loop input is a {type(t).__name__}, not a tensor"
    if not tensors or any(t.device.type != "tpu" for t in tensors):
        return "not every loop input is a tpu tensor"
    if len({t.device for t in tensors}) != 1:
        return "loop inputs on several devices"
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return "a loop input requires grad"
    if any(t.dtype not in _TORCH_TO_JAX for t in tensors):
        return "a dtype the loop program has no type for"
    if _C._get_eager_mode() == _EAGER_DEBUG:
        return "Debug Eager runs every op on its own"
    if torch._C._is_any_autocast_enabled():
        return "autocast is on"
    return ""


class _Refused(Exception):
    pass


def _record(fn, args: list, device: int):
    """Runs `fn(*args)` while the runtime records its ops, its tensor
    arguments being placeholders (loop inputs 0, 1, ... in order; ints, such
    as the sizes Dynamo passes, are given as they are); returns the recorded
    body, its outputs' shapes and dtypes, and whether `fn` returned one tensor
    rather than a sequence."""
    placeholders = [a for a in args if isinstance(a, torch.Tensor)]
    rng = torch.tpu.get_rng_state(device)
    mode = _C._get_eager_mode()
    _C._region_begin(device)
    try:
        for k, ph in enumerate(placeholders):
            _C._region_placeholder(ph, k)
        if mode != _EAGER_FUSED:
            _C._set_eager_mode(_EAGER_FUSED)
        with torch.no_grad():
            outs = fn(*args)
        single = isinstance(outs, torch.Tensor)
        if single:
            outs = (outs,)
        outs = list(outs)
        if not all(isinstance(o, torch.Tensor) and o.device.type == "tpu" for o in outs):
            raise _Refused("the body returned something other than tpu tensors")
        # Each result in a storage of its own that the body computed (an
        # input returned unchanged would otherwise be a placeholder).
        flat = [o.clone(memory_format=torch.contiguous_format).view(-1) for o in outs]
    except BaseException:
        _C._region_abort(device)
        if mode != _EAGER_FUSED:
            _C._set_eager_mode(mode)
        raise
    body = _C._region_end(device, flat)
    if mode != _EAGER_FUSED:
        _C._set_eager_mode(mode)
    if body.refused:
        raise _Refused(body.refused)
    if not torch.equal(torch.tpu.get_rng_state(device), rng):
        # Each step would draw the same numbers.
        raise _Refused("the body draws random numbers")
    return body, [(o.shape, o.dtype) for o in outs], single


def _placeholder(shape, dtype, device) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device=device)


def _stand_in(a, device):
    """A placeholder for a tensor argument of a body; an int (a size Dynamo passes) as it is."""
    return _placeholder(a.shape, a.dtype, device) if isinstance(a, torch.Tensor) else a


def _tensors(args) -> list:
    """The arguments that are loop inputs: all but ints."""
    return [a for a in args if not isinstance(a, int)]


def _dense(why: str):
    global last_refusal
    last_refusal = why
    stats["dense"] += 1


def _scan_loop(what: str, fn, init: list, xs: list, additional: list, dense):
    """scan (and map, a scan without carries) as one loop: fn(*carries, *one
    slice of each x, *additional) -> (next carries, per-step outputs).
    Returns the last carries and the stacked outputs, or dense(why)."""
    why = _refusal(init + xs + _tensors(additional))
    if not why and not xs:
        why = f"nothing to {what} over"
    if not why and xs[0].shape[0] == 0:
        why = f"an empty {what}"
    if why:
        return dense(why)
    device = xs[0].device
    length = int(xs[0].shape[0])
    x_slices = [_placeholder(x.shape[1:], x.dtype, device) for x in xs]
    try:
        body, outs, _ = _record(fn, [_stand_in(c, device) for c in init] + x_slices
                                + [_stand_in(a, device) for a in additional], device.index)
    except _Refused as e:
        return dense(str(e))
    m = len(init)
    carries = [_flat(c) for c in init]
    x_flat = [_flat(x) for x in xs]
    adds = [_flat(a) for a in _tensors(additional)]
    text, outside = _C._scan_program(body, carries, [p.view(-1) for p in x_slices], adds, length, device.index)
    results = outs[:m] + [(torch.Size([length, *s]), dt) for s, dt in outs[m:]]
    return _run(text, carries + x_flat + adds + list(outside), results, body)


@scan_op.py_impl(DispatchKey.PrivateUse1)
def _scan_tpu(combine_fn, init, xs, additional_inputs):
    def dense(why):
        _dense(why)
        return scan_op_dense(combine_fn, init, xs, additional_inputs)

    return tuple(_scan_loop("scan", combine_fn, list(init), list(xs), list(additional_inputs), dense))


@while_loop_op.py_impl(DispatchKey.PrivateUse1)
def _while_loop_tpu(cond_fn, body_fn, carried_inputs, additional_inputs):
    carried, additional = list(carried_inputs), list(additional_inputs)
    adds = _tensors(additional)
    why = _refusal(carried + adds)
    if not why and not carried:
        why = "nothing carried"
    if why:
        _dense(why)
        return while_loop_dense(cond_fn, body_fn, carried_inputs, additional_inputs)
    device = carried[0].device
    try:
        def args():
            return [_stand_in(a, device) for a in carried + additional]

        cond, cond_out, _ = _record(cond_fn, args(), device.index)
        if len(cond_out) != 1 or cond_out[0][1] != torch.bool or _numel(cond_out[0][0]) != 1:
            raise _Refused("cond_fn does not return one bool")
        if cond.num_checks:
            raise _Refused("cond_fn checks data on the device (an index, an integer division)")
        body, body_out, _ = _record(body_fn, args(), device.index)
        if [(tuple(s), d) for s, d in body_out] != [(tuple(t.shape), t.dtype) for t in carried]:
            raise _Refused("the body changes a carried value's shape or dtype")
    except _Refused as e:
        _dense(str(e))
        return while_loop_dense(cond_fn, body_fn, carried_inputs, additional_inputs)
    c_flat = [_flat(t) for t in carried]
    a_flat = [_flat(t) for t in adds]
    text, outside = _C._while_program(cond, body, c_flat, a_flat, device.index)
    return tuple(_run(text, c_flat + a_flat + list(outside), [(t.shape, t.dtype) for t in carried], body))


@cond_op.py_impl(DispatchKey.PrivateUse1)
def _cond_tpu(pred, true_fn, false_fn, operands):
    # One stablehlo.if: no host read of the predicate (a graph holding the
    # cond stays replayable).
    operands = list(operands)
    tensors = _tensors(operands)
    why = _refusal([pred] + tensors) if isinstance(pred, torch.Tensor) else "the predicate is a Python value"
    if not why and pred.numel() != 1:
        why = "the predicate has several elements"
    if why:
        _dense(why)
        return cond_op_dense(pred, true_fn, false_fn, operands)
    device = pred.device

    def args():
        return [_stand_in(o, device) for o in operands]

    try:
        on_true, true_out, single = _record(true_fn, args(), device.index)
        on_false, false_out, _ = _record(false_fn, args(), device.index)
        if [(tuple(s), d) for s, d in true_out] != [(tuple(s), d) for s, d in false_out]:
            raise _Refused("the branches return different shapes or dtypes")
        if on_true.num_checks or on_false.num_checks:
            raise _Refused("a branch checks data on the device (an index, an integer division)")
    except _Refused as e:
        _dense(str(e))
        return cond_op_dense(pred, true_fn, false_fn, operands)
    flat = [_flat(t) for t in tensors]
    text, outside = _C._cond_program(on_true, on_false, flat, device.index)
    res = _run(text, [_flat(pred.to(torch.bool))] + flat + list(outside), true_out, on_true)
    return res[0] if single else tuple(res)


@map_impl.py_impl(DispatchKey.PrivateUse1)
def _map_tpu(f, xs, pos_args):
    # A scan without carries: one step's slice of each mapped input in, one
    # slice of each stacked output out.
    def dense(why):
        _dense(why)
        return map_dense(f, xs, pos_args)

    return _scan_loop("map", f, [], list(xs), list(pos_args), dense)
