"""`torch.compile(..., backend="tpu", options={...})`: the reference
backend's option names (docs/REFERENCE.md), checked and applied.

torch.compile hands a string backend its `options` dict as a keyword; an
AOTAutograd backend would drop it with a warning, so a misspelt option or
one meant for Inductor would change nothing unnoticed. Here an unknown name
or a bad value raises at the first compile, naming the option.

- `num_dynamic_buckets` (1-8): a symbolic size with an upper bound (from
  `mark_dynamic(..., max=)`) takes at most this many padded values: its
  range [min, max] is cut into that many equal parts and a size is padded
  to the top of its part. Without an upper bound the power-of-two buckets
  stay.
- `bucket_size`: a symbolic size is padded to the next multiple of it
  (capped at its upper bound) instead of the next power of two.
- `name`: names the graphs in the recompile log and in `recompile_log()`.
- `debug_callback`: called as `debug_callback(gm, example_inputs)` with
  each FX graph Dynamo hands the backend, before it is compiled.
- `mode=` (torch.compile's own argument): Inductor's mode names are
  accepted and change nothing (MODES); another name raises.
- `async_compile`, `serializable`: accepted so that the reference's scripts
  run unchanged. A graph's programs compile at its first call (training
  graphs quick, then rebuilt optimised in place) and always go to the
  persistent cache; `async_compile=True` or `serializable=False` asks for
  something else and warns once.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from .warning_categories import TORCH_TPU as _TORCH_TPU, warn as _warn

__all__ = ["CompileOptions", "check_mode", "parse"]


@dataclasses.dataclass(frozen=True)
class CompileOptions:
    num_dynamic_buckets: int | None = None
    bucket_size: int | None = None
    name: str | None = None
    debug_callback: Callable | None = None
    async_compile: bool = False
    serializable: bool = True

    def bucket(self, value: int, lower: int | None, upper: int | None) -> int | None:
        """The padded size for `value` of a symbol bounded by [lower, upper],
        or None for the default buckets (bounded_graph.bucket)."""
        value = int(value)
        if self.bucket_size is not None:
            b = self.bucket_size
            padded = -(-value // b) * b
        elif self.num_dynamic_buckets is not None and upper is not None:
            lo = max(int(lower or 0), 0)
            width = max(-(-(upper - lo + 1) // self.num_dynamic_buckets), 1)
            padded = lo - 1 + -(-(value - lo + 1) // width) * width if value >= lo else value
        else:
            return None
        if upper is not None:
            padded = min(padded, upper)
        return max(padded, value)


_WARNED: set = set()

# torch.compile's modes (Inductor's names). Each graph here is one fused
# program, replayed without per-op dispatch (what "reduce-overhead" buys on
# CUDA) and compiled at XLA's default level, so every mode runs the same.
MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def check_mode(mode: Any) -> None:
    """Raises on a mode torch.compile's Inductor would not know either."""
    if mode not in MODES:
        raise ValueError(f"torch_tpu: unknown torch.compile mode {mode!r}; it takes one of "
                         f"{[m for m in MODES if m]}, all of which run the same with backend='tpu'")


def _check_int(key: str, v: Any, lo: int, hi: int | None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"torch_tpu: torch.compile option '{key}' takes an int, got {type(v).__name__}")
    if v < lo or (hi is not None and v > hi):
        span = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise ValueError(f"torch_tpu: torch.compile option '{key}' must be {span}, got {v}")
    return v


def _check_bool(key: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"torch_tpu: torch.compile option '{key}' takes a bool, got {type(v).__name__}")
    return v


def parse(options: dict | None) -> CompileOptions:
    """CompileOptions from torch.compile's `options` dict; raises on a name
    backend="tpu" does not know or a value of the wrong type or range."""
    if not options:
        return CompileOptions()
    if not isinstance(options, dict):
        raise TypeError(f"torch_tpu: torch.compile options must be a dict, got {type(options).__name__}")
    known = [f.name for f in dataclasses.fields(CompileOptions)]
    unknown = sorted(str(k) for k in options if k not in known)
    if unknown:
        raise ValueError(f"torch_tpu: unknown torch.compile option(s) {unknown} for backend='tpu'; "
                         f"it takes {known}")
    kw: dict = {}
    if options.get("num_dynamic_buckets") is not None:
        kw["num_dynamic_buckets"] = _check_int("num_dynamic_buckets", options["num_dynamic_buckets"], 1, 8)
    if options.get("bucket_size") is not None:
        kw["bucket_size"] = _check_int("bucket_size", options["bucket_size"], 1, None)
    if "num_dynamic_buckets" in kw and "bucket_size" in kw:
        raise ValueError("torch_tpu: torch.compile options 'num_dynamic_buckets' and 'bucket_size' both choose "
                         "the padded sizes; give one")
    if options.get("name") is not None:
        if not isinstance(options["name"], str):
            raise TypeError(f"torch_tpu: torch.compile option 'name' takes a str, got {type(options['name']).__name__}")
        kw["name"] = options["name"]
    if options.get("debug_callback") is not None:
        if not callable(options["debug_callback"]):
            raise TypeError("torch_tpu: torch.compile option 'debug_callback' must be callable")
        kw["debug_callback"] = options["debug_callback"]
    for key, default in (("async_compile", False), ("serializable", True)):
        if key in options:
            kw[key] = _check_bool(key, options[key])
            if kw[key] != default and key not in _WARNED:
                _WARNED.add(key)
                _warn(f"torch_tpu: torch.compile option {key}={kw[key]} changes nothing with backend='tpu': "
                      "a graph's programs compile at its first call and go to the persistent cache "
                      "(docs/design.md, 'torch.compile options')", category=_TORCH_TPU)
    return CompileOptions(**kw)
