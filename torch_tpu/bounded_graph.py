"""Bounded dynamism for torch.compile graphs with symbolic sizes.

Dynamo traces a graph with symbolic sizes when a dim is marked dynamic
(`torch._dynamo.mark_dynamic(t, dim, min=, max=)`, `torch_tpu.mark_dynamic`)
or after it saw a size change. Run at its exact sizes, such a graph would
still compile one XLA program per size: an LLM generating text with a
growing KV cache would compile its decode step for every token.

Instead every symbol is padded up to a bucket, the next power of two capped
at the symbol's upper bound, and the graph's tensors are padded to the
bucketed sizes. The programs then depend on the buckets alone: a size that
moves inside its bucket compiles nothing, so a cache growing to 256 compiles
its decode step about log2(256) times. The padded entries hold garbage;
bounded_rules.py rewrites the ops that would let it reach real entries
(reductions, contractions, cat, slicing along a padded dim) with masks built
from the real sizes. Those reach the device as one small int64 tensor per
call: values, not shapes, so they are in no program's key. Results are views
of the padded values narrowed to the real sizes; when such a view comes back
as an input (the next step's KV cache), its storage usually already holds
the padded layout and no copy is made.

Only inference graphs are padded (training graphs with symbolic sizes run
at their exact sizes). A graph with an op bounded_rules cannot run padded
runs at its exact sizes too, with a one-line warning naming the op.
"""

from __future__ import annotations

import functools
import math
import operator
from typing import Any, Callable

import sympy
import torch

from . import _C, auto_bucket
from .compile_errors import annotate_node_error
from .graph_replay import ReplayCache
from .bounded_rules import Unsupported, dyn_dims, fixed_sizes, growth, plan, size_exprs, sym_expr, unsafe_int_use
from .warning_categories import PERFORMANCE as _PERFORMANCE, warn as _warn

_FUSED = 2  # runtime::EagerMode::kFused

# compile_stats() reports these: calls of padded graphs, and the fused
# programs compiled for them (one per bucket combination, ideally).
stats = {"bounded_calls": 0, "bounded_compiles": 0}


def bucket(value: int, upper: int | None) -> int:
    """The padded size for a symbol's value: the next power of two, capped
    at the symbol's upper bound (never below the value)."""
    p = 1 << max(0, int(value) - 1).bit_length()
    if upper is not None:
        p = min(p, upper)
    return max(p, int(value))


def _bound(sym, shape_env, side: str) -> int | None:
    """The symbol's lower or upper bound ("lower"/"upper") from Dynamo's
    value ranges, None when unbounded or unknown."""
    try:
        value = getattr(shape_env.var_to_range[sym], side)
    except (AttributeError, KeyError):
        return None
    try:
        return int(value) if value.is_finite else None
    except (TypeError, ValueError, AttributeError):
        return None


class _Call:
    """Per-call state the rules use: padded sizes and real sizes on device."""

    def __init__(self, padded: dict, real: torch.Tensor, index: dict):
        self.padded = padded  # {symbol: padded int}
        self._real = real  # int64 tpu tensor of the real values, one per symbol
        self._index = index  # {symbol: position in _real}
        self._cache = {}

    def padded_int(self, expr) -> int:
        if expr.is_Symbol:  # the common cases without sympy's substitution
            return self.padded[expr]
        if expr.is_Integer:
            return int(expr)
        return int(expr.xreplace({s: sympy.Integer(v) for s, v in self.padded.items()}))

    def padded_shape(self, val) -> list:
        return [s if type(s) is int else self.padded_int(s) for s in size_exprs(val)]

    def real_value(self, expr) -> torch.Tensor:
        """The real value of a symbolic expression, as a 0-dim int64 tpu tensor."""
        key = ("v", expr)
        if key not in self._cache:
            self._cache[key] = self._eval(expr)
        return self._cache[key]

    def _eval(self, e):
        if e.is_Symbol:
            return self._real.select(0, self._index[e])
        if e.is_Integer:
            return int(e)
        args = [self._eval(a) for a in e.args]
        if e.is_Add:
            out = args[0]
            for a in args[1:]:
                out = out + a
            return out
        if e.is_Mul:
            out = args[0]
            for a in args[1:]:
                out = out * a
            return out
        name = type(e).__name__
        if name == "FloorDiv":
            return torch.div(args[0], args[1], rounding_mode="floor")
        if name in ("Mod", "PythonMod"):  # sizes are >= 0: both are Python's %
            return torch.remainder(args[0], args[1])
        if e.is_Pow and e.exp.is_Integer and int(e.exp) > 0:
            return args[0] ** int(e.exp)
        if name in ("Max", "Min"):
            out = torch.as_tensor(args[0], device=self._real.device)
            for a in args[1:]:
                out = (torch.maximum if name == "Max" else torch.minimum)(out, torch.as_tensor(a, device=out.device))
            return out
        raise Unsupported(f"symbolic size expression {e}")

    def real_tensor(self, expr) -> torch.Tensor:
        """real_value as a 0-dim int64 tpu tensor (for a Tensor argument)."""
        return self.real_value(expr)

    def mask(self, expr, like: torch.Tensor, dim: int) -> torch.Tensor:
        """True at the real entries of padded dim `dim` of `like`, shaped to
        broadcast against it."""
        size = like.shape[dim]
        key = ("m", expr, size, like.dim(), dim)
        if key not in self._cache:
            m = torch.arange(size, device=like.device) < self.real_value(expr)
            shape = [1] * like.dim()
            shape[dim] = size
            self._cache[key] = m.reshape(shape)
        return self._cache[key]

    def positions(self, size: int, start, step: int, hi: int, device) -> torch.Tensor:
        """arange(size) * step + start, clamped to [0, hi]: the int64 index
        of a gather (`start` may be a real value)."""
        return (torch.arange(size, device=device) * step + start).clamp(0, hi)

    def cat_index(self, size: int, pieces: list, device) -> torch.Tensor:
        """The gather index that puts pieces (real size, padded size) of a
        joined tensor of `size` entries end to end at their real sizes;
        entries past the real total read entry 0."""
        pos = torch.arange(size, device=device)
        index = torch.zeros_like(pos)
        start_real = 0  # where the current piece starts in the result (a real size)
        start_padded = 0  # and in the joined tensor
        for real, padded in pieces:
            inside = (pos >= start_real) & (pos < start_real + real)
            index = torch.where(inside, pos - start_real + start_padded, index)
            start_real = start_real + real
            start_padded += padded
        return index


