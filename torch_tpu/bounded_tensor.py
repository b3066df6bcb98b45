"""Bounded dynamism in eager mode: `torch_tpu.mark_dynamic(t, dim, lo, hi)`.

torch.compile pads whole graphs (bounded_graph.py). Eager code has no
graph, so the padding travels with the tensor instead: in Fused Eager,
mark_dynamic returns a BoundedTensor, a tensor subclass that shows the real
size but holds a tpu tensor padded along the marked dims to the size's
bucket (the next power of two, capped at `hi`). Every op on it runs on the
padded value through the same rules as compiled graphs (bounded_rules.py):
the op is first run on fake tensors whose marked dims are symbols, which
gives the symbolic shapes the rules plan from; the real sizes reach the
device as data. Results keep the padding (a cat that grows a KV cache by one
token stays in its bucket), so the programs -- per-op or fused -- depend on
the buckets only, and a loop whose sizes grow one by one compiles once per
power of two instead of once per size.

An op the rules cannot run padded (or whose fake run pins a marked size to
a constant) runs on the real-sized values instead: correct, but compiled
for that size; each such op is named once in a warning. Reading the value
(`.cpu()`, `.item()`, printing) reads the real entries.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import sympy
import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from .bounded_graph import _Call, bucket, pad_to
from .bounded_rules import Unsupported, dyn_dims, growth, plan

__all__ = ["BoundedTensor", "mark_dynamic"]

_warned: set = set()


class BoundedTensor(torch.Tensor):
    """A tpu tensor of real shape `shape` stored padded (see the module)."""

    @staticmethod
    def __new__(cls, padded: torch.Tensor, shape, bounds: dict):
        r = torch.Tensor._make_wrapper_subclass(cls, shape, dtype=padded.dtype, device=padded.device)
        r._padded = padded
        r._bounds = dict(bounds)  # {dim: upper bound or None}
        return r

    def __init__(self, *args, **kwargs):
        pass

    def unpadded(self) -> torch.Tensor:
        """The real entries, as a view of the padded value."""
        t = self._padded
        for d in self._bounds:
            t = t.narrow(d, 0, self.shape[d])
        return t

    def __repr__(self, *, tensor_contents=None):
        return f"BoundedTensor({self.unpadded()!r}, padded to {tuple(self._padded.shape)})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _dispatch(func, args, kwargs or {})


def mark_dynamic(t: torch.Tensor, dim: int, lo: int | None = None, hi: int | None = None) -> torch.Tensor:
    """Marks dim `dim` of `t` as varying in [lo, hi].

    Always marks `t` for torch.compile (`torch._dynamo.mark_dynamic` with
    min/max): the graphs it enters compile per size bucket. In Fused Eager
    it also returns a BoundedTensor that runs padded to buckets; use the
    returned tensor in place of `t` (elsewhere it returns `t`)."""
    dim = dim + t.dim() if dim < 0 else dim
    if lo is not None and hi is not None and not lo <= t.shape[dim] <= hi:
        raise ValueError(f"mark_dynamic: size {t.shape[dim]} of dim {dim} is outside [{lo}, {hi}]")
    import torch._dynamo

    base = t.unpadded() if isinstance(t, BoundedTensor) else t
    torch._dynamo.mark_dynamic(base, dim, min=lo, max=hi)
    from . import get_eager_mode

    if get_eager_mode() != "fused" or t.device.type != "tpu":
        return t
    bounds = dict(t._bounds) if isinstance(t, BoundedTensor) else {}
    bounds[dim] = hi
    shape = list(t.shape)
    padded = pad_to(base, [bucket(s, bounds[d]) if d in bounds else s for d, s in enumerate(shape)])
    return BoundedTensor(padded, shape, bounds)


# ---- running one op ---------------------------------------------------------------

# Ops that read values out to the host, or leave the device: they see the
# real entries.
_HOST = {"_local_scalar_dense", "_to_copy", "equal", "_copy_from"}


def _unpad_all(args, kwargs):
    f = lambda a: a.unpadded() if isinstance(a, BoundedTensor) else a  # noqa: E731
    return tree_map(f, args), tree_map(f, kwargs)


def _fallback(func, args, kwargs, why: str | None):
    if why is not None and str(func) not in _warned:
        _warned.add(str(func))
        warnings.warn(f"torch_tpu: {func} runs on real-sized values (compiled per size): {why}")
    args, kwargs = _unpad_all(args, kwargs)
    return func(*args, **kwargs)


def _dispatch(func, args, kwargs):
    name = func._schema.name.split("::")[-1]
    if name in _HOST and (name != "_to_copy" or _leaves_device(kwargs)):
        return _fallback(func, args, kwargs, None)
    try:
        return _run_padded(func, args, kwargs)
    except Unsupported as e:
        return _fallback(func, args, kwargs, str(e))


def _leaves_device(kwargs) -> bool:
    dev = kwargs.get("device")
    return dev is not None and torch.device(dev).type != "tpu"


def _fake_run(func, flat, spec, use):
    """Runs `func` on fake tensors whose marked dims are symbols (one per
    distinct real size). The ints of `flat` at positions `use` are replaced
    by the symbol of their value. Raises Unsupported if the fake run fails
    or pins a symbol to a constant."""
    from torch._dynamo.source import ConstantSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    env = ShapeEnv()
    mode = FakeTensorMode(shape_env=env)
    symbols = {}  # real size -> SymInt
    real_of, upper_of = {}, {}

    def symbol(size: int, upper):
        if size not in symbols:
            s = env.create_symbol(size, source=ConstantSource(f"bounded_{size}"), dynamic_dim=DimDynamic.DYNAMIC)
            symbols[size] = env.create_symintnode(s, hint=size)
            real_of[s] = size
            upper_of[s] = upper
        elif upper is not None:
            s = symbols[size].node.expr
            upper_of[s] = upper if upper_of[s] is None else min(upper, upper_of[s])
        return symbols[size]

    fake_flat = []
    with mode:
        for a in flat:
            if isinstance(a, BoundedTensor):
                sizes = [symbol(s, a._bounds[d]) if d in a._bounds else s for d, s in enumerate(a.shape)]
                fake_flat.append(torch.empty(sizes, dtype=a.dtype, device=a.device))
            elif isinstance(a, torch.Tensor):
                fake_flat.append(torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device))
            else:
                fake_flat.append(a)
    for i in use:
        if flat[i] in symbols:
            fake_flat[i] = symbols[flat[i]]
    fargs, fkwargs = tree_unflatten(fake_flat, spec)
    try:
        with mode:
            fout = func(*fargs, **fkwargs)
    except Exception as e:  # noqa: BLE001 -- the real run reports real errors
        raise Unsupported(f"no symbolic shapes ({type(e).__name__})") from None
    for s in real_of:
        if env.replacements.get(s, s).is_number:
            raise Unsupported("a marked size is used as a constant")
    return fake_flat, fout, real_of, upper_of


def _plan_key(func, flat):
    """What the plan of an op depends on: the op, the marked sizes' classes
    (which are equal) and bounds, every other size, and the ints (those
    equal to a marked size by their class). Not the marked sizes' values."""
    classes = {}
    for a in flat:
        if isinstance(a, BoundedTensor):
            for d, s in enumerate(a.shape):
                if d in a._bounds:
                    classes.setdefault(s, len(classes))
    key = [func]
    for a in flat:
        if isinstance(a, BoundedTensor):
            key.append(("B", a.dtype, a.device, tuple(("c", classes[s], a._bounds[d]) if d in a._bounds else s
                                                     for d, s in enumerate(a.shape))))
        elif isinstance(a, torch.Tensor):
            key.append(("T", a.dtype, a.device, tuple(a.shape), a.stride()))
        elif type(a) is int and a in classes:
            key.append(("c", classes[a]))
        else:
            key.append((type(a), a if isinstance(a, (int, float, bool, str, type(None), torch.dtype, torch.device,
                                                     torch.layout, torch.memory_format)) else id(a)))
    return tuple(key), list(classes)


