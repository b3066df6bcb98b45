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
import weakref
from typing import Any

import sympy
import torch
from torch.utils._pytree import tree_map

from . import _C
from .bounded_graph import _Call, bucket, pad_to
from .bounded_rules import Unsupported, dyn_dims, growth, plan, run_plain
from .warning_categories import PERFORMANCE as _PERFORMANCE, warn as _warn

__all__ = ["BoundedTensor", "mark_dynamic"]

_warned: set = set()


class BoundedTensor(torch.Tensor):
    """A tpu tensor of real shape `shape` stored padded (see the module).

    Itself it is the view of its real entries in the padded storage (real
    sizes, the padded value's strides and offset), so what reads a tensor's
    memory without an op sees the truth: data_ptr(), untyped_storage(),
    stride(), DLPack. Every op goes to __torch_dispatch__, which runs it on
    the padded value `_padded`. `_source`, on a result that torch defines
    as a view of a BoundedTensor, says how a write into it reaches what it
    views (_write_back)."""

    @staticmethod
    def __new__(cls, padded: torch.Tensor, shape, bounds: dict):
        bounds = dict(bounds)  # {dim: upper bound or None}
        marked = sorted(bounds)
        static = (padded.dtype, padded.device, tuple(None if d in bounds else int(s) for d, s in enumerate(shape)),
                  tuple((d, bounds[d]) for d in marked))
        return _bounded(padded, [int(s) for s in shape], bounds, static, tuple(int(shape[d]) for d in marked))

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

    def __reduce_ex__(self, proto):
        # torch.save and pickle keep the real entries as a plain tensor (a
        # loader knows no BoundedTensor, and weights_only refuses one)
        return self.unpadded().clone().__reduce_ex__(proto)

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = BoundedTensor(self._padded.clone(), self.shape, self._bounds)
        return memo[id(self)]

    def tolist(self):
        return self.cpu().tolist()

    @classmethod
    @torch._disable_dynamo
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _dispatch(func, args, kwargs or {})

    @classmethod
    @torch._disable_dynamo
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        # scaled_dot_product_attention is planned whole (bounded_rules.
        # _sdpa_rule): below this level it is a composite of a dozen ops,
        # each a Python dispatch on a padded tensor. Anything else (and an
        # attention the rule does not cover) goes on as for a tensor.
        if func is _SDPA and len(args) <= 6:
            out = _run_whole(_aten.scaled_dot_product_attention.default, args, kwargs or {})
            if out is not NotImplemented:
                return out
        if func is _TOLIST:  # the C++ method refuses subclasses
            return args[0].tolist()
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


_TOLIST = torch.Tensor.tolist


def _bounded(padded: torch.Tensor, shape: list, bounds: dict, static: tuple, marked: tuple) -> BoundedTensor:
    """A BoundedTensor from its parts. `static` is what a plan key reads of
    it (_plan_key): dtype, device, the sizes of its unmarked dims and its
    bounds; `marked`, the sizes of its marked dims."""
    r = torch.Tensor._make_subclass(BoundedTensor, padded.as_strided(shape, padded.stride(), padded.storage_offset()))
    r._padded = padded
    r._bounds = bounds  # shared by the results of one plan: never modified
    r._static = static
    r._marked = marked
    return r


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
#
# The warm path (a plan already made for this op, these arguments' layout
# and these size classes) is: one pass over the arguments building the
# plan key, a dict lookup, the padded op, and re-wrapping its results from
# a recipe made with the plan. Nothing there touches sympy, pytree, fake
# tensors or the real-sizes upload (a plain rule needs no real sizes).

# Ops that read values out to the host, or leave the device: they see the
# real entries.
_HOST = {"_local_scalar_dense", "_to_copy", "equal", "_copy_from"}
_host_of: dict = {}  # id(OpOverload) -> its name when in _HOST, else ""


def _unpad_all(args, kwargs):
    f = lambda a: a.unpadded() if isinstance(a, BoundedTensor) else a  # noqa: E731
    return tree_map(f, args), tree_map(f, kwargs)