class BoundedGraph:
    """Runs an inference graph with symbolic sizes padded to buckets. Raises
    Unsupported from the constructor when the graph cannot be padded."""

    def __init__(self, gm: torch.fx.GraphModule, exact: Callable[[list], Any], options: Any = None):
        self.gm = gm
        self.options = options  # compile_options.CompileOptions: its buckets, if it chooses them
        self.exact_runner = exact  # runs a call whose padding would not hold (_padding_for)
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.symbols = []  # sympy symbols, in the order of the real-values tensor
        self.upper, self.lower = {}, {}
        self.sources = {}  # symbol -> (placeholder index, dim or None)
        # Only sizes are bucketed: a symbolic stride (Dynamo adds one when a
        # strided view comes in) or other symbolic int input stays as given
        # and must not shape anything.
        for i, n in enumerate(self.placeholders):
            val = n.meta.get("val")
            if isinstance(val, torch.Tensor):
                for d, e in dyn_dims(val).items():
                    if e.is_Symbol:
                        self._add_symbol(e, (i, d), val.shape[d].node.shape_env)
        # A symbolic int input that is no input's size (Dynamo with
        # dynamic=True makes int arguments symbols: a length, a window, a
        # count) may still shape tensors. When every use of it is one a
        # padded size serves (bounded_rules.unsafe_int_use: the int sizes
        # a result, `arange(slen)` in XLM's get_masks, or a rule reads its
        # real value, `x[:, -w:]`), it is bucketed like a size, even in a
        # graph with no symbolic input tensor; otherwise it joins as an
        # exact symbol (`BoundedGraph.exact`): never bucketed, its padded
        # value is its value (masks all true), so programs depend on it as
        # at exact sizes while the other symbols stay bucketed. So does a
        # symbol of an input's strides (Dynamo's, for strided inputs): it
        # describes a layout, not a size.
        self.exact = set()
        strides = set()
        for n in self.placeholders:
            val = n.meta.get("val")
            if isinstance(val, torch.Tensor):
                for st in list(val.stride()) + [val.storage_offset()]:
                    e = sym_expr(st)
                    if e is not None:
                        strides |= e.free_symbols
        unsafe = []
        for i, n in enumerate(self.placeholders):
            val = n.meta.get("val")
            e = sym_expr(val)
            if e is None or not e.is_Symbol or e in self.sources:
                continue
            why = "a stride" if e in strides else unsafe_int_use(gm, e)
            self._add_symbol(e, (i, None), val.node.shape_env)
            if why is not None:
                self.exact.add(e)
                unsafe.append(f"{e}: {why}")
        if not set(self.symbols) - self.exact:
            raise Unsupported("no symbolic sizes" + (f" (exact ints {'; '.join(unsafe)})" if unsafe else ""))
        for n in gm.graph.nodes:
            if n.op == "placeholder":
                continue
            val = n.meta.get("val")
            for e in _exprs(val):
                missing = e.free_symbols - set(self.symbols)
                if missing:
                    raise Unsupported(f"size {e} has symbols that no input gives")
                _check_evaluable(e)
        # Sizes that may shrink when a symbol grows ((n + 1) mod w: the
        # tokens past a compressor's last full window, DeepseekV4): at the
        # padded sizes such a size can be smaller than at the real ones, and
        # a padded run could not hold the real result. Checked per call.
        # Only tensor sizes: a symbolic int (a pad amount) that is smaller
        # padded is the rules' business (they use its real value).
        self.non_monotone = sorted({e for n in gm.graph.nodes for e in _exprs(n.meta.get("val"), ints=False)
                                    if not _monotone(e)}, key=str)
        # Sizes with one value at every size (bounded_rules.fixed_sizes: a
        # length rounded up to its chunk, or a size Dynamo's guards fix):
        # the rules run them as static dims, which a guard broken at the
        # padded sizes would make wrong. Checked per call as well.
        self.fixed = {e: v for n in gm.graph.nodes for e, v in _fixed(n.meta.get("val")).items()}
        self._holds = {}  # real sizes -> the padded sizes to run at, or None (_padding_for)
        self._warned_shrink = self._warned_fixed = False
        self.steps = []
        for n in gm.graph.nodes:
            if n.op == "call_function":
                self.steps.append((n, _copy_into_input if _writes_padded_input(n) else plan(n)))
            elif n.op == "get_attr" and not dyn_dims(n.meta.get("val")):
                # a constant of the graph (a lifted `torch.tensor([])`, say):
                # static, it runs padded as it is
                self.steps.append((n, _get_attr))
            elif n.op not in ("placeholder", "output"):
                raise Unsupported(f"graph node {n.op}")
        self.output = next(n for n in gm.graph.nodes if n.op == "output")
        # Inputs the graph writes (copy_ into a padded placeholder): the
        # padded run returns the written values, and __call__ copies their
        # real entries into the caller's tensors (the padded input may be a
        # view past them or a copy: bounded_rules._copy_into_input_rule).
        self.mutations = [(self.placeholders.index(n.args[0]), n) for n, rule in self.steps
                          if rule is _copy_into_input]
        self.growth = _growth(self.output.args[0], self.symbols)
        # Results that are views of an input: AOTAutograd rebuilds each from
        # the caller's tensor with the geometry of what this runner returns,
        # so they are returned as the same views of the caller's tensor at
        # the real sizes (the padded run's result is a fresh buffer, whose
        # geometry, room included, would read out of the caller's storage).
        results = self.output.args[0]
        self.aliases = {k: c for k, r in enumerate(results if isinstance(results, (list, tuple)) else [])
                        if (c := _input_view_chain(r, self.placeholders)) is not None}
        self.replays = ReplayCache(self._run_padded)

    def _add_symbol(self, sym, source, shape_env) -> None:
        if sym in self.sources:
            return
        self.sources[sym] = source
        self.symbols.append(sym)
        self.upper[sym] = _bound(sym, shape_env, "upper")
        self.lower[sym] = _bound(sym, shape_env, "lower")

    def _bucket(self, value: int, sym) -> int:
        """bucket(), or the padded size torch.compile's options choose."""
        upper = self.upper.get(sym)
        if self.options is not None:
            chosen = self.options.bucket(value, self.lower.get(sym), upper)
            if chosen is not None:
                return chosen
        return bucket(value, upper)

    def real_sizes(self, args: list) -> dict:
        out = {}
        for sym, (i, d) in self.sources.items():
            out[sym] = int(args[i]) if d is None else int(args[i].shape[d])
        return out

    def __call__(self, args: list) -> Any:
        real = self.real_sizes(args)
        # (an int symbol below 1 stays as it is: bucket() is for sizes)
        padded = {s: v if s in self.exact or v < 1 else self._bucket(v, s) for s, v in real.items()}
        if self.non_monotone or self.fixed:
            padded = self._padding_for(real, padded)
            if padded is None:
                return self.exact_runner(args)
        device = next((a.device for a in args if isinstance(a, torch.Tensor) and a.device.type == "tpu"), None)
        real_t = torch.tensor([real[s] for s in self.symbols], dtype=torch.int64)
        real_t = real_t.to(device) if device is not None else real_t
        sizes = _Call(padded, None, {})
        inputs = []
        copies = {}  # padded copies of the caller's tensors: _onto_callers
        for n, a in zip(self.placeholders, args):
            val = n.meta.get("val")
            if isinstance(val, torch.SymInt) and sym_expr(val) is not None:
                e = sym_expr(val)
                inputs.append(sizes.padded_int(e) if e.free_symbols <= set(self.symbols) else a)
            elif isinstance(val, torch.Tensor) and dyn_dims(val):
                shape = sizes.padded_shape(val)
                room = list(shape)
                for d, e in dyn_dims(val).items():
                    room[d] += self._grown(e, sizes)
                p = pad_to(a, shape, room, full_gets_room=True)
                if p.untyped_storage()._cdata != a.untyped_storage()._cdata:
                    copies[p.untyped_storage()._cdata] = (a, p)  # pad_to could not view it
                inputs.append(p)
            else:
                inputs.append(a)
        targets = [args[i] for i, _ in self.mutations]
        bases = {k: args[i] for k, (i, _) in self.aliases.items()}
        args.clear()  # boxed: the inputs may be freed as soon as they are used
        # Within a bucket the padded inputs have the same geometry on every
        # call, so the whole padded run is replayed from C++ after its
        # capture (graph_replay.py); the real sizes are an argument.
        stats["bounded_calls"] += 1
        outs = _unchained(self.replays, inputs + [real_t])
        if self.mutations:
            outs, written = outs
            for target, (_, n), new in zip(targets, self.mutations, written):
                target.copy_(_unpad(n, new, real))
        outs = _unpad(self.output.args[0], outs, real, functools.partial(self._room, at=sizes))
        outs = _onto_callers(outs, copies) if copies else outs
        if bases:
            outs = type(outs)(_replay_views(bases[k], self.aliases[k][1], real) if k in bases else o
                              for k, o in enumerate(outs))
        return outs

    def _padding_for(self, real: dict, padded: dict) -> dict | None:
        """The padded sizes a call runs at: the buckets when every fixed size
        keeps its value there and every non-monotone size is at least as
        large padded as real; else the buckets lowered where that makes it
        hold (_capped); else None (the call runs at its exact sizes), with
        a warning once per graph naming the size.
        Memoized on the real sizes: sympy is slow for a decode step."""
        key = tuple(real.values())
        if key not in self._holds:
            if self._check_padding(real, padded, warn=False):
                fit = padded
            else:
                fit = self._capped(real, padded)
                if fit is None or not self._check_padding(real, fit, warn=False):
                    self._check_padding(real, padded)  # warns
                    fit = None
            self._holds[key] = fit
        return self._holds[key]

    def _capped(self, real: dict, padded: dict) -> dict | None:
        """`padded` with symbols lowered so that no non-monotone size
        shrinks, or None. Such a size takes a remainder, (n + 1) mod w =
        n + 1 - w*((n + 1)//w) (DeepseekV4's compressor keeps the tokens
        past its last full window): it shrinks padded when the padded n
        crosses a multiple of w that the real one does not (n = 66 of bucket
        128, w = 128: 1 against 67). Each floor division or Mod a // q in
        it, with q the same padded and real and a = c*s + rest (c > 0), has
        the same quotient k = a // q padded as real when s is at most
        (q*(k + 1) - 1 - rest) // c: s's padded value is lowered to that.
        It depends on the real sizes only through k and the buckets, so a
        bucket splits into at most a few programs, not one per size (here
        n from 65 to 126 runs padded to 126)."""
        from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod

        at_real = _Call(real, None, {})
        out = dict(padded)
        try:
            for e in self.non_monotone:
                if _Call(out, None, {}).padded_int(e) >= at_real.padded_int(e):
                    continue
                for f in sorted(e.atoms(FloorDiv, Mod, PythonMod), key=str):
                    a, q = f.args
                    qv = at_real.padded_int(q)
                    if qv <= 0 or _Call(out, None, {}).padded_int(q) != qv:
                        return None
                    k = at_real.padded_int(a) // qv
                    for sym in sorted(a.free_symbols, key=str):
                        if sym in self.exact or out.get(sym, 0) <= real.get(sym, 0):
                            continue
                        c = sympy.diff(a, sym)
                        rest = sympy.expand(a - c * sym)
                        if not (c.is_Integer and int(c) > 0) or rest.has(sym):
                            return None
                        cap = (qv * (k + 1) - 1 - _Call(out, None, {}).padded_int(rest)) // int(c)
                        if cap < real[sym]:
                            return None
                        out[sym] = min(out[sym], cap)
        except (TypeError, ValueError, ZeroDivisionError, KeyError):  # a form this does not handle
            return None
        return out

    def _check_padding(self, real: dict, padded: dict, warn: bool = True) -> bool:
        at_real, at_padded = _Call(real, None, {}), _Call(padded, None, {})
        for e, v in self.fixed.items():
            if at_padded.padded_int(e) != v:
                if warn and not self._warned_fixed:
                    self._warned_fixed = True
                    _warn(f"torch_tpu: the size {e} of this graph, {v} at the sizes it was traced for, "
                          f"is {at_padded.padded_int(e)} padded at "
                          f"{ {str(s): v for s, v in real.items() if s in e.free_symbols} }; "
                          "such calls run at their exact sizes (one program per size)", category=_PERFORMANCE)
                return False
        for e in self.non_monotone:
            if at_padded.padded_int(e) < at_real.padded_int(e):
                if warn and not self._warned_shrink:
                    self._warned_shrink = True
                    _warn(f"torch_tpu: the size {e} of this graph is smaller padded than real at "
                          f"{ {str(s): v for s, v in real.items() if s in e.free_symbols} }; "
                          "such calls run at their exact sizes (one program per size)", category=_PERFORMANCE)
                return False
        return True

    def _grown(self, sym, at: _Call) -> int:
        """The entries pad_to reserves past `sym`'s padded size (at the
        padded sizes `at`): the most any result of this graph adds to it. A
        symbolic addend counts where it is at most `sym` padded: XLNet's
        mems come back as mems + the step's tokens, s0 + s1, which would
        otherwise give the step's tokens room for the whole mems."""
        out = 0
        for c in self.growth.get(sym, ()):
            v = at.padded_int(c)
            if c.is_Integer or v <= at.padded_int(sym):
                out = max(out, v)
        return out

    def _room(self, t: torch.Tensor, dims: dict, sizes: dict, at: _Call) -> torch.Tensor:
        """`t` (a padded result, its symbolic dims `dims`, their real sizes
        `sizes`), copied into storage with room when a symbolic dim after the
        first fills it exactly. Narrowed, such a result would be contiguous
        while the same result at another size of the bucket is not (its
        strides count the padding); Dynamo, tracing the graph that it comes
        back to (the decode step, given the prefill's or a bucket's last
        cache), would guard on contiguous strides, and the next call's
        padded view would fail the guard and trace the graph again (a
        Transformers causal LM: 25-60 s here). The room is what pad_to
        reserves for the next call (its bucket plus this graph's growth), at
        least one more entry, so the copy is the one pad_to would make at the
        next call's bucket crossing, made one call earlier."""
        full = [d for d, n in sizes.items() if d > 0 and n == t.shape[d] and t.dim() > 1]
        if not full:
            return t
        pad = [0] * (2 * t.dim())
        for d in full:
            g = growth(dims[d])
            sym = g[0] if g is not None else min(dims[d].free_symbols, key=str, default=None)
            want = self._bucket(sizes[d], sym) + (self._grown(sym, at) if sym is not None else 0)
            want = max(want, sizes[d] + 1)
            pad[2 * (t.dim() - 1 - d) + 1] = want - t.shape[d]
        return torch.constant_pad_nd(t, pad)

    def _run_padded(self, inputs: list) -> Any:
        """Interprets the graph on padded inputs (the last one: the real
        sizes) in Fused Eager and flushes once."""
        real_t = inputs[-1]
        env = {}
        for n, a in zip(self.placeholders, inputs):
            env[n] = a
        padded = {}
        for sym, (i, d) in self.sources.items():
            padded[sym] = int(inputs[i]) if d is None else inputs[i].shape[d]
        call = _Call(padded, real_t, {s: i for i, s in enumerate(self.symbols)})
        inputs.clear()
        prev = _C._get_eager_mode()
        _C._mark_step()  # the caller's deferred ops run on their own
        _C._set_eager_mode(_FUSED)
        # The bucket's trace repeats on each call: never cut it (modes.h)
        split_was = _C._set_fuse_split_paused(True)
        try:
            with auto_bucket.in_graph():  # a graph's cats are its own rules'
                for n, rule in self.steps:
                    args_n, kwargs_n = torch.fx.node.map_arg((n.args, n.kwargs), lambda m: env[m])
                    try:
                        env[n] = rule(call, n, args_n, kwargs_n)
                    except Exception as exc:  # name the op and the user's line
                        raise annotate_node_error(n, exc) from None
            outs = torch.fx.node.map_arg(self.output.args[0], lambda m: env[m])
            if self.mutations:
                outs = (outs, [env[n] for _, n in self.mutations])
            # Only the results may stay referenced: the fused program returns
            # every value still held when it runs.
            env.clear()
            args_n = kwargs_n = call = real_t = None
        finally:
            try:
                before = _C._fusion_stats()["compiles"]
                _C._mark_step()
                stats["bounded_compiles"] += _C._fusion_stats()["compiles"] - before
            finally:
                _C._set_fuse_split_paused(split_was)
                _C._set_eager_mode(prev)
        return outs