_plans: "OrderedDict" = None  # key -> (fake_flat, fout, node, rule, symbols in class order, upper_of)


def _plan(func, flat, spec):
    from collections import OrderedDict

    global _plans
    if _plans is None:
        _plans = OrderedDict()
    key, sizes = _plan_key(func, flat)
    hit = _plans.get(key)
    if hit is not None:
        _plans.move_to_end(key)
        if isinstance(hit, Unsupported):
            raise hit
        return hit, sizes
    try:
        entry = _new_plan(func, flat, spec)
    except Unsupported as e:
        entry = e
    _plans[key] = entry
    if len(_plans) > 4096:
        _plans.popitem(last=False)
    if isinstance(entry, Unsupported):
        raise entry
    return entry, sizes


def _new_plan(func, flat, spec):
    marked = {s for a in flat if isinstance(a, BoundedTensor) for d, s in enumerate(a.shape) if d in a._bounds}
    # Python ints equal to a marked size are taken to be that size (the
    # decomposition of matmul passes `x.shape` on). When one only equals it
    # by coincidence (a head dim of 8 while the cache is 8 long), the fake
    # run pins the symbol, and fewer ints are tried. Either way the result
    # is right: a symbol's real value is the int's.
    ints = [i for i, a in enumerate(flat) if type(a) is int and a in marked]
    tries = [ints] if len(ints) > 6 else [
        [i for k, i in enumerate(ints) if mask >> k & 1] for mask in sorted(range(2 ** len(ints)), key=lambda m: -bin(m).count("1"))
    ]
    error = None
    for use in tries:
        try:
            fake_flat, fout, real_of, upper_of = _fake_run(func, flat, spec, use)
            break
        except Unsupported as e:
            error = e
    else:
        raise error

    # One FX node for the op, with the fake values as metadata, so the rules
    # can plan it exactly as in a compiled graph.
    g = torch.fx.Graph()
    placeholders = []
    for i, f in enumerate(fake_flat):
        if isinstance(f, (torch.Tensor, torch.SymInt)):
            p = g.placeholder(f"a{i}")
            p.meta["val"] = f
            placeholders.append(p)
        else:
            placeholders.append(f)
    nargs, nkwargs = tree_unflatten(placeholders, spec)
    node = g.call_function(func, tuple(nargs), dict(nkwargs))
    node.meta["val"] = fout
    return fake_flat, fout, node, plan(node), list(real_of), upper_of


