"""How each ATen op runs on padded tensors (see bounded_graph.py).

A tensor of a bounded graph is padded along its symbolic dims: the entries
past the real size hold garbage. Most ops never mix entries along such a
dim and run unchanged on the padded tensors (pointwise ops, views, matmuls
over other dims). The rules here cover the ops that would let padding into
real entries: reductions and softmax over a padded dim (padding is replaced
by the reduction's identity first), contractions over one (zeroed on both
sides, so 0 * garbage cannot make a NaN), cat along one (the pieces are
gathered to sit end to end at their real sizes) and slicing or indexing
along one (offsets counted from the real size). `plan(node)` picks the rule
when the graph is compiled, from the node's symbolic shapes alone; an op
this file does not know raises Unsupported, and the graph then runs at its
exact sizes instead.
"""

from __future__ import annotations

import operator
import sys
from typing import Any, Callable

import torch

aten = torch.ops.aten


class Unsupported(Exception):
    """The graph has an op that cannot run padded; it runs unpadded."""


class _Interleaved(Unsupported):
    """A view whose padding would land among real entries: not a padded
    view, but a gather can lay it out (_relayout_rule)."""


# ---- symbolic shapes of a node ------------------------------------------------


def sym_expr(v: Any):
    """The sympy expression of a SymInt (_exact_quotients applied), or None
    for a plain int."""
    if isinstance(v, torch.SymInt):
        e = v.node.expr
        return _exact_quotients(e, v.node.shape_env) if e.free_symbols else None
    return None


def size_exprs(val) -> list:
    """Each dim of a (fake) tensor: its size's expression (sym_expr), or the
    int of a static size. Kept on the tensor (rules ask on every call of a
    plan): do not modify it."""
    sizes = val.__dict__.get("_tpu_sizes")
    if sizes is None:
        sizes = val._tpu_sizes = [e if (e := sym_expr(s)) is not None else int(s) for s in val.shape]
    return sizes


def _exact_quotients(e, env):
    """`e` with each floor division a // q that Dynamo's guards make exact
    (a mod q == 0 for every call of the graph) written as a / q, when that
    leaves no fraction. Reshaping a strided slice, meta kernels write a
    size a as q*(a // q) (XLNet's relative shift: s*((t + 2*s - 1)//s),
    guarded equal to t + 2*s - 1); at padded sizes that form is a different
    size, often smaller than the real one, where the guarded form a is the
    same size at every call and grows with its symbols."""
    from torch.utils._sympy.functions import FloorDiv, Mod

    if env is None or not e.has(FloorDiv):
        return e
    # memoised on the shape env itself: its guards decide, and another
    # graph's env (or a later one at the same address) may not have them
    memo = env.__dict__.setdefault("_tpu_exact_quotients", {})
    if e not in memo:
        import sympy

        out = e
        try:
            for f in e.atoms(FloorDiv):
                a, q = f.args
                if env._maybe_evaluate_static(sympy.Eq(q * f, a)) == sympy.true:
                    num, den = sympy.fraction(sympy.cancel(out.xreplace({f: a / q})))
                    if den == 1:
                        out = sympy.expand(num)
            # a fraction left anywhere (inside another division: a size of
            # Qwen4Exp's indexer became 1//(1/64), which int() refused; inside
            # Max: GraniteMoeHybrid's L/256 chunks), or no symbol left at
            # all: the size stays as Dynamo wrote it
            if not out.free_symbols or any(not x.is_integer for x in out.atoms(sympy.Rational)):
                out = e
        except Exception:  # noqa: BLE001 - a form sympy cannot decide stays as it is
            out = e
        memo[e] = out
    return memo[e]


def dyn_dims(val: Any) -> dict:
    """{dim: expr} for the symbolic dims of a (fake) tensor. Kept on the
    tensor (rules ask for it on every call of a plan): do not modify it."""
    if not isinstance(val, torch.Tensor):
        return {}
    out = val.__dict__.get("_tpu_dyn_dims")
    if out is None:
        out, fixed = {}, {}
        for d, s in enumerate(val.shape):
            e = sym_expr(s)
            if e is None:
                continue
            value = _constant_size(e, s.node.shape_env)
            if value is None:
                out[d] = e
            else:
                fixed[e] = value
        val._tpu_dyn_dims, val._tpu_fixed_sizes = out, fixed
    return out


def fixed_sizes(val: Any) -> dict:
    """{expr: value} for the symbolic dims of a (fake) tensor that have one
    value at every size (_constant_size), which dyn_dims leaves out: static
    dims. BoundedGraph checks per call that they keep that value padded."""
    if not isinstance(val, torch.Tensor):
        return {}
    dyn_dims(val)
    return val._tpu_fixed_sizes


def growth(e):
    """(s, c) when the size `e` is s + c for a symbol s and an integer
    c > 0 (a KV cache one token longer than it came in), else None. Padded
    copies reserve that room so the next call finds the same layout."""
    for s in e.free_symbols:
        c = e - s
        if c.is_Integer and int(c) > 0:
            return s, int(c)
    return None


def _meta(n: Any) -> Any:
    return n.meta.get("val") if isinstance(n, torch.fx.Node) else None


def _tensor_args(node: torch.fx.Node) -> list:
    out = []
    torch.fx.node.map_arg((node.args, node.kwargs), lambda n: out.append(n) if isinstance(_meta(n), torch.Tensor) else None)
    return out


def _sym_args(node: torch.fx.Node) -> list:
    out = []
    torch.fx.node.map_arg((node.args, node.kwargs), lambda n: out.append(n) if sym_expr(_meta(n)) is not None else None)
    return out


def _norm_dim(d: int, ndim: int) -> int:
    return d + ndim if d < 0 else d


# ---- rules ----------------------------------------------------------------------
# A rule is called as rule(ctx, node, args, kwargs) with the node's
# arguments evaluated (padded tensors, padded ints) and returns its value.


def run_plain(ctx, node, args, kwargs):
    return node.target(*args, **kwargs)


def _scalar_operands(node: torch.fx.Node) -> Callable:
    """Tensor-typed arguments given a symbolic int (`x * s0`) get its real
    value as a 0-dim tpu tensor, so the value is data and not a constant of
    the program."""
    schema = node.target._schema
    positions = []
    op = node.target
    for i, a in enumerate(node.args):
        if sym_expr(_meta(a)) is not None:
            arg = schema.arguments[i] if i < len(schema.arguments) else None
            if arg is not None and isinstance(arg.type, torch.NumberType) and i == 1 \
                    and isinstance(_meta(node.args[0]), torch.Tensor):
                # `n - 1 - arange(n)` is rsub.Scalar(t, s): the Scalar
                # overload's Tensor sibling (rsub.Tensor, add.Tensor, pow.
                # Tensor_Tensor ...) takes the 0-dim tensor and promotes as
                # the Scalar would (a 0-dim operand does not widen the other)
                op = node.target.overloadpacket
            elif arg is None or not isinstance(arg.type, torch.TensorType):
                raise Unsupported(f"{node.target}: symbolic value in a non-tensor argument")
            positions.append(i)
    for k, a in node.kwargs.items():
        if sym_expr(_meta(a)) is not None:
            raise Unsupported(f"{node.target}: symbolic keyword value")

    def rule(ctx, node, args, kwargs):
        args = list(args)
        for i in positions:
            args[i] = ctx.real_tensor(sym_expr(_meta(node.args[i])))
        return op(*args, **kwargs)

    return rule


def _fill_padding(ctx, t, arg, fill, dims=None):
    """t (the value of graph argument `arg`) with its padding along every
    padded dim (or only those in `dims`) replaced by `fill`."""
    for d, e in dyn_dims(_meta(arg)).items():
        if dims is None or d in dims:
            t = torch.where(ctx.mask(e, t, d), t, fill)
    return t


def _dump_slot(x, dim):
    """x with one extra entry appended along dim, and that entry's index
    (= x's size): the writes of padding entries go there and are cut off
    after (index_put, scatter)."""
    widen = [0] * (2 * x.dim())
    widen[2 * (x.dim() - 1 - dim) + 1] = 1
    return torch.constant_pad_nd(x, widen), x.shape[dim]


def _masked(fill: Callable[[torch.Tensor], Any]) -> Callable:
    """Reductions over padded dims: padding becomes `fill(x)` first."""

    def rule(ctx, node, args, kwargs):
        x = args[0]
        x = _fill_padding(ctx, x, node.args[0], fill(x), _reduced_dims(node, x.dim()))
        return node.target(x, *args[1:], **kwargs)

    return rule