def _unchained(replays: ReplayCache, args: list) -> Any:
    """Runs a padded graph's call (`replays(args)`) as its own program: the
    pending trace is flushed first, as a plain call does (_run_padded), and
    a replay runs at once instead of joining the pending trace (chained
    replays, docs/design.md). Chained, the program would be this graph's
    ops together with whatever graphs happen to surround it until the next
    sync: one program per bucket *and* per neighbourhood. A model whose
    step is cut by host reads (Xmod's language adapter, `hidden[mask]`,
    reads a `nonzero` in every layer) puts each layer's padded attention
    graph in a different chain, and a copy on the host side at a bucket's
    last step (BoundedGraph._room) cuts the chain elsewhere: 5 fused
    programs per bucket instead of the bucket's one, which every layer's
    identical graph shares."""
    _C._mark_step()
    chaining = _C._replay_chaining()
    if chaining:
        _C._set_replay_chaining(False)
    try:
        return replays(args)
    finally:
        if chaining:
            _C._set_replay_chaining(True)


def _writes_padded_input(n: torch.fx.Node) -> bool:
    """copy_ into a graph input with padded dims: a mutation AOTAutograd
    keeps in the graph (keep_inference_input_mutations; a conv state
    updated in place)."""
    return (n.target is torch.ops.aten.copy_.default and n.args[0].op == "placeholder"
            and bool(dyn_dims(n.args[0].meta.get("val"))))


