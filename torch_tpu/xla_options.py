"""A user's XLA compile options: the reference backend's
`torch.tpu.compiler.custom_compiler_options({...})` blocks and its
`torch.tpu.allow_excess_precision` property (docs/design.md, "User XLA
options"). The state lives in C++ (csrc/runtime/compiler_options.h), where
the runtime reads it at each compile and every program cache keys on it."""

from __future__ import annotations

import contextlib
from typing import Iterator, Mapping

import torch

from . import _C

__all__ = ["custom_compiler_options", "get_allow_excess_precision", "set_allow_excess_precision"]


def _flush() -> None:
    # Fused Eager's pending ops belong to the side of the block edge they
    # were issued on: run them before the options change (a no-op before
    # the device starts).
    _C._mark_step()


def _option_value(name: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise TypeError(f"torch.tpu.compiler.custom_compiler_options: option {name!r} takes a str, bool, int or "
                    f"float, got {type(value).__name__}")


@contextlib.contextmanager
def custom_compiler_options(options: Mapping[str, object]) -> Iterator[None]:
    """XLA options (names as in XLA_FLAGS, without the dashes) for every
    program compiled inside the block: eager ops, Fused Eager traces and
    compiled graphs run there. Blocks nest; an inner block's value of a name
    wins. `xla_optimization_level` and `xla_memory_fitting_level` take
    "O0".."O3". An option of another platform's XLA (xla_tpu_* here on
    XLA:CPU) is ignored with a warning; a name XLA does not know raises at
    the first compile. Programs compiled under other options are other
    programs: leaving the block finds the earlier ones again."""
    if torch.compiler.is_compiling():
        raise RuntimeError(
            "torch.tpu.compiler.custom_compiler_options cannot be used inside a torch.compile'd function: a "
            "compiled graph is one program with one set of XLA options. Open the block around the call instead.")
    if not isinstance(options, Mapping):
        raise TypeError("torch.tpu.compiler.custom_compiler_options takes a dict of XLA option names to values, "
                        f"got {type(options).__name__}")
    pairs = [(str(name), _option_value(name, value)) for name, value in options.items()]
    _flush()
    _C._push_compiler_options(pairs)
    try:
        yield
    finally:
        _flush()
        _C._pop_compiler_options()


def get_allow_excess_precision() -> bool:
    """Whether XLA may keep intermediate values in a wider type than the
    program says (skipping a round trip through bfloat16, say): the value
    set, else XLA_FLAGS' --xla_allow_excess_precision, else the platform's
    default (XLA:CPU: XLA's own, True; elsewhere False, so that bf16 ops
    round as PyTorch's do). Reading it starts the device."""
    return bool(_C._allow_excess_precision())


def set_allow_excess_precision(value: bool | None) -> None:
    """Sets it for every later compile (None: back to the default).
    Programs compiled before keep their setting; changing it compiles new
    ones, and changing it back finds the old ones again."""
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"torch.tpu.allow_excess_precision takes True or False, got {value!r}")
    _flush()
    _C._set_allow_excess_precision(value)