def _lowest(x):
    if x.is_floating_point():
        return float("-inf")
    return torch.iinfo(x.dtype).min if x.dtype != torch.bool else False


def _highest(x):
    if x.is_floating_point():
        return float("inf")
    return torch.iinfo(x.dtype).max if x.dtype != torch.bool else True


def _reduced_dims(node, ndim) -> set:
    return _dim_set(node.args[1] if len(node.args) > 1 else node.kwargs.get("dim"), ndim)


def _dim_set(dim, ndim) -> set:
    """A reduction's `dim` argument as a set of dims (None or empty: all)."""
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return set(range(ndim))
    if isinstance(dim, int):
        dim = [dim]
    return {_norm_dim(d, max(ndim, 1)) for d in dim}


def _mean_rule(ctx, node, args, kwargs):
    """mean over padded dims: masked sum divided by the real count."""
    x = args[0]
    dims = sorted(_reduced_dims(node, x.dim()))
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    dtype = kwargs.get("dtype")
    padded = dyn_dims(_meta(node.args[0]))
    count = None
    for d in dims:
        if d in padded:
            x = torch.where(ctx.mask(padded[d], x, d), x, 0)
            n = ctx.real_value(padded[d])
        else:
            n = x.shape[d]
        count = n if count is None else count * n
    total = aten.sum.dim_IntList(x, dims, keepdim, dtype=dtype)
    return total / count


def _contraction(a_dim: int, b_dim: int, a_arg: int = 0, b_arg: int = 1) -> Callable:
    """mm/bmm-like ops: a padded contracted dim is zeroed in both operands."""

    def rule(ctx, node, args, kwargs):
        args = list(args)
        ea = dyn_dims(_meta(node.args[a_arg])).get(_norm_dim(a_dim, args[a_arg].dim()))
        eb = dyn_dims(_meta(node.args[b_arg])).get(_norm_dim(b_dim, args[b_arg].dim()))
        if ea is not None or eb is not None:
            e = ea if ea is not None else eb
            for i, d in ((a_arg, a_dim), (b_arg, b_dim)):
                t = args[i]
                args[i] = torch.where(ctx.mask(e, t, _norm_dim(d, t.dim())), t, 0)
        return node.target(*args, **kwargs)

    return rule


def _cat_rule(ctx, node, args, kwargs):
    """cat along a padded dim: each piece is placed right after the real
    entries of the previous ones (a gather with indices built from the real
    sizes), so the result is padded only at its end."""
    tensors = args[0]
    out_meta = _meta(node)
    dim = _norm_dim(args[1] if len(args) > 1 else kwargs.get("dim", 0), out_meta.dim())
    metas = [_meta(n) for n in node.args[0]]
    # torch.cat skips 1-d empty pieces whatever the rank of the others (a
    # lazily initialised KV cache, `torch.tensor([])`, joined with the keys)
    keep = [i for i, m in enumerate(metas) if not (m.dim() == 1 and m.shape[0] == 0 and out_meta.dim() != 1)]
    tensors, nodes = [tensors[i] for i in keep], [node.args[0][i] for i in keep]
    joined = torch.cat(tensors, dim)
    pieces = [(_real_length(ctx, n, t, dim), t.shape[dim]) for t, n in zip(tensors, nodes)]
    return joined.index_select(dim, ctx.cat_index(joined.shape[dim], pieces, joined.device))


def _real_bound(ctx, v, default, length, device):
    """A slice bound at its real value: a symbolic or negative one counts
    from the real length `length`, as Python does (`x[:, -w:]` for an int
    argument w); None gives `default`."""
    if v is None:
        return default
    e = sym_expr(_meta(v))
    if e is not None:
        r = ctx.real_value(e)
        if isinstance(r, int) and isinstance(length, int):  # known on the host (Fused Eager)
            return max(r + length if r < 0 else r, 0)
        r = torch.as_tensor(r, device=device)
        return torch.where(r < 0, r + length, r).clamp(min=0)
    v = int(v)
    if v < 0:
        return length + v
    if v >= sys.maxsize // 2:
        return default
    return v


# The argument names of slice and its scatters, in order.
_SLICE_ARGS = {
    aten.slice.Tensor: ("self", "dim", "start", "end", "step"),
    aten.slice_scatter.default: ("self", "src", "dim", "start", "end", "step"),
    aten.select_scatter.default: ("self", "src", "dim", "index"),
}


def _slice_args(node) -> dict:
    names = _SLICE_ARGS[node.target]
    vals = dict(zip(names, list(node.args) + [None] * len(names)))
    vals.update({k: v for k, v in node.kwargs.items() if k in names})
    return vals


def _real_length(ctx, node_arg, x, dim):
    """The real size of `x` (the value of `node_arg`) along `dim`."""
    e = dyn_dims(_meta(node_arg)).get(dim)
    return ctx.real_value(e) if e is not None else x.shape[dim]


def _slice_rule(ctx, node, args, kwargs):
    """slice with a symbolic bound, or along a padded dim: a gather of the
    real range (offsets counted from the real size)."""
    x = args[0]
    vals = _slice_args(node)
    dim = _norm_dim(vals["dim"] or 0, x.dim())
    step = vals["step"] if vals["step"] is not None else 1
    start = _real_bound(ctx, vals["start"], 0, _real_length(ctx, node.args[0], x, dim), x.device)
    out_size = ctx.padded_shape(_meta(node))[dim]
    if (isinstance(start, int) and start == 0 and step == 1 and out_size == x.shape[dim]):
        return x  # a prefix as long as the padded dim: the padding just carries on
    return x.index_select(dim, ctx.positions(out_size, start, step, x.shape[dim] - 1, x.device))


def _real_index(ctx, index, in_expr, device):
    """select's index at its real value (a negative one counts from the
    real size `in_expr` of a padded dim), or None where the plain op is
    right (a static index that needs no real size)."""
    e = sym_expr(_meta(index))
    if e is not None:
        i = ctx.real_value(e)
        if in_expr is not None:  # a negative symbolic index counts from the real size
            n = ctx.real_value(in_expr)
            if isinstance(i, int) and isinstance(n, int):  # known on the host (Fused Eager)
                return i + n if i < 0 else i
            i = torch.as_tensor(i, device=device)
            return torch.where(i < 0, i + n, i)
        return i
    if int(index) < 0 and in_expr is not None:
        return ctx.real_value(in_expr) + int(index)
    return None


def _select_rule(ctx, node, args, kwargs):
    x, dim = args[0], _norm_dim(args[1], args[0].dim())
    i = _real_index(ctx, node.args[2], dyn_dims(_meta(node.args[0])).get(dim), x.device)
    if i is None:
        return x.select(dim, int(node.args[2]))
    return x.index_select(dim, ctx.positions(1, i, 1, x.shape[dim] - 1, x.device)).squeeze(dim)


def _along(mask, ndim: int, dim: int):
    """A 1-d mask over `dim`, shaped to broadcast against an ndim tensor."""
    shape = [1] * ndim
    shape[dim] = mask.shape[0]
    return mask.reshape(shape)


def _slice_scatter_rule(ctx, node, args, kwargs):
    """slice_scatter(self, src, dim, start, end, step) along a padded dim
    or with a symbolic bound (DeepseekV4's compressor shifting its chunks
    by one: `new_kv[:, 1:, :r] = kv[:, :-1, :, :d]`): entry j of the
    result is src[(j - start) / step] where j is one of the positions
    written (start + k * step for k under src's real size; a negative
    start counts from self's real size) and self[j] elsewhere. Written
    as the plain op, src's padding would land on real entries of self
    (`out[:, :n] = y` into a static dim) or the shift would count from
    the padded sizes."""
    x, src = args[0], args[1]
    vals = _slice_args(node)
    dim = _norm_dim(vals["dim"] or 0, x.dim())
    step = vals["step"] if vals["step"] is not None else 1
    start = _real_bound(ctx, vals["start"], 0, _real_length(ctx, node.args[0], x, dim), x.device)
    offset = torch.arange(x.shape[dim], device=x.device) - start
    k = torch.div(offset, step, rounding_mode="floor")
    written = (offset >= 0) & (offset % step == 0) & (k < _real_length(ctx, node.args[1], src, dim))
    taken = src.index_select(dim, k.clamp(0, src.shape[dim] - 1)).to(x.dtype)
    return torch.where(_along(written, x.dim(), dim), taken, x)