def _copy_into_input(call, node, args, kwargs):
    """The padded input of a _writes_padded_input node may be a view past
    the caller's tensor (pad_to; its storage may hold other data there) or
    a copy of it, so the write is not made in the padded run: the value it
    would write (src cast and broadcast to the input's shape, aten.copy) is
    one more result, and __call__ copies its real entries into the
    caller's tensor (BoundedGraph.mutations)."""
    return torch.ops.aten.copy.default(args[0], args[1])


def _monotone(e) -> bool:
    """Whether a size expression provably never decreases when one of its
    symbols (sizes, >= 0) grows: sums and products of such terms with
    non-negative coefficients, floor division by a positive constant, max,
    min, positive powers. A constant offset may be negative."""
    if e.is_Symbol or e.is_Number:
        return True
    if e.is_Add:
        return all(a.is_Number or _monotone(a) for a in e.args)
    if e.is_Mul:
        return all(a >= 0 if a.is_Number else _monotone(a) for a in e.args)
    if e.is_Pow:
        return e.exp.is_Integer and int(e.exp) > 0 and _monotone(e.base)
    name = type(e).__name__
    if name == "FloorDiv":
        return _monotone(e.args[0]) and e.args[1].is_Number and e.args[1] > 0
    if name in ("Max", "Min"):
        return all(_monotone(a) for a in e.args)
    return False


