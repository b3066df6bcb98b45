"""JAX and Pallas functions as torch ops on tpu tensors (`torch_tpu.jax_op`,
also `torch.tpu.pallas.jax_op`).

`jax_op(name, fn)` defines the `torch.library` op
`tpu_jax::<name>(Tensor[] tensors, str spec) -> Tensor[]` and returns a
callable taking `fn`'s own arguments. Tensor arguments become the op's
tensors; every other argument is static: it is written into `spec` (a
Python literal), which is part of the program key. What runs is jax's own
lowering of `fn` (`jax.jit(fn).lower(...)`), embedded into an ordinary op
program by the C++ engine (csrc/lowering/jax_call.cpp), so the op reads its
inputs' storage buffers directly (no copy, no host round trip), runs in
Strict Eager, joins Fused Eager traces and `torch.compile` graphs like any
ATen op. Its fake kernel is `jax.eval_shape`, so Dynamo traces it without a
graph break. Unless a backward is given, its backward is `jax.vjp` of the
same function, itself a jax_op (so higher derivatives work the same way).

Python here does only what must be Python: the torch.library registration
and the jax tracing. Program building, caching and execution are the C++
engine's.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Callable, Optional, Sequence

import torch

from . import _C

__all__ = ["jax_op", "JaxOp"]

_NAMESPACE = "tpu_jax"
_LIB = torch.library.Library(_NAMESPACE, "FRAGMENT")
_OPS: dict[str, "JaxOp"] = {}
_STATIC_TYPES = (int, float, bool, str, type(None))

# torch dtype <-> jax dtype name <-> StableHLO element name (hlo/types.h).
_TORCH_TO_JAX = {
    torch.float32: "float32", torch.float64: "float64", torch.float16: "float16", torch.bfloat16: "bfloat16",
    torch.int8: "int8", torch.int16: "int16", torch.int32: "int32", torch.int64: "int64", torch.uint8: "uint8",
    torch.uint32: "uint32", torch.uint64: "uint64", torch.bool: "bool", torch.complex64: "complex64",
    torch.complex128: "complex128",
}
_JAX_TO_TORCH = {v: k for k, v in _TORCH_TO_JAX.items()}
_HLO_TO_JAX = {
    "f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16", "i8": "int8", "i16": "int16",
    "i32": "int32", "i64": "int64", "ui8": "uint8", "ui32": "uint32", "ui64": "uint64", "i1": "bool",
    "complex<f32>": "complex64", "complex<f64>": "complex128",
}


def _jax():
    import jax

    # The runtime runs with x64 on (torch's default integer is int64); the
    # shapes jax infers must be the ones it will lower.
    jax.config.update("jax_enable_x64", True)
    return jax


def _check_static(value: Any, where: str, op: str) -> None:
    if isinstance(value, (tuple, list)):
        for v in value:
            _check_static(v, where, op)
    elif not isinstance(value, _STATIC_TYPES):
        raise TypeError(f"torch_tpu.jax_op '{op}': {where} is a {type(value).__name__}; non-tensor arguments are "
                        "static and must be Python literals (numbers, strings, bools, None, tuples of them)")


def _describe(avals) -> str:
    return ", ".join(f"{dt}{list(shape)}" for shape, dt in avals) or "no tensors"


class JaxOp:
    """A jax function registered as `torch.ops.tpu_jax.<name>` (see module doc)."""

    def __init__(self, name: str, fn: Callable, backward: Optional[Callable] = None,
                 _flat: Optional[Callable[[str], Callable]] = None):
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
            raise ValueError(f"torch_tpu.jax_op: op name {name!r} must be an identifier")
        if name in _OPS:
            raise ValueError(f"torch_tpu.jax_op: an op named {name!r} is already registered")
        self.name = name
        self.fn = fn
        self._user_backward = backward
        self._make_flat = _flat or self._flat_forward
        self._flats: dict[str, Callable] = {}
        self._vjp: Optional[JaxOp] = None
        _C._register_jax_op(name)  # raises if a built-in rule has this name
        _LIB.define(f"{name}(Tensor[] tensors, str spec) -> Tensor[]")
        self.qualname = f"{_NAMESPACE}::{name}"
        torch.library.register_fake(self.qualname, self._fake, lib=_LIB)
        torch.library.register_autograd(self.qualname, self._backward, setup_context=self._setup_context, lib=_LIB)
        self.op = getattr(getattr(torch.ops, _NAMESPACE), name).default
        _OPS[name] = self
        if _flat is None:
            # Defined now, not in the middle of an AOTAutograd trace of the backward.
            _ = self.vjp_op

    # ---- calling ------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        keywords = ()
        if kwargs:
            args, keywords = self._positional(args, kwargs)
        tensors = []
        statics = []
        where = []
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                if a.device.type != "tpu":
                    raise RuntimeError(f"torch_tpu.jax_op '{self.name}': argument {i} is on {a.device}; "
                                       "expected a tpu tensor")
                if a.dtype not in _TORCH_TO_JAX:
                    raise TypeError(f"torch_tpu.jax_op '{self.name}': argument {i} has dtype {a.dtype}, "
                                    "which jax has no type for")
                tensors.append(a)
                where.append(i)
            else:
                _check_static(a, f"argument {i}", self.name)
                statics.append(a)
        if not tensors:
            raise RuntimeError(f"torch_tpu.jax_op '{self.name}' needs at least one tpu tensor argument")
        spec = repr((len(args), tuple(where), tuple(statics)) + ((keywords,) if keywords else ()))
        outs = self.op(tensors, spec)
        # One array out gives a tensor, several (a tuple, a pytree) a tuple.
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _positional(self, args, kwargs) -> tuple[tuple, tuple]:
        """The call's arguments in `fn`'s order (keywords bound by its
        signature, defaults filled in), so that a keyword argument keys the
        program as the same positional one would; and the keyword-only ones
        passed, sorted by name (static: the reference's static_argnames)."""
        import inspect

        try:
            sig = inspect.signature(self.fn)
            bound = sig.bind(*args, **kwargs)
        except (TypeError, ValueError) as e:
            raise TypeError(f"torch_tpu.jax_op '{self.name}': {e}") from None
        bound.apply_defaults()
        keyword_only = {name: v for name, v in bound.kwargs.items() if name in kwargs}
        for name, v in keyword_only.items():
            if isinstance(v, torch.Tensor):
                raise TypeError(f"torch_tpu.jax_op '{self.name}': keyword-only argument {name!r} is a tensor; "
                                "tensors are passed by position")
            _check_static(v, f"argument {name!r}", self.name)
        return bound.args, tuple(sorted(keyword_only.items()))

    # ---- jax side ------------------------------------------------------------
    def _flat_forward(self, spec: str) -> Callable:
        """fn as a function of its tensors only, returning a tuple of arrays."""
        jax = _jax()
        n, where, statics, *keywords = ast.literal_eval(spec)
        keywords = dict(keywords[0]) if keywords else {}
        fn = self.fn

        def flat(*tensors):
            args = list(statics)
            for pos, t in zip(where, tensors):
                args.insert(pos, t)
            return tuple(jax.tree_util.tree_leaves(fn(*args, **keywords)))

        return flat

    def flat(self, spec: str) -> Callable:
        f = self._flats.get(spec)
        if f is None:
            f = self._flats[spec] = self._make_flat(spec)
        return f

    def _avals(self, avals):
        jax = _jax()
        import jax.numpy as jnp

        return [jax.ShapeDtypeStruct(tuple(shape), jnp.dtype(dt)) for shape, dt in avals]

    def _failed(self, what: str, avals, spec: str, e: Exception) -> RuntimeError:
        statics = ast.literal_eval(spec)
        statics = statics[2] if len(statics) >= 3 else statics[1]  # a vjp op's spec wraps its forward's
        return RuntimeError(f"torch_tpu.jax_op '{self.name}': {what} failed for inputs ({_describe(avals)}), "
                            f"static arguments {statics}: {type(e).__name__}: {e}")

    def eval_shape(self, spec: str, avals):
        """[(shape, jax dtype name)] of the outputs for [(shape, jax dtype name)] inputs."""
        jax = _jax()
        try:
            out = jax.eval_shape(self.flat(spec), *self._avals(avals))
        except Exception as e:  # the user's function (or jax) rejected these inputs
            raise self._failed("the jax function", avals, spec, e) from e
        res = []
        for o in out:
            if o.dtype.name not in _JAX_TO_TORCH:
                raise TypeError(f"torch_tpu.jax_op '{self.name}': output dtype {o.dtype} has no torch dtype")
            res.append((tuple(o.shape), o.dtype.name))
        if not res:
            raise RuntimeError(f"torch_tpu.jax_op '{self.name}': the jax function returned no arrays")
        return res

    def lower(self, spec: str, avals) -> str:
        """jax's StableHLO text of the flat function for these inputs."""
        jax = _jax()
        try:
            # keep_unused: the program takes every tensor, used or not. Lowered
            # for the platform our runtime runs on (TORCH_TPU_PLATFORM may
            # differ from jax's default backend).
            traced = jax.jit(self.flat(spec), keep_unused=True).trace(*self._avals(avals))
            return traced.lower(lowering_platforms=(_C._platform()[0],)).as_text()
        except Exception as e:
            raise self._failed("lowering the jax function", avals, spec, e) from e

    # ---- torch.library kernels ------------------------------------------------------
    def _fake(self, tensors, spec):
        # Symbolic sizes are specialised (jax lowers static shapes).
        avals = [(tuple(int(s) for s in t.shape), _TORCH_TO_JAX[t.dtype]) for t in tensors]
        dev = tensors[0].device
        return [torch.empty(shape, dtype=_JAX_TO_TORCH[dt], device=dev) for shape, dt in self.eval_shape(spec, avals)]

    def _setup_context(self, ctx, inputs, output):
        tensors, spec = inputs
        ctx.save_for_backward(*tensors)
        ctx.spec = spec
        ctx.outs = [(o.shape, o.dtype) for o in output]

    def _backward(self, ctx, grads):
        tensors = list(ctx.saved_tensors)
        cts = [g if g is not None else torch.zeros(shape, dtype=dt, device=tensors[0].device)
               for g, (shape, dt) in zip(grads, ctx.outs)]
        res = self.vjp_op.op(tensors + cts, repr((len(tensors), ctx.spec)))
        it = iter(res)
        return [next(it) if _differentiable(t) else None for t in tensors], None

    @property
    def vjp_op(self) -> "JaxOp":
        """The backward as a jax_op: (primals..., cotangents...) -> gradients of the float inputs. Its
        spec is (number of primals, the forward's spec)."""
        if self._vjp is None:
            self._vjp = JaxOp(self.name + "_vjp", None, _flat=self._flat_vjp)
        return self._vjp

    def _flat_vjp(self, spec: str) -> Callable:
        jax = _jax()
        k, fwd_spec = ast.literal_eval(spec)
        fwd = self.flat(fwd_spec)
        user = self._user_backward
        if user is not None:  # only forward ops take a backward: their spec has the statics
            _, where, statics, *keywords = ast.literal_eval(fwd_spec)
            keywords = dict(keywords[0]) if keywords else {}

        def flat(*ts):
            prims, cts = list(ts[:k]), tuple(ts[k:])
            diff = [i for i, p in enumerate(prims) if _jax_differentiable(p.dtype)]
            if user is not None:
                args = list(statics)
                for pos, t in zip(where, prims):
                    args.insert(pos, t)
                ct = cts[0] if len(cts) == 1 else cts
                grads = jax.tree_util.tree_leaves(user(*args, ct, **keywords))
                if len(grads) == len(prims):
                    grads = [grads[i] for i in diff]
                return tuple(grads)

            def of_diff(*d):
                full = list(prims)
                for i, v in zip(diff, d):
                    full[i] = v
                return fwd(*full)

            _, pullback = jax.vjp(of_diff, *[prims[i] for i in diff])
            # Integer outputs (an argmax) take float0 cotangents in jax;
            # torch hands zeros of their dtype.
            import numpy as np

            cts = tuple(c if _jax_differentiable(c.dtype) else np.zeros(c.shape, jax.dtypes.float0) for c in cts)
            return tuple(pullback(cts))

        return flat


def _differentiable(t: torch.Tensor) -> bool:
    return t.dtype.is_floating_point or t.dtype.is_complex


def _jax_differentiable(dtype) -> bool:
    import jax.numpy as jnp

    return jnp.issubdtype(dtype, jnp.inexact)


def _lower(name: str, spec: str, types) -> str:
    """Called by the C++ rule (lowering/jax_call.cpp) on a program-cache miss."""
    return _OPS[name].lower(spec, [(shape, _HLO_TO_JAX[el]) for shape, el in types])


_C._set_jax_lowerer(_lower)


def jax_op(name: str, fn: Optional[Callable] = None, /, *, backward: Optional[Callable] = None,
           donate_argnums: Optional[Sequence[int]] = None, mesh: Any = None,
           input_partition_specs: Any = None, output_partition_specs: Any = None):
    """Registers `fn` (plain `jax.numpy`, or calling a Pallas `pallas_call`)
    as the torch op `torch.ops.tpu_jax.<name>` on tpu tensors and returns a
    callable with `fn`'s signature. Without `fn`, returns a decorator (the
    reference's `@torch.tpu.pallas.jax_op("ns::op")`).

    `name` is an identifier, or the reference's "namespace::op" (the op is
    then `torch.ops.tpu_jax.<namespace>__<op>`). Tensor arguments are the
    op's inputs; other arguments, positional or keyword, are static Python
    literals, part of the program key. `fn` returns one array (the op
    returns a tensor) or a tuple / pytree of arrays (a tuple).
    `backward(*args, cotangent)`, if given, is a jax function returning one
    gradient per tensor argument (or per floating-point tensor argument);
    otherwise the backward is `jax.vjp` of `fn` (which honours
    `jax.custom_vjp`).

    The reference's other arguments (docs/design.md, "JAX and Pallas
    kernels as ops"): `donate_argnums` is checked and accepted, and the
    donated tensors stay valid here (the reference leaves them invalid, so
    a script that follows it never reads them again); `mesh` may span one
    device (get_pallas_mesh() outside a job), whose partition specs change
    no shape; a kernel over several ranks' devices raises
    NotImplementedError."""
    if fn is None:
        return lambda f: jax_op(name, f, backward=backward, donate_argnums=donate_argnums, mesh=mesh,
                                input_partition_specs=input_partition_specs,
                                output_partition_specs=output_partition_specs)
    op_name = _op_name(name)
    _check_reference_args(op_name, fn, donate_argnums, mesh)
    return JaxOp(op_name, fn, backward=backward)


def _op_name(name: str) -> str:
    """Our op name for `name`: the reference's "namespace::op" joined by "__"."""
    if not isinstance(name, str):
        raise TypeError(f"torch_tpu.jax_op: the op name must be a str, got {type(name).__name__}")
    if "::" not in name:
        return name
    parts = name.split("::")
    if len(parts) != 2 or not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p) for p in parts):
        raise ValueError(f"torch_tpu.jax_op: op name {name!r} must be an identifier or 'namespace::op'")
    return f"{parts[0]}__{parts[1]}"


def _check_reference_args(name: str, fn: Callable, donate_argnums, mesh) -> None:
    if donate_argnums is not None:
        import inspect

        try:
            n = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                    for p in inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):  # a builtin or jitted callable without a signature
            n = None
        for i in donate_argnums:
            if not isinstance(i, int) or i < 0 or (n is not None and i >= n):
                raise ValueError(f"torch_tpu.jax_op '{name}': donate_argnums {tuple(donate_argnums)} names no "
                                 f"positional argument of the function ({n} of them)")
    if mesh is not None:
        size = getattr(getattr(mesh, "devices", None), "size", None)
        if size is None:
            raise TypeError(f"torch_tpu.jax_op '{name}': mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}")
        if size != 1:
            raise NotImplementedError(
                f"torch_tpu.jax_op '{name}': a kernel over a mesh of {size} devices (one per rank) is not "
                "supported by this backend yet; call it per rank on local tensors, with torch.distributed "
                "collectives around it")