def _fallback(func, args, kwargs, why: str | None):
    if why is not None and str(func) not in _warned:
        _warned.add(str(func))
        _warn(f"torch_tpu: {func} runs on real-sized values (compiled per size): {why}", category=_PERFORMANCE)
    args, kwargs = _unpad_all(args, kwargs)
    try:
        return func(*args, **kwargs)
    except RuntimeError:
        # the real entries are a strided view of the padded storage, which
        # a view merging dims may not be able to read in place: a reshape
        # copies (and _dispatch notes the copy as standing for the view)
        if func not in _RESHAPES:
            raise
        return torch.reshape(args[0], args[1])


def _dispatch(func, args, kwargs):
    host = _host_of.get(id(func))  # aten's OpOverloads live as long as the process
    if host is None:
        name = func._schema.name.split("::")[-1]
        host = _host_of[id(func)] = name if name in _HOST else ""
    if host and (host != "_to_copy" or _leaves_device(kwargs)):
        return _fallback(func, args, kwargs, None)
    try:
        out = _run_planned(func, args, kwargs)
    except Unsupported as e:
        out = _fallback(func, args, kwargs, str(e))
        if args and type(args[0]) is BoundedTensor and any(r.alias_info is not None for r in func._schema.returns) \
                and not _mutated(func):
            out = _note_views(out, args[0], func, args, kwargs)
    for pos, name in _mutated(func):
        written = args[pos] if pos < len(args) else kwargs.get(name)
        for t in written if isinstance(written, (list, tuple)) else (written,):
            if type(t) is BoundedTensor:
                # the write-back refreshes the copies of what it writes into,
                # t's own copies among them (through t, a copy of its source)
                if "_source" in t.__dict__:
                    _write_back(t)
                else:
                    _refresh_copies(t)
    return out


_mutated_of: dict = {}  # id(OpOverload) -> its written arguments, (position, name)


def _mutated(func) -> list:
    """The arguments `func` writes (in-place ops' self, out=)."""
    got = _mutated_of.get(id(func))
    if got is None:
        got = _mutated_of[id(func)] = [(i, a.name) for i, a in enumerate(func._schema.arguments)
                                       if a.alias_info is not None and a.alias_info.is_write]
    return got


def _note_views(res, src: "BoundedTensor", func, args, kwargs, index=None):
    """`res`, the result of view op `func` on `src`, noted as standing for
    that view when writing into it would not reach `src`: its padded value
    is a copy (a slice or select along a padded dim gathers; a view that
    the padded layout does not allow is a reshape), or it views such a
    copy. It is then a BoundedTensor (with no padded dims if it has none),
    so that in-place ops on it reach _dispatch, which writes back."""
    if isinstance(res, (list, tuple)):
        return type(res)(_note_views(r, src, func, args, kwargs, i) for i, r in enumerate(res))
    if not isinstance(res, torch.Tensor):
        return res
    padded = res._padded if type(res) is BoundedTensor else res
    if padded.untyped_storage()._cdata != src._padded.untyped_storage()._cdata:
        note = ("copy", src, func, args, kwargs, index)
    elif "_source" in src.__dict__:
        note = ("view", src)
    else:
        return res
    if type(res) is not BoundedTensor:
        res = BoundedTensor(res, res.shape, {})
    res._source = note
    if note[0] == "copy":
        global _prune_at
        if len(_copies_of) >= _prune_at:  # a decode loop's views die within their step
            for key in [k for k, v in _copies_of.items() if not v]:
                del _copies_of[key]
            _prune_at = max(256, 2 * len(_copies_of))  # scanned again only once it doubles
        _copies_of.setdefault(src._padded.untyped_storage()._cdata, weakref.WeakSet()).add(res)
    return res