def _select_scatter_rule(ctx, node, args, kwargs):
    """select_scatter(self, src, dim, index) along a padded dim: written
    where the position is the index at its real value (a negative one
    counts from the real size)."""
    x, src = args[0], args[1]
    vals = _slice_args(node)
    dim = _norm_dim(vals["dim"], x.dim())
    i = _real_index(ctx, vals["index"], dyn_dims(_meta(node.args[0])).get(dim), x.device)
    if i is None:
        i = int(vals["index"])
    written = torch.arange(x.shape[dim], device=x.device) == i
    return torch.where(_along(written, x.dim(), dim), src.unsqueeze(dim).to(x.dtype), x)


def _outside_real(ctx, t, expr, padded: int):
    """Indices `t` into a dim padded to `padded` whose real size is `expr`,
    with every entry outside [0, real) moved past the padding (to padded
    + 1: out of range also when a dump slot widened the dim), so that the
    lowering's bounds check raises as torch does at the real size. Kept
    as they are, such entries would read or write the padding: a silent
    wrong answer. The error names the padded size, not the real one."""
    inside = (t >= 0) & (t < ctx.real_value(expr))
    return torch.where(inside, t, torch.clamp(t, min=padded + 1))


def _gather_rule(ctx, node, args, kwargs):
    """gather(x, dim, index): out[..i..] = x[..index[..i..]..] along `dim`.
    Real entries of the index must point at real entries of x (torch
    raises otherwise; along a padded `dim`, an entry past the real size is
    sent out of range for the bounds check); the index's padding (garbage,
    or whatever produced it) could be out of range and trip the bounds
    check, so it is set to 0 after."""
    x, index = args[0], args[2]
    dim = _norm_dim(args[1], max(x.dim(), 1))
    e = dyn_dims(_meta(node.args[0])).get(dim)
    if e is not None:
        index = _outside_real(ctx, index, e, x.shape[dim])
    index = _fill_padding(ctx, index, node.args[2], 0)
    return node.target(x, args[1], index, *args[3:], **kwargs)


def _conv_rule(ctx, node, args, kwargs):
    """convolution with the input padded along its channels or spatial
    dims: the padding is zeroed first. A real output entry then reads real
    entries and zeros, exactly the zeros its own padding (or, transposed,
    the absence of input) would give: a causal conv1d (Mamba's, padding
    k - 1, cut back to the length) over a padded sequence."""
    x = _fill_padding(ctx, args[0], node.args[0], 0, range(1, args[0].dim()))
    return node.target(x, *args[1:], **kwargs)


def _split_rule(ctx, node, args, kwargs):
    """split along a padded dim (ProphetNet's chunk of its main and
    predict streams): the real pieces sit end to end (as cat along a
    padded dim leaves them), so piece i is gathered from the sum of the
    real sizes before it, padded to its own bucket."""
    x = args[0]
    dim = _norm_dim(node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0), x.dim())
    start, pieces = 0, []
    for m in _meta(node):
        e = dyn_dims(m).get(dim)
        size = ctx.padded_shape(m)[dim]
        pieces.append(x.index_select(dim, ctx.positions(size, start, 1, x.shape[dim] - 1, x.device)))
        start = start + (ctx.real_value(e) if e is not None else m.shape[dim])
    return pieces


def _constant_pad_rule(ctx, node, args, kwargs):
    """constant_pad_nd growing a padded dim at its end: the pad values
    belong right after the real entries, where the padding is; padded, they
    land after it. The entries from left + real size on are set to the
    value (the rest of them is padding again). Left pads and crops shift
    real and padded entries alike. A symbolic right pad (GraniteMoeHybrid
    and Qwen3-Next pad the sequence up to a chunk multiple) runs with its
    padded value and is masked the same way: its real value may be
    positive where the padded one is 0, and the real output (left + real
    size + real pad, within the padded one) is the real entries, then the
    value. Along a static dim a symbolic right pad only appends values:
    the real output is a prefix of the padded one. (plan refuses symbolic
    left pads: they would shift the real entries by their real value.)"""
    x, pad = args[0], list(args[1])
    value = args[2] if len(args) > 2 else kwargs.get("value", 0)
    out = node.target(*args, **kwargs)
    pad_meta = node.args[1]
    for d, e in dyn_dims(_meta(node.args[0])).items():
        k = x.dim() - 1 - d  # pad[2k], pad[2k + 1]: dim d's left and right
        if 2 * k + 1 < len(pad) and (pad[2 * k + 1] > 0 or sym_expr(_meta(pad_meta[2 * k + 1])) is not None):
            out = torch.where(ctx.mask(e + pad[2 * k], out, d), out, value)
    return out


def _view_rule(ctx, node, args, kwargs):
    """A padded input may be a strided view of a larger storage (a result
    narrowed by the previous call) where the real one was contiguous: if it
    cannot be viewed, it is copied."""
    try:
        return node.target(*args, **kwargs)
    except RuntimeError:
        return args[0].reshape(args[1])


def _relayout_rule(ctx, node, args, kwargs):
    """A view that would interleave padding with real entries: two padded
    dims merged or split, (s, t) -> (s*t,), a padded dim with dims outside
    it, (2, s) -> (2*s,), or XLNet's relative shift, (s, 2s) viewed as
    (2s, s). Each entry of the padded result is gathered from the input
    entry the real view puts there: its position read in the result's real
    sizes is a real flat index, which the input's real sizes turn into an
    input position, stored at the input's padded strides. Entries outside
    the real result read some real input entry (the positions wrap at the
    real sizes): padding, whatever its values, as everywhere else."""
    x = args[0]
    dev = x.device
    out_meta = _meta(node)
    out_shape = ctx.padded_shape(out_meta)

    def real_sizes(val):
        return [e if type(e) is int else ctx.real_value(e) for e in size_exprs(val)]

    flat = torch.zeros(out_shape, dtype=torch.int64, device=dev)
    stride = 1
    for d, real in reversed(list(enumerate(real_sizes(out_meta)))):
        shape = [1] * len(out_shape)
        shape[d] = out_shape[d]
        flat = flat + torch.arange(out_shape[d], device=dev).reshape(shape) * stride
        stride = stride * real
    index = torch.zeros_like(flat)
    real_stride, padded_stride = 1, 1
    for d, real in reversed(list(enumerate(real_sizes(_meta(node.args[0]))))):
        # a real size of 0 leaves no real entry: the clamps only keep the
        # division defined for the padding
        step = real_stride.clamp(min=1) if isinstance(real_stride, torch.Tensor) else max(real_stride, 1)
        size = real.clamp(min=1) if isinstance(real, torch.Tensor) else max(real, 1)
        position = torch.remainder(torch.div(flat, step, rounding_mode="floor"), size)
        index = index + position * padded_stride
        real_stride = real_stride * real
        padded_stride *= x.shape[d]
    return x.reshape(-1).index_select(0, index.reshape(-1)).reshape(out_shape)


def _arange_start_rule(ctx, node, args, kwargs):
    """arange(start, end[, step]) with a symbolic start: real start + the
    padded range times step, so entry i is start + i * step as torch gives
    it for every real i (XLNet's relative positions count down from the
    key length: arange(klen, -qlen, -1.0)); the rest is padding."""
    start = sym_expr(_meta(node.args[0]))
    n = ctx.padded_shape(_meta(node))[0]
    step = args[2] if len(args) > 2 else 1
    r = torch.arange(n, dtype=_meta(node).dtype, device=kwargs.get("device")) * step
    v = ctx.real_value(start)
    return r + (v.to(r.dtype) if isinstance(v, torch.Tensor) else v)


def _ranked_rule(ctx, node, args, kwargs):
    """sort/topk along a padded dim: the padding is replaced by a value that
    ranks after every real entry, so the real entries come first, in their
    order, and topk never selects padding while real entries remain. This
    relies on the lowering (csrc/lowering/sort.cpp): one stable sort with
    NaN above every number. Ascending, the padding becomes NaN (the maximum
    for integers, True for bool): a real NaN ties with it and, stable, stays
    before it; descending (topk's largest), -inf (the minimum, False)."""
    x = args[0]
    dim, descending = _ranked_dim(node)
    dim = _norm_dim(dim, x.dim())
    e = dyn_dims(_meta(node.args[0]))[dim]
    if x.is_floating_point():
        fill = float("-inf") if descending else float("nan")
    else:
        fill = _lowest(x) if descending else _highest(x)
    x = torch.where(ctx.mask(e, x, dim), x, fill)
    return node.target(x, *args[1:], **kwargs)