# The sympy functions _Call._eval computes on the device.
_EVALUABLE = {"FloorDiv", "Max", "Min", "Mod", "PythonMod"}


def _check_evaluable(e) -> None:
    """Raises Unsupported (when the graph is compiled, not in a call) for a
    size expression _Call._eval cannot compute from the real sizes."""
    if e.is_Symbol or e.is_Integer or e.is_Add or e.is_Mul:
        pass
    elif e.is_Pow:
        if not (e.exp.is_Integer and int(e.exp) > 0):
            raise Unsupported(f"symbolic size expression {e}")
    elif type(e).__name__ not in _EVALUABLE:
        raise Unsupported(f"symbolic size expression {e}")
    for a in e.args:
        _check_evaluable(a)


def _get_attr(call, node, args, kwargs):
    obj = node.graph.owning_module
    for name in node.target.split("."):
        obj = getattr(obj, name)
    return obj


def _exprs(val, ints: bool = True) -> list:
    """The symbolic sizes of a node's value (and its symbolic ints, unless
    `ints` is False)."""
    if isinstance(val, (list, tuple)):
        return [e for v in val for e in _exprs(v, ints)]
    if isinstance(val, torch.SymInt) and ints:
        e = sym_expr(val)
        return [e] if e is not None else []
    if isinstance(val, torch.Tensor):
        return list(dyn_dims(val).values())
    return []