# The copies standing for views (_note_views) by the padded storage they
# were taken from: a write into that storage, through the source or any
# true view of it, is carried into each copy still alive (_refresh_copies),
# so a view taken before the write reads the new values, as a view does.
# A copy's note holds its source, so no storage in here is freed (and its
# id reused) while a copy of it lives.
_copies_of: dict = {}
_prune_at = 256  # entries before the empty ones are dropped


def _refresh_copies(t: "BoundedTensor") -> None:
    """`t` was written in place: each copy standing for a view of its
    storage is taken again from its source and stored into the copy's own
    storage, then the copies of that copy."""
    key = t._padded.untyped_storage()._cdata
    copies = _copies_of.get(key)
    if not copies:
        if copies is not None:
            del _copies_of[key]
        return
    for c in list(copies):
        _, _, func, args, kwargs, index = c._source
        fresh = func(*args, **kwargs)
        fresh = fresh if index is None else fresh[index]
        fresh = fresh._padded if type(fresh) is BoundedTensor else fresh
        if fresh.shape != c._padded.shape:  # its source was resized: nothing to carry
            copies.discard(c)
            continue
        c._padded.copy_(fresh)
        _refresh_copies(c)


_RESHAPES = {torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default, torch.ops.aten.reshape.default}


def _write_back(t: "BoundedTensor") -> None:
    """`t` was written in place: carries the write to the tensors it
    stands for a view of (_note_views), through each copy to its source.
    The view is taken again at real sizes on the source's real entries (a
    true view of its padded storage) and the copy's real entries are
    copied into it: compiled per size, but writes into such views are not
    what a decode step does."""
    note = t.__dict__.get("_source")
    while note is not None:
        src = note[1]
        if note[0] == "copy":
            _, _, func, args, kwargs, index = note
            real_args, real_kwargs = _unpad_all(args, kwargs)
            if func in _RESHAPES:  # the same entries, in row-major order
                target, value = real_args[0], t.unpadded().reshape(real_args[0].shape)
            else:
                target = func(*real_args, **real_kwargs)
                target, value = (target if index is None else target[index]), t.unpadded()
            target.copy_(value)
            _refresh_copies(src)  # the other views copied from it (t's own copy is taken again too)
        t, note = src, src.__dict__.get("_source")


_SDPA = torch._C._nn.scaled_dot_product_attention
_aten = torch.ops.aten


def _run_planned(func, args, kwargs):
    """`func` run padded by its plan for these arguments' layout (made on
    first sight); raises Unsupported when it has no padded rule for them."""
    flat, spec = _flatten(args, kwargs)
    key, sizes = _plan_key(func, flat, spec)
    plan = _plans.get(key)
    if plan is None:
        plan = _plan(key, func, flat, spec)
    elif type(plan) is str:
        raise Unsupported(plan)
    return plan.run(flat, spec, sizes)


def _run_whole(func, args, kwargs):
    """`func` (a composite op) planned and run padded as one op, or
    NotImplemented when it cannot be (its decomposition then runs)."""
    try:
        return _run_planned(func, args, kwargs)
    except Unsupported:
        return NotImplemented


def _leaves_device(kwargs) -> bool:
    dev = kwargs.get("device")
    return dev is not None and torch.device(dev).type != "tpu"


_SEQS = (list, tuple, torch.Size)


def _flatten(args, kwargs):
    """The arguments as one flat list and the layout to rebuild them
    (_unflatten). An ATen schema nests at most one list deep (Tensor[],
    int[], Tensor?[]), so this is cheaper than pytree; deeper nesting is
    refused (the op then runs on the real-sized values)."""
    flat, layout = [], []
    for a in (*args, *kwargs.values()) if kwargs else args:
        t = type(a)
        if t in _SEQS:
            for x in a:
                if type(x) in _SEQS or type(x) is dict:
                    raise Unsupported("nested argument lists")
            layout.append((t, len(a)))
            flat.extend(a)
        else:
            if t is dict:
                raise Unsupported("a dict argument")
            layout.append(None)
            flat.append(a)
    return flat, (tuple(layout), tuple(kwargs) if kwargs else ())