def _ranked_dim(node) -> tuple:
    """(dim, descending) of a sort or topk node."""
    a, kw = node.args, node.kwargs
    if node.target is aten.topk.default:
        dim = a[2] if len(a) > 2 else kw.get("dim", -1)
        return dim, a[3] if len(a) > 3 else kw.get("largest", True)
    if node.target is aten.sort.stable:
        return kw.get("dim", -1), kw.get("descending", False)
    dim = a[1] if len(a) > 1 else kw.get("dim", -1)
    return dim, a[2] if len(a) > 2 else kw.get("descending", False)


def _index_list_rule(ctx, node, args, kwargs):
    """index.Tensor (x[idx]) with padded index tensors or into padded dims.
    A negative index into a padded dim counts from its real size; the
    padding entries of an index tensor (garbage, maybe out of range, which
    would raise at the next sync) become 0, so the result's padding reads a
    real entry and stays padding. A real index outside the real size raises
    (_outside_real)."""
    x = args[0]
    return node.target(x, _fixed_indices(ctx, node, x, args[1])[0], *args[2:], **kwargs)


def _fixed_indices(ctx, node, x, indices) -> tuple:
    """The index tensors of index/index_put with negatives wrapped by the
    real size, entries outside the real size sent out of range, padding
    entries set to 0, and where padding entries were (True; None when no
    index tensor is padded), in the broadcast shape."""
    x_dims = dyn_dims(_meta(node.args[0]))
    out, padding = [], None
    for d, (n, t) in enumerate(zip(node.args[1], indices)):
        if t is None:
            out.append(None)
            continue
        if d in x_dims:
            t = torch.where(t < 0, t + ctx.real_value(x_dims[d]), t)
            t = _outside_real(ctx, t, x_dims[d], x.shape[d])
        real = None
        for dd, e in dyn_dims(_meta(n)).items():
            m = ctx.mask(e, t, dd)
            real = m if real is None else real & m
        if real is not None:
            t = torch.where(real, t, 0)
            padding = ~real if padding is None else padding | ~real
        out.append(t)
    return out, padding


def _index_put_rule(ctx, node, args, kwargs):
    """index_put (x[idx] = v) with padded index tensors or into padded dims.
    Negative indices into a padded dim count from its real size. The writes
    of the padding entries of an index tensor would land on real entries:
    they go to one extra slot appended to x along the first indexed dim
    (cut off after the scatter), with or without accumulate."""
    x, indices = args[0], args[1]
    fixed, padding = _fixed_indices(ctx, node, x, indices)
    if padding is None:
        return node.target(x, fixed, *args[2:], **kwargs)
    d0 = next(d for d, t in enumerate(fixed) if t is not None)
    wide, slot = _dump_slot(x, d0)
    fixed[d0] = torch.where(padding, slot, fixed[d0])
    out = node.target(wide, fixed, *args[2:], **kwargs)
    return out.narrow(d0, 0, slot)


_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal")


def _sdpa_given(args, kwargs) -> dict:
    """scaled_dot_product_attention's arguments by name."""
    return dict(zip(_SDPA_ARGS, args), **kwargs)


def _sdpa_rule(ctx, node, args, kwargs):
    """scaled_dot_product_attention with its keys and values padded along
    the sequence (a decode step over a grown KV cache), as one op rather
    than the dozen of its math decomposition. The padded keys are masked
    out of the scores (False in a boolean mask, -inf in a float one; with
    is_causal, an explicit causal mask, top-left aligned as torch's), and
    the padded values are zeroed (their weight is 0, and 0 * garbage could
    be NaN). Padded query rows give padded output rows. Fully masked real
    rows stay as torch gives them: the padding adds only masked keys."""
    given = _sdpa_given(args, kwargs)
    metas = _sdpa_given(node.args, node.kwargs)
    k, v = given["key"], given["value"]
    e = dyn_dims(_meta(metas["key"])).get(k.dim() - 2)
    if e is None:
        return node.target(**given)
    kt = k.transpose(-2, -1)  # the scores' last dim is the keys'
    keep = ctx.mask(e, kt, kt.dim() - 1)
    given["value"] = torch.where(ctx.mask(e, v, v.dim() - 2), v, 0)
    mask = given.get("attn_mask")
    if given.get("is_causal"):
        q = given["query"]
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril() & keep
        given["is_causal"] = False
    elif mask is None:
        mask = keep
    elif mask.dtype == torch.bool:
        mask = mask & keep
    else:
        mask = torch.where(keep, mask, float("-inf"))
    given["attn_mask"] = mask
    return node.target(**given)


def _check_sdpa(node) -> None:
    """Padded dims _sdpa_rule covers: the keys' and values' sequence (the
    same size), the queries' rows, and the mask's matching dims."""
    given = _sdpa_given(node.args, node.kwargs)
    if given.get("dropout_p") not in (None, 0, 0.0):
        raise Unsupported(f"{node.target} with dropout on padded sizes")
    q, k, v = (_meta(given[n]) for n in ("query", "key", "value"))
    seq = dyn_dims(k).get(k.dim() - 2)
    allowed = {"query": {q.dim() - 2: dyn_dims(q).get(q.dim() - 2)}, "key": {k.dim() - 2: seq},
               "value": {v.dim() - 2: seq}}
    m = _meta(given.get("attn_mask"))
    if m is not None:
        allowed["attn_mask"] = {m.dim() - 2: dyn_dims(q).get(q.dim() - 2), m.dim() - 1: seq}
    for name, dims in allowed.items():
        for d, e in dyn_dims(_meta(given[name])).items():
            if dims.get(d) != e:
                raise Unsupported(f"{node.target} with {name} padded along dim {d}")


def _grouped_mm_rule(ctx, node, args, kwargs):
    """_grouped_mm(a (M, K), b (G, K, N), offs (G,)) on padded rows as one
    fixed-shape program. On tpu the op is ATen's composite fallback, which
    reads offs on the host and runs one mm per group at its size: the
    padded graph's trace would be cut there and compile per routing. Here
    each row's group is the number of offsets <= its index; with few rows
    (decode) each row gathers its group's matrix, else every group
    multiplies every row and each row keeps its own group's product. Rows
    past offs[-1] (the padding, when the offsets count real rows) come out
    0."""
    a, b = args[0], args[1]
    offs = args[2] if len(args) > 2 else kwargs["offs"]
    m, groups = a.shape[0], b.shape[0]
    rows = torch.arange(m, device=a.device)
    group = (rows.unsqueeze(1) >= offs.unsqueeze(0).to(rows.dtype)).sum(1)
    inside = group < groups
    if m <= groups:
        w = b.index_select(0, group.clamp(max=groups - 1))
        out = torch.bmm(a.unsqueeze(1), w).squeeze(1)
    else:
        every = torch.matmul(a.unsqueeze(0), b)  # (G, M, N)
        mine = group.unsqueeze(0) == torch.arange(groups, device=a.device).unsqueeze(1)
        out = torch.where(mine.unsqueeze(-1), every, 0).sum(0)
    return torch.where(inside.unsqueeze(-1), out, 0)


def _scatter_rule(ctx, node, args, kwargs):
    """scatter*(self, dim, index, src): the writes of the padding entries of
    index, along any of its padded dims, could land on real entries of self:
    they go to one extra slot appended to self along dim, cut off after the
    scatter (index_put does the same). Along a padded dim, a real entry
    past the real size raises (_outside_real) rather than write padding."""
    args = list(args)
    x, idx = args[0], args[2]
    dim = _norm_dim(args[1], x.dim())
    e = dyn_dims(_meta(node.args[0])).get(dim)
    if e is not None:
        idx = args[2] = _outside_real(ctx, idx, e, x.shape[dim])
    padding = None
    for d, e in dyn_dims(_meta(node.args[2])).items():
        pad = ~ctx.mask(e, idx, d)
        padding = pad if padding is None else padding | pad
    if padding is None:
        return node.target(*args, **kwargs)
    args[0], slot = _dump_slot(x, dim)
    args[2] = torch.where(padding, slot, idx)
    return node.target(*args, **kwargs).narrow(dim, 0, slot)