def _fixed(val) -> dict:
    """{expr: value} of the fixed sizes (bounded_rules.fixed_sizes) of a
    node's tensors."""
    if isinstance(val, (list, tuple)):
        return {e: v for x in val for e, v in _fixed(x).items()}
    return fixed_sizes(val)


def _growth(spec, symbols) -> dict:
    """{symbol s: {c}} for results sized s + c, c an integer > 0 (a KV cache
    that an inference step returns one token longer than it came in) or a
    sum of the graph's other symbols (mems + the step's tokens). Results in
    storage that holds s + c padded come back, narrowed, as the next
    call's input: padded copies of that input reserve the same room, so the
    bucket's calls find one storage size (the program's key holds it)."""
    out = {}
    for e in _exprs([n.meta.get("val") for n in _nodes(spec)]):
        if not e.is_Add:
            continue
        for s in e.free_symbols & set(symbols):
            c = e - s
            if c.is_Integer and int(c) > 0:
                out.setdefault(s, set()).add(c)
            elif (not c.is_Integer and c.free_symbols <= set(symbols)
                  and all(a.is_Symbol for a in sympy.Add.make_args(c))):
                out.setdefault(s, set()).add(c)
    return out


def _nodes(spec) -> list:
    if isinstance(spec, (list, tuple)):
        return [n for s in spec for n in _nodes(s)]
    return [spec] if isinstance(spec, torch.fx.Node) else []