def _unflatten(flat, spec):
    layout, names = spec
    out, i = [], 0
    for entry in layout:
        if entry is None:
            out.append(flat[i])
            i += 1
        else:
            out.append(entry[0](flat[i:i + entry[1]]))
            i += entry[1]
    n = len(layout) - len(names)
    return tuple(out[:n]), dict(zip(names, out[n:]))


_LITERALS = {float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format}


def _plan_key(func, flat, spec):
    """What the plan of an op depends on: the op, the arguments' layout,
    the marked sizes' classes (which are equal) and bounds, every other
    size, and the ints (those equal to a marked size by their class). Not
    the marked sizes' values, which are returned in class order."""
    classes = {}
    for a in flat:
        if type(a) is BoundedTensor:
            for s in a._marked:
                if s not in classes:
                    classes[s] = len(classes)
    key = [id(func), spec]
    for a in flat:
        t = type(a)
        if t is BoundedTensor:
            key.append((a._static, tuple([classes[s] for s in a._marked])))
        elif t is int:
            key.append(("c", classes[a]) if a in classes else a)
        elif isinstance(a, torch.Tensor):
            key.append((a.dtype, a.device, a.shape, a.stride()))
        elif t in _LITERALS:
            key.append((t, a))
        else:
            key.append((t, id(a)))
    return tuple(key), list(classes)


_plans: dict = {}  # plan key -> _Plan, or why the op cannot run padded (a str)


def _plan(key, func, flat, spec) -> "_Plan":
    """A new plan for `key` (the plan of an op the warm path has not seen)."""
    try:
        plan = _Plan(func, flat, spec)
    except Unsupported as e:
        # Only the message is kept: the exception's traceback holds the
        # frames, and they this op's tensors (kept alive, a deferred value
        # becomes a result of its fused program).
        plan = str(e)
    if len(_plans) >= 4096:  # a bound: the oldest plan goes
        del _plans[next(iter(_plans))]
    _plans[key] = plan
    if type(plan) is str:
        raise Unsupported(plan)
    return plan


class _Plan:
    """How one op runs padded for one plan key: the rule (bounded_rules)
    with the one-node graph it reads, where the arguments' padded values
    and padded sizes go, and how each result is re-wrapped."""

    def __init__(self, func, flat, spec):
        fake_flat, fout, self.node, self.rule, self.syms, upper_of = _new_plan(func, flat, spec)
        self.func = func
        self.plain = self.rule is run_plain
        self.uppers = [upper_of.get(s) for s in self.syms]
        self.index = {s: i for i, s in enumerate(self.syms)}
        self.bounded = [i for i, a in enumerate(flat) if type(a) is BoundedTensor]
        self.device = flat[self.bounded[0]]._static[1]
        self.device_index = self.device.index or 0
        # ints taken as a marked size run as its padded size
        self.symints = [(i, self.index[f.node.expr]) for i, f in enumerate(fake_flat) if isinstance(f, torch.SymInt)]
        self.wrap = _result_recipe(fout, self.index, upper_of, self.device)
        # torch returns a view of its first argument (select, slice, view,
        # ...): the padded result may be a copy (_note_views)
        self.view_op = any(r.alias_info is not None for r in func._schema.returns) and not _mutated(func)
        self.buckets = set()  # the padded sizes it ran at

    def run(self, flat, spec, sizes):
        padded = [bucket(v, u) for v, u in zip(sizes, self.uppers)]
        run_flat = list(flat)
        for i in self.bounded:
            run_flat[i] = flat[i]._padded
        for i, k in self.symints:
            run_flat[i] = padded[k]
        args, kwargs = _unflatten(run_flat, spec)
        if self.plain:
            out = self.func(*args, **kwargs)
        else:
            call = _HostSizes(dict(zip(self.syms, padded)), dict(zip(self.syms, sizes)), self.device, id(self))
            out = self.rule(call, self.node, args, kwargs)
        buckets = tuple(padded)
        if buckets not in self.buckets:
            # The first run at these buckets: its trace differs from the
            # previous step's in every op over a grown tensor, and the next
            # steps of the bucket will repeat it. It is compiled whole rather
            # than split around those ops (fusing_runtime.cpp), whose
            # segments would be compiled and run for this one step.
            self.buckets.add(buckets)
            _C._fuse_keep_trace_whole(self.device_index)
        res = self.wrap(out, sizes, [flat[i] for i in self.bounded])
        if self.view_op and type(flat[0]) is BoundedTensor:
            res = _note_views(res, flat[0], self.func, *_unflatten(flat, spec))
        return res


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
    fargs, fkwargs = _unflatten(fake_flat, spec)
    try:
        with mode:
            fout = func(*fargs, **fkwargs)
    except Exception as e:  # noqa: BLE001 -- the real run reports real errors
        raise Unsupported(f"no symbolic shapes ({type(e).__name__})") from None
    for s in real_of:
        if env.replacements.get(s, s).is_number:
            raise Unsupported("a marked size is used as a constant")
    return fake_flat, fout, real_of, upper_of


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
            error = str(e)  # not `e`: its traceback and this frame would form a cycle holding the tensors
    else:
        raise Unsupported(error)

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
    nargs, nkwargs = _unflatten(placeholders, spec)
    node = g.call_function(func, tuple(nargs), dict(nkwargs))
    node.meta["val"] = fout
    return fake_flat, fout, node, plan(node), list(real_of), upper_of