def _histc_rule(ctx, node, args, kwargs):
    """histc over padded dims (it flattens all): the padding becomes a value
    outside [min, max], which histc does not count (NaN for floats). With
    the data's range (min == max: HunYuan's MoE router) no value is
    outside it, so the padding becomes the first entry (a real one, so the
    range is the real entries'); each padding entry then counts once in
    that entry's bin, which a second histc with one more copy of it
    appended finds (the same bins: the same range, the same lowering)."""
    fill = _histc_fill(node)
    x = args[0]
    if fill is not None:
        return node.target(_fill_padding(ctx, x, node.args[0], fill), *args[1:], **kwargs)
    first = x.reshape(-1)[:1]
    x = _fill_padding(ctx, x, node.args[0], first.reshape([1] * x.dim()))
    counts = node.target(x, *args[1:], **kwargs)
    its_bin = node.target(torch.cat([x.reshape(-1), first]), *args[1:], **kwargs) - counts
    real = ctx.real_value(sym_expr(_meta(node.args[0]).numel()))
    return counts - its_bin * (x.numel() - real)


def _histc_fill(node):
    """The value the padding takes so that histc leaves it out, or None
    when histc takes its range from the data (min == max)."""
    a, kw = node.args, node.kwargs
    lo = a[2] if len(a) > 2 else kw.get("min", 0)
    hi = a[3] if len(a) > 3 else kw.get("max", 0)
    if lo == hi:
        return None
    dtype = _meta(node.args[0]).dtype
    if dtype.is_floating_point:
        return float("nan")
    info = torch.iinfo(dtype)
    if lo > info.min:
        return info.min
    if hi < info.max:
        return info.max
    raise Unsupported(f"{node.target} over a padded dim with the whole range of {dtype}")


def _vector_norm_rule(ctx, node, args, kwargs):
    """linalg_vector_norm over padded dims with ord >= 0 (plan refuses the
    others): the padding becomes 0 first. Exact: |0|^p adds nothing to the
    sum of a p > 0 norm, a max of absolute values (inf) is >= 0 already, and
    ord 0 counts nonzeros, which 0 is not. (Negative ords take a min or sum
    |x|^p with 0^p = inf: 0 would change them.)"""
    x = _fill_padding(ctx, args[0], node.args[0], 0, _norm_dims(node, args[0].dim()))
    return node.target(x, *args[1:], **kwargs)


def _given(node) -> dict:
    """The node's arguments by schema name."""
    names = [a.name for a in node.target._schema.arguments]
    return dict(zip(names, node.args), **node.kwargs)


def _norm_dims(node, ndim) -> set:
    """The dims linalg_vector_norm reduces (dim=None: all)."""
    return _dim_set(_given(node).get("dim"), ndim)


def _flip_rule(ctx, node, args, kwargs):
    """flip along padded dims: reversed as they are, the padding would come
    first. Along a padded dim of real size n, entry i reads n - 1 - i (a
    gather; past n the index clamps to 0, padding reading a real entry), so
    the real entries come out reversed at the front. Static dims flip as
    usual."""
    x, dims = args[0], [_norm_dim(d, args[0].dim()) for d in args[1]]
    padded = dyn_dims(_meta(node.args[0]))
    static = [d for d in dims if d not in padded]
    if static:
        x = torch.flip(x, static)
    for d in dims:
        if d in padded:
            last = ctx.real_value(padded[d]) - 1
            x = x.index_select(d, ctx.positions(x.shape[d], last, -1, x.shape[d] - 1, x.device))
    return x


def _symbolic_fill_rule(ctx, node, args, kwargs):
    """full / full_like / new_full whose fill value is a symbolic int (a
    length used as a value): filled with its real value, a 0-dim tensor
    (data, not a program constant), as fill.Tensor. Every entry, real or
    padding, gets the value torch gives: exact."""
    names = [a.name for a in node.target._schema.arguments]
    args = list(args)
    i = names.index("fill_value")
    meta = node.args[i] if i < len(node.args) else node.kwargs["fill_value"]
    value = ctx.real_tensor(sym_expr(_meta(meta)))
    if i < len(args):
        args[i] = 0
    else:
        kwargs = dict(kwargs, fill_value=0)
    out = node.target(*args, **kwargs)
    return aten.fill.Tensor(out, value)


def _view_groups(node):
    """Raises Unsupported unless the view keeps the padding of every padded
    dim at its end. The shapes are cut into groups of dims whose sizes have
    equal products (found with distinct large values for the symbols,
    checked symbolically). A padded dim (real n of padded N) merged with
    static dims inside it, (s, 4) -> (4*s,), has its real entries first:
    4*n of 4*N, a prefix, which is exactly what a padded dim of size 4*s
    holds, and a split (4*s,) -> (s, 4) is the same layout read back. A
    padded dim with non-trivial dims outside it, (2, s) -> (2*s,), or two
    padded dims in one group, (s, t) -> (s*t,), interleave padding with real
    entries: refused."""
    import sympy

    def exprs(val):
        return [sympy.sympify(e) for e in size_exprs(val)]

    x, out = _meta(node.args[0]), _meta(node)
    env = next((s.node.shape_env for s in (*x.shape, *out.shape) if isinstance(s, torch.SymInt)), None)
    sizes = [_guarded_value(e, env) for e in _rounded_up_as_multiples(exprs(x) + exprs(out), env)]
    ins, outs = sizes[:x.dim()], sizes[x.dim():]
    values = _probe_values(ins + outs, env)
    if values is None:  # sizes with a divisor that is 0 for the probe values: not compared
        raise Unsupported(f"{node.target}: sizes {ins} -> {outs} with a divisor that can be 0")
    vin, vout = values[:len(ins)], values[len(ins):]
    if 0 in vin and 0 in vout:
        return  # a static 0: no entries, so none to interleave; the padded view is as empty
    if 0 in vin or 0 in vout:
        raise Unsupported(f"{node.target} of an empty tensor with padded dims: sizes {ins} -> {outs}")
    i = j = 0
    while i < len(vin) or j < len(vout):
        gi, gj = [], []
        pi = pj = 1
        if i < len(vin):
            gi.append(i)
            pi *= vin[i]
            i += 1
        if j < len(vout):
            gj.append(j)
            pj *= vout[j]
            j += 1
        while pi != pj:
            if pi < pj and i < len(vin):
                gi.append(i)
                pi *= vin[i]
                i += 1
            elif pj < pi and j < len(vout):
                gj.append(j)
                pj *= vout[j]
                j += 1
            else:
                raise _Interleaved(f"{node.target}: no matching dims for {ins} -> {outs}")
        prod_in = sympy.Mul(*[ins[k] for k in gi])
        prod_out = sympy.Mul(*[outs[k] for k in gj])
        if sympy.expand(prod_in - prod_out) != 0:
            raise _Interleaved(f"{node.target}: sizes {ins} -> {outs} do not match symbolically")
        for side, group in ((ins, gi), (outs, gj)):
            _check_prefix_group(node, [side[k] for k in group], ins, outs)


def _probe_values(exprs, env) -> list | None:
    """Ints for the sizes `exprs`, for matching a view's groups: distinct
    large values for the symbols, or, where those make a symbolic size 0 or
    divide by 0 (LongcatFlash splits its s0 tokens by an s1 batch: s0 // s1
    is 0 when the probe gives s1 the larger value), the traced values times
    one large factor, which keep each quotient's traced value. Symbols then
    equal in value are told apart by the symbolic check of each group.
    None when neither works."""
    import sympy

    symbols = sorted(set().union(*(e.free_symbols for e in exprs)), key=str)
    tries = [{s: sympy.Integer(100003 + 1000 * i) for i, s in enumerate(symbols)}]
    hints = (getattr(env, "backed_var_to_val", None) or getattr(env, "var_to_val", None) or {}) if env else {}
    if all(s in hints for s in symbols):
        tries.append({s: 100003 * sympy.Integer(hints[s]) for s in symbols})
    for values in tries:
        try:
            ints = [int(e.xreplace(values)) for e in exprs]
        except (ZeroDivisionError, TypeError):
            continue
        if all(v > 0 or not e.free_symbols for v, e in zip(ints, exprs)):
            return ints
    return None


