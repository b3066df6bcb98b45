"""The base of `torch.tpu.optimizers`: stateless functional optimizers.

The reference backend's training API keeps the parameters and optimizer
state outside the optimizer, in a `ParamGroup` dataclass (a pytree), so a
whole training step can be traced as one function of tensors
(SingleTraceTrainer, single_trace_trainer.py). An optimizer here only holds
its hyperparameters, which a trace takes as constants: to change one, make
a new optimizer.
"""

from __future__ import annotations

import abc
import types
from collections.abc import Mapping
from typing import Any, ClassVar

import torch

__all__ = ["Optimizer"]


class Optimizer(abc.ABC):
    """Stateless functional optimizer. `init_param_group(params)` makes the
    state for a dict of tensors (or a module's parameters); `step(group,
    grads)` (or calling the optimizer) updates the group's tensors in place
    and returns the group."""

    ParamGroup: ClassVar[Any]
    # Constructor arguments listed by `defaults`; each is kept as `_<name>`.
    _HYPERPARAMETER_NAMES: ClassVar[tuple[str, ...]] = ("lr", "weight_decay")

    def __init__(self, lr: float = 1e-3, weight_decay: float = 0.0):
        _check_number("lr", lr)
        _check_number("weight_decay", weight_decay)
        self._lr = float(lr)
        self._weight_decay = float(weight_decay)

    @property
    def defaults(self) -> Mapping[str, Any]:
        """The hyperparameters, read-only."""
        return types.MappingProxyType({n: getattr(self, f"_{n}") for n in self._HYPERPARAMETER_NAMES})

    @abc.abstractmethod
    def init_param_group(self, params: dict[str, torch.Tensor] | torch.nn.Module) -> Any:
        """A fresh ParamGroup for `params` (a module's parameters are named
        with "." replaced by "_")."""

    @abc.abstractmethod
    def step(self, param_group: Any, grads: dict[str, torch.Tensor]) -> Any:
        """Updates `param_group`'s tensors in place from `grads` (keyed as
        `param_group.params`) and returns it."""

    def __call__(self, param_group: Any, grads: dict[str, torch.Tensor]) -> Any:
        return self.step(param_group, grads)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.defaults.items())
        return f"{type(self).__name__}({args})"


def _check_number(name: str, value: Any, low: float = 0.0, high: float | None = None,
                  high_open: bool = False) -> None:
    """torch.optim's argument checks, as a ValueError naming the argument
    (a bad hyperparameter would otherwise surface deep inside a trace)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if value < low or (high is not None and (value >= high if high_open else value > high)):
        bound = f"in [{low}, {high}{')' if high_open else ']'}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be {bound}, got {value}")


def named_params(params: dict[str, torch.Tensor] | torch.nn.Module) -> dict[str, torch.Tensor]:
    """The tensors an optimizer updates, keyed as the reference keys them:
    a module's parameters (detached, so they share its storage and the
    in-place updates reach the module) with "." in names replaced by "_"."""
    if isinstance(params, torch.nn.Module):
        return {name.replace(".", "_"): p.detach() for name, p in params.named_parameters()}
    if not isinstance(params, Mapping):
        raise TypeError("params must be a dict of name -> tensor or an nn.Module, "
                        f"got {type(params).__name__}")
    for name, p in params.items():
        if not isinstance(p, torch.Tensor):
            raise TypeError(f"params[{name!r}] must be a tensor, got {type(p).__name__}")
        if not p.is_floating_point():
            raise TypeError(f"params[{name!r}] must be floating point, got {p.dtype}")
    return dict(params)


def grads_for(params: Mapping[str, torch.Tensor], grads: Mapping[str, torch.Tensor],
              maximize: bool = False, grad_scale: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """`grads` checked against `params` (every name present, same shape),
    negated for `maximize` and unscaled by `grad_scale` (torch.optim's
    fused optimizers' meaning of both)."""
    if not isinstance(grads, Mapping):
        raise TypeError(f"grads must be a dict of name -> tensor, got {type(grads).__name__}")
    missing = [n for n in params if n not in grads]
    if missing:
        raise KeyError(f"grads has no entry for parameter(s) {missing}; it must be keyed "
                       "like param_group.params")
    out = {}
    for name, p in params.items():
        g = grads[name]
        if not isinstance(g, torch.Tensor):
            raise TypeError(f"grads[{name!r}] must be a tensor, got {type(g).__name__}")
        if g.shape != p.shape:
            raise ValueError(f"grads[{name!r}] has shape {tuple(g.shape)}, its parameter "
                             f"{tuple(p.shape)}")
        if maximize:
            g = -g
        if grad_scale is not None:
            g = g / grad_scale
        out[name] = g
    return out


def commit(dst: torch.Tensor, new: torch.Tensor, found_inf: torch.Tensor | None) -> None:
    """Writes `new` into `dst` (a ParamGroup tensor, in place so that the
    module's parameter sees it), unless `found_inf` is set (nonzero): then
    `dst` keeps its value, as a fused torch.optim step skips on overflow.
    A select rather than a Python branch, so a trace holds no host read."""
    if found_inf is not None:
        new = torch.where(found_inf.to(torch.bool), dst, new.to(dst.dtype))
    dst.copy_(new)


def zeros_like_all(params: Mapping[str, torch.Tensor], dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    return {n: torch.zeros_like(p, dtype=dtype, memory_format=torch.preserve_format) for n, p in params.items()}


def step_counters(params: Mapping[str, torch.Tensor], start: float) -> dict[str, torch.Tensor]:
    """One float32 scalar step count per parameter, on its device (a count
    on the host would make a traced step read it back, or bake it in)."""
    return {n: torch.tensor(float(start), dtype=torch.float32, device=p.device) for n, p in params.items()}