class _HostSizes(_Call):
    """The rules' view of the sizes in Fused Eager, where the real sizes
    are known on the host (a compiled graph's are data on the device, as
    its replay runs from C++ with new sizes). A real value is a Python int:
    a Scalar operand, which the op engine passes as a runtime parameter and
    never compiles in, so programs still depend on the buckets only. Masks
    and gather indices are built on the host and uploaded once per value
    (kept in a cache): the trace gets only the ops on the data, not the
    arange/compare/where chains that derive them from a sizes tensor.

    The uploads are kept per plan (`role`), not shared between plans: a
    trace takes one parameter per distinct buffer, so two values that are
    equal at one step and not at the next (the lengths of two buffers)
    would change the fused program's wiring, and compile it again, if they
    shared a buffer when equal."""

    def __init__(self, padded: dict, real: dict, device, role):
        super().__init__(padded, None, {})
        self.real = real  # {symbol: real int}
        self.device = device
        self.role = role

    def real_value(self, expr) -> int:
        if expr.is_Symbol:
            return self.real[expr]
        if expr.is_Integer:
            return int(expr)
        return int(expr.xreplace({s: sympy.Integer(v) for s, v in self.real.items()}))

    def real_tensor(self, expr) -> torch.Tensor:
        return _upload((self.role, expr), ("value", self.real_value(expr)), self.device)

    def mask(self, expr, like: torch.Tensor, dim: int) -> torch.Tensor:
        shape = [1] * like.dim()
        shape[dim] = like.shape[dim]
        return _upload((self.role, expr), ("mask", like.shape[dim], self.real_value(expr)), self.device).view(shape)

    def positions(self, size: int, start, step: int, hi: int, device) -> torch.Tensor:
        if not isinstance(start, int):
            return super().positions(size, start, step, hi, device)
        return _upload(self.role, ("positions", size, start, step, hi), device)

    def cat_index(self, size: int, pieces: list, device) -> torch.Tensor:
        return _upload(self.role, ("cat", size, tuple(pieces)), device)