def _guarded_value(e, env):
    """A size that Dynamo's guards fix to one value is that value (a
    constant, not a padded dim). Mamba 2's chunked scan at a prompt shorter
    than its chunk: the guards say the sequence rounded up to 256 is 256, so
    there is one chunk, and einsum views that chunk dim of size L // 256
    away; sympy alone cannot match the view. The guards hold at the real
    sizes, not necessarily at the padded ones: a graph's sizes so fixed are
    checked per call (BoundedGraph, fixed_sizes), and a call where one
    differs padded runs at its exact sizes."""
    import sympy

    if env is None or not e.free_symbols:
        return e
    try:
        value = e.xreplace(getattr(env, "backed_var_to_val", None) or env.var_to_val)
        if value.is_Integer and env._maybe_evaluate_static(sympy.Eq(e, value)) == sympy.true:
            return value
    except Exception:  # noqa: BLE001 - a size the shape env cannot evaluate stays symbolic
        pass
    return e


def _constant_size(e, env):
    """The one value of a symbolic size for every size the graph runs at,
    or None. L // (L // 64) for L rounded up to a multiple of 64 is 64
    whatever L (Qwen3-Next's chunk length, a matrix dim of its triangular
    solves); L // 256 is 1 where Dynamo's guards say so (_guarded_value;
    GraniteMoeHybrid's single chunk). Such a dim is static, not padded: its
    padded size is its real one. A guard need not hold at the padded sizes,
    so BoundedGraph checks each such size there per call (fixed_sizes)."""
    from torch.utils._sympy.functions import FloorDiv, Mod

    if not e.has(Mod, FloorDiv):
        return None
    value = _guarded_value(_rounded_up_as_multiples([e], env)[0], env)
    return None if value.free_symbols else int(value)


def _rounded_up_as_multiples(exprs, env):
    """The sizes with every round-up written as a multiple. `x + Mod(k -
    Mod(x, k), k)` is x rounded up to a multiple of k (Mamba 2's chunked
    scan pads its sequence so, then views it as (L // k, L // (L // k))
    chunks), but sympy cannot prove L // (L // k) == k from the Mod form.
    Each `Mod(k - Mod(x, k), k)` is k*C - x for C = ceil(x / k): C is the
    value the guards fix it to (_guarded_value) or else a fresh positive
    integer symbol, so the sum becomes k*C and both floor divisions
    simplify. The view check treats a symbolic C as a padded dim, which it
    is: its real entries are the first ceil(n / k) chunks."""
    import sympy
    from torch.utils._sympy.functions import FloorDiv, Mod

    subs = {}
    for e in exprs:
        for m in e.atoms(Mod):
            a, k = m.args
            inner = [t for t in (a - k).atoms(Mod) if t.args[1] == k]
            if k.is_Integer and k > 1 and len(inner) == 1 and sympy.expand(a - k + inner[0]) == 0:
                x = inner[0].args[0]
                count = _guarded_value(FloorDiv(x + m, k), env)
                if count.free_symbols:
                    count = sympy.Symbol(f"ceil_{len(subs)}", integer=True, positive=True)
                subs[m] = k * count - x
    return [e.xreplace(subs) for e in exprs]


def _check_prefix_group(node, sizes, ins, outs) -> None:
    padded = [k for k, e in enumerate(sizes) if e.free_symbols]
    if not padded:
        return
    if len(padded) > 1:
        raise _Interleaved(f"{node.target} merges or splits two padded dims ({sizes[padded[0]]}, {sizes[padded[1]]}; "
                          f"{ins} -> {outs}): their padding would interleave with real entries")
    outer = [e for e in sizes[:padded[0]] if e != 1]
    if outer:
        raise _Interleaved(f"{node.target} merges or splits the padded dim {sizes[padded[0]]} with dims outside it "
                          f"({', '.join(map(str, outer))}; {ins} -> {outs}): its padding would interleave with "
                          "real entries")


def _check_expand(node) -> None:
    """expand: each padded dim of the result is the same padded dim of the
    input (kept whole) or a size-1 (or new leading) dim broadcast to the
    padded size, which fills real entries and padding alike with the one
    value torch repeats: exact. Refuses anything else."""
    ins = dyn_dims(_meta(node.args[0]))
    x, out = _meta(node.args[0]), _meta(node)
    lead = out.dim() - x.dim()
    for d, e in dyn_dims(out).items():
        i = d - lead
        if i >= 0 and ins.get(i) != e and x.shape[i] != 1:
            raise Unsupported(f"{node.target} merges or splits a padded dim ({list(x.shape)} -> {list(out.shape)})")


def _check_repeat(node) -> None:
    """repeat: tiling a static dim copies whole slices, so the padding of
    the padded dims inside them stays at the end of each (a prefix, as a
    padded dim holds); a size-1 (or new leading) dim repeated a symbolic
    number of times is a broadcast to the padded size, as for expand (the
    causal masks' `arange(n)[None, None].repeat(b, n, 1)`). Tiling a padded
    dim (real and padding would alternate) or a wider dim a symbolic number
    of times (a merge of that dim with a padded count) is refused."""
    x = _meta(node.args[0])
    padded = dyn_dims(x)
    reps = node.args[1]
    lead = len(reps) - x.dim()
    for i, r in enumerate(reps):
        d = i - lead
        symbolic = sym_expr(_meta(r)) is not None
        if d in padded and (symbolic or r != 1):
            raise Unsupported(f"{node.target} tiles the padded dim {d}")
        if symbolic and d >= 0 and x.shape[d] != 1:
            raise Unsupported(f"{node.target}: a symbolic count for dim {d} of size {x.shape[d]}")


def _check_unfold(node) -> Callable:
    """unfold(dim, size, step): along a padded dim the windows are taken
    from its start, so the first (n - size) // step + 1 (the real ones)
    read real entries only and the rest are padding: it runs as it is, and
    the window count's padded value is what unfold gives at the padded
    length. Along a static dim the padded dims are kept. A symbolic window
    size or step is refused."""
    x = _meta(node.args[0])
    if _sym_args(node):
        raise Unsupported(f"{node.target} with a symbolic window")
    if _norm_dim(node.args[1], max(x.dim(), 1)) in dyn_dims(x):
        return run_plain
    if not _preserves_padded_dims(node):
        raise Unsupported(f"{node.target} merges or splits a padded dim")
    return run_plain


# ---- choosing a rule ------------------------------------------------------------

_PASSIVE = {
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default,
    aten.permute.default, aten.transpose.int, aten.t.default, aten.unsqueeze.default,
    aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.clone.default,
    aten._to_copy.default, aten.alias.default, aten.detach.default, aten.lift_fresh_copy.default,
    aten.embedding.default, aten.index_select.default, aten.contiguous.default,
    aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int, aten.tril.default, aten.triu.default,
    aten.native_layer_norm.default, aten.view_as_real.default, aten.view_as_complex.default,
}

# Factories: their padded sizes are simply the padded shape.
_FACTORIES = {
    aten.arange.default, aten.arange.start, aten.arange.start_step, aten.full.default, aten.zeros.default,
    aten.ones.default, aten.empty.memory_format, aten.new_zeros.default, aten.new_ones.default,
    aten.new_empty.default, aten.new_full.default, aten.empty_strided.default,
    aten.empty_permuted.default, aten.empty_like.default, aten.zeros_like.default, aten.ones_like.default,
    aten.full_like.default,
    # eye(n[, m]) at padded sizes holds eye(n[, m]) in its top-left block
    aten.eye.default, aten.eye.m,
}

# Views that may merge or split dims (_view_groups says which are exact).
_VIEWS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default}

_SCATTERS = {aten.scatter.value, aten.scatter.src, aten.scatter_add.default, aten.scatter_reduce.two,
             aten.scatter.value_reduce, aten.scatter.reduce}

_INDEX_PUTS = {aten.index_put.default, aten._unsafe_index_put.default}

# Elementwise ops without the pointwise tag.
# polar(abs, angle) and log_sigmoid_forward (its output and buffer) read
# one entry of each operand per result entry.
_POINTWISE = {aten.floor_divide.default, aten.floor_divide.Scalar, aten.polar.default,
              aten.log_sigmoid_forward.default}

_MASKED_REDUCTIONS = {
    aten.sum.dim_IntList: lambda x: 0, aten.sum.default: lambda x: 0,
    aten.amax.default: _lowest, aten.amin.default: _highest,
    aten.argmax.default: _lowest, aten.argmin.default: _highest,
    aten.max.dim: _lowest, aten.min.dim: _highest, aten.max.default: _lowest, aten.min.default: _highest,
    aten._softmax.default: lambda x: float("-inf"), aten._log_softmax.default: lambda x: float("-inf"),
    aten._safe_softmax.default: lambda x: float("-inf"),
    aten.logsumexp.default: lambda x: float("-inf"),
    aten.any.dim: lambda x: False, aten.any.dims: lambda x: False, aten.any.default: lambda x: False,
    aten.all.dim: lambda x: True, aten.all.dims: lambda x: True, aten.all.default: lambda x: True,
    aten.prod.dim_int: lambda x: 1,
}