def pad_to(t: torch.Tensor, shape: list, room: list | None = None, full_gets_room: bool = False) -> torch.Tensor:
    """`t` padded at the end of each dim to `shape`. A view over t's storage
    when it is large enough (a result narrowed by an earlier call usually
    is), else a view of a padded copy of size `room` (>= shape): the layout
    the graph's own results will have in this bucket, so the next call,
    given one of them, sees the same strides and reuses the program.
    With `full_gets_room` (a padded graph's inputs), a contiguous `t` that
    already has `shape` gets the room layout as well."""
    room = room or shape
    if list(t.shape) == list(shape):
        # A contiguous tensor that fills the bucket exactly (made outside
        # the graph: eager ops, a step Dynamo left untraced) would come in
        # with its own strides, while every smaller size of the bucket is
        # copied into storage with room (below): two layouts, two programs
        # for one bucket. It gets the room layout too, unless it has it.
        if (not full_gets_room or list(room) == list(shape) or not t.is_contiguous()
                or _has_layout(t, room)):
            return t
    else:
        last = t.storage_offset() + sum((s - 1) * st for s, st in zip(shape, t.stride()))
        capacity = t.untyped_storage().nbytes() // t.element_size()
        roomy = not full_gets_room or capacity >= math.prod(room)  # _has_layout
        if all(st > 0 for st, s in zip(t.stride(), shape) if s > 1) and last < capacity and roomy:
            return t.as_strided(shape, t.stride(), t.storage_offset())
    pad = []
    for have, want in reversed(list(zip(t.shape, room))):
        pad += [0, want - have]
    out = torch.constant_pad_nd(t, pad)
    for d, (want, have) in enumerate(zip(shape, room)):
        if want != have:
            out = out.narrow(d, 0, want)
    return out


def _has_layout(t: torch.Tensor, room: list) -> bool:
    """Whether `t`'s strides are those of a contiguous tensor of size `room`
    narrowed to t's shape, in storage that holds the room. Every dim's
    stride, size-1 dims too: a program's key holds them (a stride of 128
    against 136 made a second program). And the storage's size: the key
    holds it too, and a tensor sized without the room (the prefill's cache,
    without the decode step's growth) has the strides of the room when only
    its first dim grows, while the bucket's later calls, given this graph's
    results, come in storage with the room (XLNet's mems: two programs per
    bucket)."""
    if t.untyped_storage().nbytes() // t.element_size() < math.prod(room):
        return False
    want, acc = [], 1
    for s in reversed(list(room)):
        want.append(acc)
        acc *= s
    want.reverse()
    return list(t.stride()) == want


def _unpad(spec, outs, real: dict, room=None):
    """The graph's results at their real sizes (narrowed views; `room`
    (BoundedGraph._room) first gives a result that would come out
    contiguous storage with room)."""
    if isinstance(spec, (list, tuple)):
        return type(outs)(_unpad(s, o, real, room) for s, o in zip(spec, outs))
    if not isinstance(spec, torch.fx.Node):
        return outs
    val = spec.meta.get("val")
    subs = {s: sympy.Integer(v) for s, v in real.items()}
    if isinstance(val, torch.SymInt) and sym_expr(val) is not None:
        return int(sym_expr(val).xreplace(subs))
    if isinstance(outs, torch.Tensor) and isinstance(val, torch.Tensor):
        dims = dyn_dims(val)
        sizes = {d: int(e.xreplace(subs)) for d, e in dims.items()}
        if room is not None:
            outs = room(outs, dims, sizes)
        for d, n in sizes.items():
            outs = outs.narrow(d, 0, n)
    return outs


# Ops whose result is a view of their first argument.
_VIEW_OPS = {
    torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default, torch.ops.aten.alias.default,
    torch.ops.aten.permute.default, torch.ops.aten.transpose.int, torch.ops.aten.t.default,
    torch.ops.aten.unsqueeze.default, torch.ops.aten.squeeze.dim, torch.ops.aten.squeeze.dims,
    torch.ops.aten.squeeze.default, torch.ops.aten.slice.Tensor, torch.ops.aten.select.int,
    torch.ops.aten.expand.default, torch.ops.aten.narrow.default, torch.ops.aten.diagonal.default,
    torch.ops.aten.unfold.default,
}
# Views returned as a list, whose piece the graph takes with getitem.
_LIST_VIEW_OPS = {
    torch.ops.aten.split.Tensor, torch.ops.aten.split_with_sizes.default, torch.ops.aten.unbind.int,
    torch.ops.aten.chunk.default, torch.ops.aten.tensor_split.sections, torch.ops.aten.tensor_split.indices,
}