@functools.lru_cache(maxsize=4096)
def _upload(role, what: tuple, device) -> torch.Tensor:
    """A small int64 or bool tensor the rules read (_HostSizes), built on the
    host and uploaded once per role and value: the ops of a decode step
    that run one plan share them, and a warm run finds them all here."""
    kind, *a = what
    if kind == "value":
        t = torch.tensor(a[0], dtype=torch.int64)
    elif kind == "mask":  # size, real: True at the real entries
        t = torch.arange(a[0]) < a[1]
    elif kind == "positions":  # size, start, step, hi
        t = (torch.arange(a[0]) * a[2] + a[1]).clamp(0, a[3])
    else:  # "cat": size, pieces ((real, padded), ...) -> _Call.cat_index
        t = torch.zeros(a[0], dtype=torch.int64)
        start_real = start_padded = 0
        for real, padded in a[1]:
            n = max(0, min(real, a[0] - start_real))
            t[start_real:start_real + n] = torch.arange(start_padded, start_padded + n)
            start_real += real
            start_padded += padded
    return t.to(device)


def _size_fn(e, index: dict):
    """A function of the real sizes (in class order) giving the value of
    the size expression `e`: plain arithmetic for a symbol plus a constant
    (every size a decode step makes), sympy for the rest."""
    if e.is_Integer:
        c = int(e)
        return lambda sizes: c
    if e.is_Symbol:
        k = index[e]
        return lambda sizes: sizes[k]
    if e.is_Add and len(e.args) == 2 and e.args[0].is_Integer and e.args[1].is_Symbol:
        c, k = int(e.args[0]), index[e.args[1]]
        return lambda sizes: sizes[k] + c
    syms = [(s, index[s]) for s in e.free_symbols]
    return lambda sizes: int(e.xreplace({s: sympy.Integer(sizes[k]) for s, k in syms}))


def _result_recipe(fake, index: dict, upper_of: dict, device):
    """A function (out, sizes, bounded args) -> the op's result as the user
    sees it: outputs with marked dims become BoundedTensors, re-padded to
    the bucket of their real size (a cat one longer stays in its bucket);
    an in-place op returns its (wrapped) argument; a symbolic int result is
    its real value."""
    if isinstance(fake, (list, tuple)):
        parts, kind = [_result_recipe(f, index, upper_of, device) for f in fake], type(fake)
        return lambda out, sizes, args: kind(p(o, sizes, args) for p, o in zip(parts, out))
    if isinstance(fake, torch.SymInt):
        f = _size_fn(fake.node.expr, index)
        return lambda out, sizes, args: f(sizes)
    if not isinstance(fake, torch.Tensor):
        return lambda out, sizes, args: out
    dyn = dyn_dims(fake)
    static = [None if d in dyn else int(s) for d, s in enumerate(fake.shape)]
    dims = []
    for d, e in dyn.items():
        g = growth(e)
        dims.append((d, _size_fn(e, index), _expr_upper(e, upper_of), g[1] if g else 0))
    bounds = {d: b for d, _, b, _ in dims}
    marked = sorted(bounds)
    key = (fake.dtype, device, tuple(static), tuple((d, bounds[d]) for d in marked))  # BoundedTensor._static

    def wrap(out, sizes, args):
        if not isinstance(out, torch.Tensor):
            return out
        for a in args:
            if a._padded is out:
                return a
        if not dims:
            return out
        shape, have = list(static), list(out.shape)
        want, room = list(have), list(have)
        for d, size, upper, grow in dims:
            shape[d] = n = size(sizes)
            want[d] = bucket(n, upper)
            room[d] = want[d] + grow  # see bounded_rules.growth
        if want != have:
            for d, w in enumerate(want):
                if w < have[d]:
                    out = out.narrow(d, 0, w)  # a view: the layout stays that of the op's result
            if want != list(out.shape):
                out = pad_to(out, want, [max(r, o) for r, o in zip(room, out.shape)])
        if out.dtype != key[0] or out.device != device:
            return BoundedTensor(out, shape, bounds)
        return _bounded(out, shape, bounds, key, tuple([shape[d] for d in marked]))

    return wrap


def _expr_upper(e, upper_of):
    """The bound a result's marked dim keeps: its symbols' (a cache marked
    up to 260 stays bounded by 260 as it grows; bucket() never goes below
    the real size)."""
    uppers = [upper_of.get(s) for s in e.free_symbols]
    return None if any(u is None for u in uppers) else max(uppers)