_CONTRACTIONS = {
    aten.mm.default: _contraction(1, 0), aten.bmm.default: _contraction(2, 1),
    aten.addmm.default: _contraction(1, 0, 1, 2), aten.baddbmm.default: _contraction(2, 1, 1, 2),
    aten.dot.default: _contraction(0, 0), aten.mv.default: _contraction(1, 0),
}

_SYM_OPS = {
    operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod, operator.neg,
    operator.truediv, operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge,
    torch.sym_max, torch.sym_min, torch.sym_float, torch.sym_int, torch.sym_sum,
}

_ASSERTS = {"_assert_scalar", "sym_constrain_range", "sym_constrain_range_for_size",
            "_assert_tensor_metadata"}

_FILLS = {aten.full.default, aten.full_like.default, aten.new_full.default}


def _preserves_padded_dims(node) -> bool:
    """Views and friends are safe when every padded dim of the result is a
    padded dim of an input (moved or kept, never merged or split)."""
    ins = set()
    for n in _tensor_args(node):
        ins.update(dyn_dims(_meta(n)).values())
    outs = _meta(node)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    for o in outs:
        for e in dyn_dims(o).values():
            if e not in ins:
                return False
    return True


# Int arguments that are sizes of the result, per op: the padded value makes
# the padded tensor, whose real entries are the real result's. Elsewhere a
# size changes values (linspace's steps, randperm's n, an interpolation's
# output_size: its boundary reads past the real entries) and needs a rule.
_SIZE_ARGS_OF = {
    **{op: {"size"} for op in ("view", "_unsafe_view", "expand", "full", "zeros", "ones", "empty", "new_zeros",
                               "new_ones", "new_empty", "new_full", "empty_permuted")},
    **{op: {"size", "stride"} for op in ("empty_strided", "new_empty_strided")},
    "reshape": {"shape"}, "repeat": {"repeats"}, "arange": {"end"}, "eye": {"n", "m"},
    "split": {"split_size"}, "split_with_sizes": {"split_sizes"}, "topk": {"k"}, "constant_pad_nd": {"pad"},
    "narrow": {"length"},
}


def _check_sym_args_are_sizes(node) -> None:
    """A symbolic int becomes its padded value, which is right for sizes
    only; as any other value (a fill value, an index, tril's diagonal,
    roll's shifts) it needs a rule: the real value counts there, and the
    padded one gave silently wrong results (`x.tril(x.shape[1] - 4)`).
    Symbolic floats and bools were refused before (_check_no_symbolic_floats)."""
    schema = node.target._schema
    by_name = {a.name: a for a in schema.arguments}
    sizes = _SIZE_ARGS_OF.get(schema.name.split("::")[-1], set())

    def check(a, arg):
        bad = []
        torch.fx.node.map_arg(a, lambda n: bad.append(n) if sym_expr(_meta(n)) is not None else None)
        if bad and (arg is None or arg.name not in sizes):
            raise Unsupported(f"{node.target}: symbolic value in argument '{arg.name if arg else '?'}'")

    for i, a in enumerate(node.args):
        check(a, schema.arguments[i] if i < len(schema.arguments) else None)
    for k, a in node.kwargs.items():
        check(a, by_name.get(k))


def _check_no_symbolic_floats(node) -> None:
    """A float or bool made from a size (`x * (n / 2)`) would be computed
    from the padded size, and no rule gives its real value."""
    found = []
    torch.fx.node.map_arg((node.args, node.kwargs), lambda n: found.append(n) if isinstance(
        _meta(n), (torch.SymFloat, torch.SymBool)) and _meta(n).node.expr.free_symbols else None)
    if found:
        raise Unsupported(f"{node.target}: a symbolic {type(_meta(found[0])).__name__} argument")


def _involves_padding(node) -> bool:
    if _sym_args(node):
        return True
    outs = _meta(node)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    if any(dyn_dims(o) for o in outs):
        return True
    return any(dyn_dims(_meta(n)) for n in _tensor_args(node))


# Ops whose symbolic int arguments are sizes of the result (padded, a size
# takes its bucket) or that their rules read at the real value (slice and
# select bounds, a right pad, arange's start, a fill value); plan checks
# the rest of each (left pads, views that interleave padding, ...).
_INT_ARGS_SIZED = _FACTORIES | _VIEWS | {
    aten.expand.default, aten.repeat.default, aten.select.int, aten.constant_pad_nd.default,
    aten.select_scatter.default,
}

_INT_VALUED_SYM_OPS = {operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod,
                       operator.neg, torch.sym_max, torch.sym_min, torch.sym_sum}


def unsafe_int_use(gm: torch.fx.GraphModule, sym) -> str | None:
    """Why the symbol `sym` of a symbolic int input that is no input's size
    (an int argument under `dynamic=True`: XLM's `get_masks(slen, ...)`
    makes `arange(slen)`) cannot be bucketed, or None when it can: every
    node that takes an int involving it uses the int as a size of its
    result (a factory, view, expand, repeat: the padded value makes the
    padded tensor) or through a rule that reads its real value (slice
    start and end, select index, right pad, a pointwise operand, arange
    start, fill value), or is int arithmetic whose results are checked the
    same way where used. Anything else (`tril(diagonal=n)`, `roll(shifts=n)`,
    a slice step, a float or bool made from it) would see the padded value
    where the real one counts: the symbol then stays exact."""
    def involves(a) -> bool:
        found = []
        torch.fx.node.map_arg(a, lambda n: found.append(n) if isinstance(_meta(n), torch.SymInt)
                              and sym in getattr(_meta(n).node.expr, "free_symbols", ()) else None)
        return bool(found)

    for node in gm.graph.nodes:
        if node.op != "call_function" or not involves((node.args, node.kwargs)):
            continue
        t = node.target
        if t in _INT_VALUED_SYM_OPS and isinstance(_meta(node), torch.SymInt):
            continue
        if isinstance(_meta(node), torch.SymBool) and all(
                isinstance(u.target, torch._ops.OpOverload) and u.target._schema.name.split("::")[-1] in _ASSERTS
                for u in node.users):
            continue  # a runtime assert's condition: plan skips asserts (Dynamo's guards checked them)
        if isinstance(t, torch._ops.OpOverload):
            if t._schema.name.split("::")[-1] in _ASSERTS:
                continue
            if t in (aten.slice.Tensor, aten.slice_scatter.default):
                if involves(_slice_args(node).get("step")):
                    return f"{t}: a symbolic step"
                continue
            if t in _INT_ARGS_SIZED or torch.Tag.pointwise in t.tags or t in _POINTWISE:
                continue
        return f"{getattr(t, '__name__', t)} takes it as a value"
    return None