@functools.lru_cache(maxsize=256)
def _real_sizes(values: tuple, device) -> torch.Tensor:
    """The real sizes as a device tensor, uploaded once per distinct tuple:
    a decode step runs dozens of ops with the same sizes, and the rules
    only read it (masks, counts)."""
    return torch.tensor(list(values), dtype=torch.int64).to(device)


def _run_padded(func, args, kwargs):
    flat, spec = tree_flatten((args, kwargs))
    (fake_flat, fout, node, rule, syms, upper_of), sizes = _plan(func, flat, spec)
    real_of = dict(zip(syms, sizes))  # this call's marked sizes, class by class
    padded = [a._padded if isinstance(a, BoundedTensor) else a for a in flat]
    padded_sizes = {s: bucket(v, upper_of.get(s)) for s, v in real_of.items()}
    device = next(p.device for p in padded if isinstance(p, torch.Tensor) and p.device.type == "tpu")
    syms = list(real_of)
    real_t = _real_sizes(tuple(real_of[s] for s in syms), device)
    call = _Call(padded_sizes, real_t, {s: i for i, s in enumerate(syms)})
    run_flat = [padded_sizes[f.node.expr] if isinstance(f, torch.SymInt) else p for f, p in zip(fake_flat, padded)]
    rargs, rkwargs = tree_unflatten(run_flat, spec)
    out = rule(call, node, tuple(rargs), dict(rkwargs))
    return _wrap(out, fout, args, real_of, upper_of)


def _wrap(out, fake, args, real_of, upper_of):
    """Outputs with marked dims become BoundedTensors, re-padded to the
    bucket of their real size (a cat one longer stays in its bucket);
    in-place ops return their (wrapped) argument."""
    if isinstance(out, (list, tuple)):
        return type(out)(_wrap(o, f, args, real_of, upper_of) for o, f in zip(out, fake))
    if not isinstance(out, torch.Tensor):
        if isinstance(fake, torch.SymInt):
            return int(fake.node.expr.xreplace({s: sympy.Integer(v) for s, v in real_of.items()}))
        return out
    for a in args:
        if isinstance(a, BoundedTensor) and a._padded is out:
            return a
    subs = {s: sympy.Integer(v) for s, v in real_of.items()}
    dyn = dyn_dims(fake)
    shape = [int(s.node.expr.xreplace(subs)) if isinstance(s, torch.SymInt) else int(s) for s in fake.shape]
    if not dyn:
        return out
    bounds, want, room = {}, list(out.shape), list(out.shape)
    for d, e in dyn.items():
        bounds[d] = _expr_upper(e, upper_of)
        want[d] = bucket(shape[d], bounds[d])
        g = growth(e)
        room[d] = want[d] + (g[1] if g else 0)  # see bounded_rules.growth
    for d, w in enumerate(want):
        if w < out.shape[d]:
            out = out.narrow(d, 0, w)  # a view: the layout stays that of the op's result
    if want != list(out.shape):
        out = pad_to(out, want, [max(r, o) for r, o in zip(room, out.shape)])
    return BoundedTensor(out, shape, bounds)


def _expr_upper(e, upper_of):
    """The bound a result's marked dim keeps: its symbols' (a cache marked
    up to 260 stays bounded by 260 as it grows; bucket() never goes below
    the real size)."""
    uppers = [upper_of.get(s) for s in e.free_symbols]
    return None if any(u is None for u in uppers) else max(uppers)