def _input_view_chain(node, placeholders: list) -> tuple | None:
    """(input index, the view nodes from that input out) when the graph
    result `node` is a chain of views of an input, else None. A piece of a
    split (`getitem` of split_with_sizes, unbind, ...) is a link of two
    nodes, replayed as the split and the getitem."""
    chain = []
    while isinstance(node, torch.fx.Node) and node.op == "call_function":
        if node.target in _VIEW_OPS:
            chain.append(node)
            node = node.args[0]
        elif (node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node)
              and node.args[0].op == "call_function" and node.args[0].target in _LIST_VIEW_OPS):
            chain += [node, node.args[0]]
            node = node.args[0].args[0]
        else:
            break
    if chain and isinstance(node, torch.fx.Node) and node.op == "placeholder":
        return placeholders.index(node), chain[::-1]
    return None


def _replay_views(t: torch.Tensor, chain: list, real: dict) -> torch.Tensor:
    """The views of `chain` applied to the caller's tensor `t`, their int
    arguments at the real sizes: what the graph's result is at the real
    sizes, and a view of `t` as AOTAutograd expects."""
    for n in chain:
        args, kwargs = torch.fx.node.map_arg((n.args[1:], n.kwargs), lambda a: _unpad(a, a.meta.get("val"), real))
        t = n.target(t, *args, **kwargs)
    return t


def _onto_callers(outs, copies: dict):
    """Results that are views of a padded copy of an input (a transposed
    input returned as it is) as the same views of the caller's tensor.
    AOTAutograd regenerates a result that aliases an input from that input
    with the result's geometry relative to its base: relative to the padded
    copy that geometry is out of bounds of the caller's smaller storage
    (a crash), or reads the wrong entries."""
    if isinstance(outs, (list, tuple)):
        return type(outs)(_onto_callers(o, copies) for o in outs)
    if not isinstance(outs, torch.Tensor) or outs.device.type != "tpu":
        return outs
    found = copies.get(outs.untyped_storage()._cdata)
    if found is None:
        return outs
    caller, padded = found
    return _same_view(outs, padded, caller)


def _same_view(view: torch.Tensor, padded: torch.Tensor, caller: torch.Tensor) -> torch.Tensor:
    """`view` (over the storage of `padded`, pad_to's contiguous copy of
    `caller` narrowed to the bucket) as the same view of `caller`, whose
    dims are padded's at their real sizes. Each stride of the view must be
    one dim's stride of the copy (permutes, narrows, selects, unsqueezes);
    else the view is copied, which AOTAutograd then cannot take for an
    alias of the caller's storage."""
    dims = [(d, st) for d, (n, st) in enumerate(zip(padded.shape, padded.stride())) if n > 1]
    if padded.storage_offset() != 0 or any(a[1] <= b[1] for a, b in zip(dims, dims[1:])):
        return view.clone()
    offset, left = caller.storage_offset(), view.storage_offset()
    for d, st in dims:  # the view's first entry as an index into the copy
        offset += (left // st) * caller.stride(d)
        left %= st
    strides = []
    for size, st in zip(view.shape, view.stride()):
        same = [d for d, s in dims if s == st]
        if size > 1 and len(same) != 1:
            return view.clone()
        strides.append(caller.stride(same[0]) if size > 1 else 1)
    return caller.as_strided(view.shape, strides, offset)


def make_runner(gm: torch.fx.GraphModule, exact: Callable[[list], Any], options: Any = None) -> Callable[[list], Any]:
    """A boxed runner for an inference graph: padded to buckets when the
    graph has symbolic sizes and every op can run padded, else `exact`.
    `options`: torch.compile's (compile_options.CompileOptions)."""
    if not any(sym_expr(n.meta.get("val")) is not None or dyn_dims(n.meta.get("val"))
               for n in gm.graph.nodes if n.op == "placeholder"):
        return exact
    try:
        bounded = BoundedGraph(gm, exact, options)
    except Unsupported as e:
        _warn(f"torch_tpu: this graph recompiles for every new size of its symbolic dims: {e}", category=_PERFORMANCE)
        return exact

    def run(args: list) -> Any:
        return bounded(args)

    run.bounded = bounded
    run._boxed_call = True
    return run


__all__ = ["BoundedGraph", "bucket", "make_runner", "pad_to"]