def plan(node: torch.fx.Node) -> Callable:
    """The rule that runs `node` on padded values; raises Unsupported."""
    t = node.target
    if t is operator.getitem:
        return lambda ctx, node, args, kwargs: args[0][args[1]]
    if t in _SYM_OPS:
        return lambda ctx, node, args, kwargs: t(*args, **kwargs)
    name = getattr(t, "__name__", "")
    if isinstance(t, torch._ops.OpOverload) and t._schema.name.split("::")[-1] in _ASSERTS:
        return lambda ctx, node, args, kwargs: None  # Dynamo's guards already checked them
    if isinstance(t, torch._ops.OpOverload) and t._schema.name == "aten::_assert_async":
        # torch._assert_async(cond): a check on the device (lowering/
        # index_check.cpp). A one-element cond with a padded dim has a
        # padded numel above 1: skipped, as every assert was before.
        if dyn_dims(_meta(node.args[0])):
            return lambda ctx, node, args, kwargs: None
        return run_plain
    if t is aten.sym_size.int:
        return lambda ctx, node, args, kwargs: args[0].shape[args[1]]
    if t is aten.sym_numel.default:
        return lambda ctx, node, args, kwargs: args[0].numel()
    if not isinstance(t, torch._ops.OpOverload):
        raise Unsupported(f"call to {name or t}")
    _check_no_symbolic_floats(node)
    if not _involves_padding(node):
        return run_plain
    x = _meta(node.args[0]) if node.args else None
    padded_in = dyn_dims(x)
    if t is aten.cat.default:
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        if _norm_dim(dim, _meta(node).dim()) in dyn_dims(_meta(node)):
            return _cat_rule
        return run_plain
    if t is aten.slice.Tensor:
        dim = _norm_dim(node.args[1] if len(node.args) > 1 else 0, x.dim())
        if dim in padded_in or _sym_args(node):
            return _slice_rule
        return run_plain
    if t is aten.select.int:
        dim = _norm_dim(node.args[1], x.dim())
        if dim in padded_in or _sym_args(node):
            return _select_rule
        return run_plain
    if t in (aten.slice_scatter.default, aten.select_scatter.default):
        # Writing a slice of a static dim with static bounds moves no entry
        # along a padded one (self and src are padded alike); along a
        # padded dim, or with a symbolic bound, the positions written count
        # from the real sizes.
        vals = _slice_args(node)
        dim = _norm_dim(vals["dim"] or 0, x.dim())
        if not _preserves_padded_dims(node):
            raise Unsupported(f"{t} into a padded dim its source lacks")
        if t is aten.select_scatter.default:
            if _sym_args(node) or (dim in padded_in and int(vals["index"]) < 0):
                return _select_scatter_rule
            return run_plain  # a static index >= 0 is the same position padded
        if sym_expr(_meta(vals["step"])) is not None:
            raise Unsupported(f"{t} with a symbolic step")
        if dim in padded_in or dim in dyn_dims(_meta(node.args[1])) or _sym_args(node):
            return _slice_scatter_rule
        return run_plain
    if t in (aten.arange.start, aten.arange.start_step) and sym_expr(_meta(node.args[0])) is not None:
        if len(node.args) > 2 and sym_expr(_meta(node.args[2])) is not None:
            raise Unsupported(f"{t} with a symbolic step")
        return _arange_start_rule
    if t in _FILLS:
        fill = _given(node).get("fill_value")
        if sym_expr(_meta(fill)) is not None:
            return _symbolic_fill_rule
    if not (torch.Tag.pointwise in t.tags or t in _POINTWISE):
        _check_sym_args_are_sizes(node)
    if t is aten.mean.dim or t is aten.mean.default:
        return _mean_rule if set(padded_in) & _reduced_dims(node, x.dim()) else run_plain
    if t in _MASKED_REDUCTIONS:
        if set(padded_in) & _reduced_dims(node, x.dim()):
            dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
            if t in (aten.argmax.default, aten.argmin.default) and dim is None:
                raise Unsupported(f"{t} over all dims of a padded tensor (a flat index)")
            return _masked(_MASKED_REDUCTIONS[t])
        return run_plain
    if t is aten.linalg_vector_norm.default:
        if not set(padded_in) & _norm_dims(node, x.dim()):
            return run_plain
        order = _given(node).get("ord", 2)
        if not isinstance(order, (int, float)) or order < 0:
            raise Unsupported(f"{t} with ord {order} over a padded dim (0 is not its identity)")
        return _vector_norm_rule
    if t in _CONTRACTIONS:
        return _CONTRACTIONS[t]
    if t is aten.linalg_solve_triangular.default:
        # One solve per batch entry (Qwen3-Next's chunked delta rule solves
        # a 64x64 system per chunk; the chunk count is the padded dim): a
        # padded batch entry's garbage stays in its own solution.
        for n in node.args[:2]:
            v = _meta(n)
            if any(d >= v.dim() - 2 for d in dyn_dims(v)):
                raise Unsupported(f"{t} with a padded matrix dim ({list(v.shape)})")
        return run_plain
    if t is aten.native_layer_norm.default:
        normalized = len(node.args[1])
        if any(d >= x.dim() - normalized for d in padded_in):
            raise Unsupported("layer norm over a padded dim")
        return run_plain
    if t in (aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int):
        dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
        if t is aten.unbind.int:
            dim = node.args[1] if len(node.args) > 1 else 0
        if _norm_dim(dim, x.dim()) in padded_in:
            if t is aten.unbind.int:
                raise Unsupported(f"{t} along a padded dim")
            return _split_rule
    if t in (aten.cumsum.default, aten.cumprod.default, aten.logcumsumexp.default,
             aten.cummax.default, aten.cummin.default):
        # a prefix scan: a real entry reads only the entries before it,
        # real too, along any dim (position ids from attention_mask.cumsum)
        return run_plain
    if t in (aten.topk.default, aten.sort.default, aten.sort.stable):
        # Along a static dim each row is ranked on its own (an MoE router's
        # top-k experts per token): padded rows give garbage rows, which
        # stay padding. Along a padded dim the padding is ranked last.
        if _norm_dim(_ranked_dim(node)[0], x.dim()) in padded_in:
            return _ranked_rule
        return run_plain
    if t is aten.index.Tensor or t in _INDEX_PUTS:
        for n in node.args[1]:
            if n is not None and _meta(n).dtype in (torch.bool, torch.uint8):
                raise Unsupported(f"{t} with a boolean mask on padded sizes")
        return _index_list_rule if t is aten.index.Tensor else _index_put_rule
    if t is aten.gather.default:
        # Off `dim`, out and index have the index's sizes and read x at the
        # same positions: a padded index dim must be x's same padded dim
        # (a static one stays inside x's real entries, as torch checks).
        gdim = _norm_dim(node.args[1], max(x.dim(), 1))
        padded_x = dyn_dims(x)
        for d, e in dyn_dims(_meta(node.args[2])).items():
            if d != gdim and padded_x.get(d) != e:
                raise Unsupported(f"{t}: padded index dim {d} that the input lacks")
        return _gather_rule
    if t in _SCATTERS:
        return _scatter_rule
    if t is aten.histc.default:
        _histc_fill(node)
        return _histc_rule
    if t is aten.scaled_dot_product_attention.default:
        _check_sdpa(node)
        return _sdpa_rule
    if t is aten._grouped_mm.default:
        # 2-D rows times 3-D experts: each output row depends on its own row
        # and its group alone, so padded rows (past offs[-1] when the
        # offsets count real rows: the histc rule) stay padding.
        a, b = _meta(node.args[0]), _meta(node.args[1])
        others = [n for n in _tensor_args(node)[1:] if dyn_dims(_meta(n))]
        if a.dim() != 2 or b.dim() != 3 or set(dyn_dims(a)) - {0} or others:
            raise Unsupported(f"{t} with a padded contracted, group or batch dim")
        names = [x.name for x in t._schema.arguments]
        given = dict(zip(names, node.args), **node.kwargs)
        if given.get("bias") is not None or given.get("out_dtype") not in (None, a.dtype):
            raise Unsupported(f"{t} with bias or out_dtype on padded sizes")
        return _grouped_mm_rule
    if t is aten.constant_pad_nd.default:
        pad = node.args[1]
        if any(sym_expr(_meta(p)) is not None for p in pad[0::2]):
            raise Unsupported(f"{t} with a symbolic left pad (it shifts the real entries by their real size)")
        return _constant_pad_rule
    if t is aten.convolution.default:
        if any(dyn_dims(_meta(n)) for n in node.args[1:3]):
            raise Unsupported(f"{t} with a padded weight or bias")
        return _conv_rule
    if t is aten.copy.default:
        # copy(self, src): src broadcast into self's shape, entry by entry
        # (functionalised `x[...].copy_(y)`); padding stays padding.
        if not _preserves_padded_dims(node):
            raise Unsupported(f"{t} into a padded dim its source lacks")
        return run_plain
    if torch.Tag.pointwise in t.tags or t in _POINTWISE:
        return _scalar_operands(node) if _sym_args(node) else run_plain
    if t in _FACTORIES:
        return run_plain
    if t is aten.expand.default:
        _check_expand(node)
        return run_plain
    if t is aten.repeat.default:
        _check_repeat(node)
        return run_plain
    if t is aten.flip.default:
        return _flip_rule if set(padded_in) & {_norm_dim(d, x.dim()) for d in node.args[1]} else run_plain
    if t is aten.unfold.default:
        return _check_unfold(node)
    if t in _VIEWS:
        try:
            _view_groups(node)
        except _Interleaved:
            return _relayout_rule
        return _view_rule if t is not aten.reshape.default else run_plain
    if t in _PASSIVE:
        if not _preserves_padded_dims(node):
            raise Unsupported(f"{t} merges or splits a padded dim")
        return _view_rule if t in (aten.view.default, aten._unsafe_view.default) else run_plain
    raise Unsupported(f"{t} on padded sizes")
