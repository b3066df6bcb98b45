"""`torch.tpu.optimizers.Muon`: the reference backend's functional Muon
(torch.optim.Muon's update: momentum, optional Nesterov, Newton-Schulz
orthogonalization in bfloat16, shape-adjusted learning rate) as plain
tensor ops over a ParamGroup. Muon is for 2-D weights only; other
parameters belong to another optimizer, so they are refused up front.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import torch
from torch.utils import _pytree

from . import base

__all__ = ["Muon", "newton_schulz"]

# torch.optim.Muon's defaults: the quintic iteration's coefficients.
DEFAULT_A, DEFAULT_B, DEFAULT_C = 3.4445, -4.7750, 2.0315
DEFAULT_NS_STEPS = 5
EPS = 1e-7
_ADJUST_LR_FNS = (None, "original", "match_rms_adamw", "spectral_unclamped")


def newton_schulz(m: torch.Tensor, coefficients: tuple[float, float, float], steps: int,
                  eps: float) -> torch.Tensor:
    """An approximately orthogonal matrix with `m`'s singular vectors:
    `steps` quintic Newton-Schulz iterations X <- aX + (bA + cA^2)X, A = XX^T,
    in bfloat16, on the wide orientation of `m` (fewer flops), from X
    normalized by its Frobenius norm."""
    a, b, c = coefficients
    tall = m.size(0) > m.size(1)
    x = m.to(torch.bfloat16)
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T
        # addmm: each product and its sum rounded to bfloat16 once
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if tall else x


def _lr_ratio(adjust_lr_fn: str | None, shape: torch.Size) -> float:
    rows, cols = shape[0], shape[1]
    if adjust_lr_fn in (None, "original"):
        return math.sqrt(max(1.0, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return 0.2 * math.sqrt(max(rows, cols))
    return math.sqrt(rows / cols)  # "spectral_unclamped"


class Muon(base.Optimizer):
    """Muon over a ParamGroup of 2-D parameters. `foreach` and `has_complex`
    are accepted for the reference's signature (complex parameters are
    refused, as torch.optim.Muon does)."""

    @dataclasses.dataclass
    class ParamGroup:
        """Parameters and Muon state: momentum buffers and step counts."""

        params: dict[str, torch.Tensor]
        opt_state_m: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)
        opt_steps: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)

    _HYPERPARAMETER_NAMES: ClassVar[tuple[str, ...]] = (
        "lr", "weight_decay", "momentum", "nesterov", "ns_coefficients", "eps", "ns_steps",
        "adjust_lr_fn", "use_bfloat16_moments", "foreach", "has_complex")

    def __init__(self, lr: float = 1e-3, weight_decay: float = 0.1, momentum: float = 0.95,
                 nesterov: bool = True,
                 ns_coefficients: tuple[float, float, float] = (DEFAULT_A, DEFAULT_B, DEFAULT_C),
                 eps: float = EPS, ns_steps: int = DEFAULT_NS_STEPS, adjust_lr_fn: str | None = None,
                 use_bfloat16_moments: bool = False, foreach: bool | None = False,
                 has_complex: bool = False):
        super().__init__(lr=lr, weight_decay=weight_decay)
        base._check_number("momentum", momentum)
        base._check_number("eps", eps)
        if isinstance(ns_steps, bool) or not isinstance(ns_steps, int) or not 0 <= ns_steps < 100:
            raise ValueError(f"ns_steps must be an int in [0, 100), got {ns_steps!r}")
        if len(tuple(ns_coefficients)) != 3:
            raise ValueError(f"ns_coefficients must be 3 numbers (a, b, c), got {ns_coefficients!r}")
        if adjust_lr_fn not in _ADJUST_LR_FNS:
            raise ValueError(f"adjust_lr_fn must be one of {_ADJUST_LR_FNS}, got {adjust_lr_fn!r}")
        if has_complex:
            raise ValueError("Muon does not support complex parameters")
        self._momentum, self._nesterov = float(momentum), bool(nesterov)
        self._ns_coefficients = tuple(float(c) for c in ns_coefficients)
        self._eps, self._ns_steps, self._adjust_lr_fn = float(eps), ns_steps, adjust_lr_fn
        self._use_bfloat16_moments = bool(use_bfloat16_moments)
        self._foreach, self._has_complex = foreach, has_complex

    @staticmethod
    def _check_2d(params) -> None:
        bad = {n: tuple(p.shape) for n, p in params.items() if p.dim() != 2}
        if bad:
            raise ValueError(f"Muon updates 2-D parameters only; got {bad} (give biases, norms "
                             "and embeddings to another optimizer)")

    def init_param_group(self, params) -> "Muon.ParamGroup":
        params = base.named_params(params)
        self._check_2d(params)
        dtype = torch.bfloat16 if self._use_bfloat16_moments else None
        return self.ParamGroup(params=params, opt_state_m=base.zeros_like_all(params, dtype),
                               opt_steps=base.step_counters(params, 1.0))

    def step(self, param_group: "Muon.ParamGroup", grads) -> "Muon.ParamGroup":
        self._check_2d(param_group.params)
        grads = base.grads_for(param_group.params, grads)
        mu = self._momentum
        for name, p in param_group.params.items():
            g, buf, step = grads[name], param_group.opt_state_m[name], param_group.opt_steps[name]
            new_buf = torch.lerp(buf.to(g.dtype), g, 1.0 - mu)
            update = torch.lerp(g, new_buf, mu) if self._nesterov else new_buf
            ortho = newton_schulz(update, self._ns_coefficients, self._ns_steps, self._eps)
            lr = self._lr * _lr_ratio(self._adjust_lr_fn, p.shape)
            base.commit(p, p * (1.0 - self._lr * self._weight_decay) - lr * ortho.to(p.dtype), None)
            base.commit(buf, new_buf, None)
            step.add_(1.0)
        return param_group


_pytree.register_dataclass(Muon.ParamGroup)
