"""Argument checks shared by torch.tpu.ops: a wrong argument raises a Python
exception naming the op and the shapes, before anything reaches jax or the
engine (whose own errors would name an internal op instead)."""

from __future__ import annotations

import torch


def describe(t: torch.Tensor) -> str:
    return f"{t.dtype} {list(t.shape)} on {t.device}"


def tensor(op: str, name: str, t, *, device: str = "tpu", ranks=None, floating=False, integer=False):
    """Checks one tensor argument of `torch.tpu.ops.<op>`."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"torch.tpu.ops.{op}: {name} must be a tensor, got {type(t).__name__}")
    if device is not None and t.device.type != device:
        raise RuntimeError(f"torch.tpu.ops.{op}: {name} ({describe(t)}) must be a {device} tensor")
    if ranks is not None and t.dim() not in ranks:
        want = " or ".join(f"{r}-D" for r in ranks)
        raise ValueError(f"torch.tpu.ops.{op}: {name} must be {want}, got {describe(t)}")
    if floating and not t.dtype.is_floating_point:
        raise TypeError(f"torch.tpu.ops.{op}: {name} must be floating point, got {describe(t)}")
    if integer and (t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool):
        raise TypeError(f"torch.tpu.ops.{op}: {name} must have an integer dtype, got {describe(t)}")


def ints(op: str, name: str, value, length: int, *, minimum: int) -> tuple:
    """A sequence of `length` Python ints, each >= minimum, as a tuple (jax_op statics are literals)."""
    if isinstance(value, int) or not hasattr(value, "__len__"):
        raise TypeError(f"torch.tpu.ops.{op}: {name} must be a sequence of {length} ints, got {value!r}")
    value = tuple(value)
    if len(value) != length or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ValueError(f"torch.tpu.ops.{op}: {name} must be a sequence of {length} ints, got {list(value)}")
    if any(v < minimum for v in value):
        raise ValueError(f"torch.tpu.ops.{op}: every {name} must be >= {minimum}, got {list(value)}")
    return value


def compiling() -> bool:
    """Under torch.compile a tensor's values are not known while tracing:
    checks that read them are left to eager calls."""
    return torch.compiler.is_compiling()
