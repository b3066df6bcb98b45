"""`torch.tpu.optimizers.AdamW`: the reference backend's functional AdamW
(decoupled weight decay, torch.optim.AdamW's update), written as plain
tensor ops over a ParamGroup so it runs eagerly on any device and traces
into SingleTraceTrainer's one program. The step counters are device
tensors (torch.optim's `capturable=True` form): nothing reads the host.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import torch
from torch.utils import _pytree

from . import base

__all__ = ["AdamW"]


class AdamW(base.Optimizer):
    """AdamW over a ParamGroup. With `use_bfloat16_moments` (the reference's
    default) the moments are stored in bfloat16 and updated in the
    parameter's dtype. `foreach`, `capturable`, `differentiable` and `fused`
    are accepted for the reference's signature and change nothing here (the
    update is one set of ops that a fused trace or a compiled step runs as
    one program either way). `grad_scale` unscales the gradients and a
    nonzero `found_inf` skips the step, as in torch.optim's fused AdamW."""

    @dataclasses.dataclass
    class ParamGroup:
        """Parameters and AdamW state: first / second moments and step counts,
        each a dict keyed like `params`."""

        params: dict[str, torch.Tensor]
        opt_state_m: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)
        opt_state_v: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)
        opt_steps: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)

    _HYPERPARAMETER_NAMES: ClassVar[tuple[str, ...]] = (
        "lr", "weight_decay", "beta1", "beta2", "eps", "use_bfloat16_moments", "amsgrad",
        "maximize", "foreach", "capturable", "differentiable", "fused", "grad_scale", "found_inf")

    def __init__(self, lr: float = 1e-3, weight_decay: float = 1e-2, beta1: float = 0.9,
                 beta2: float = 0.999, eps: float = 1e-8, use_bfloat16_moments: bool = True,
                 amsgrad: bool = False, maximize: bool = False, foreach: bool | None = False,
                 capturable: bool = True, differentiable: bool = False, fused: bool | None = False,
                 grad_scale: torch.Tensor | None = None, found_inf: torch.Tensor | None = None):
        super().__init__(lr=lr, weight_decay=weight_decay)
        base._check_number("beta1", beta1, 0.0, 1.0, high_open=True)
        base._check_number("beta2", beta2, 0.0, 1.0, high_open=True)
        base._check_number("eps", eps)
        if amsgrad:
            # The reference's ParamGroup has no max_exp_avg_sq to keep.
            raise ValueError("AdamW(amsgrad=True) is not supported: its ParamGroup holds no "
                             "max_exp_avg_sq state")
        self._beta1, self._beta2, self._eps = float(beta1), float(beta2), float(eps)
        self._use_bfloat16_moments = bool(use_bfloat16_moments)
        self._amsgrad, self._maximize = amsgrad, bool(maximize)
        self._foreach, self._capturable = foreach, capturable
        self._differentiable, self._fused = differentiable, fused
        self._grad_scale, self._found_inf = grad_scale, found_inf

    def init_param_group(self, params) -> "AdamW.ParamGroup":
        params = base.named_params(params)
        dtype = torch.bfloat16 if self._use_bfloat16_moments else None
        return self.ParamGroup(params=params, opt_state_m=base.zeros_like_all(params, dtype),
                               opt_state_v=base.zeros_like_all(params, dtype),
                               opt_steps=base.step_counters(params, 0.0))

    def step(self, param_group: "AdamW.ParamGroup", grads) -> "AdamW.ParamGroup":
        grads = base.grads_for(param_group.params, grads, self._maximize, self._grad_scale)
        lr, wd, b1, b2, eps = self._lr, self._weight_decay, self._beta1, self._beta2, self._eps
        for name, p in param_group.params.items():
            g, step = grads[name], param_group.opt_steps[name]
            m, v = param_group.opt_state_m[name], param_group.opt_state_v[name]
            t = step + 1.0
            # Moments in the parameter's dtype (bfloat16 ones are only stored so).
            new_m = torch.lerp(m.to(p.dtype), g, 1.0 - b1)
            new_v = v.to(p.dtype) * b2 + (1.0 - b2) * g * g
            bias1 = 1.0 - torch.pow(b1, t)
            bias2_sqrt = torch.sqrt(1.0 - torch.pow(b2, t))
            denom = torch.sqrt(new_v) / bias2_sqrt + eps
            new_p = p * (1.0 - lr * wd) - (lr / bias1) * new_m / denom
            base.commit(p, new_p, self._found_inf)
            base.commit(m, new_m, self._found_inf)
            base.commit(v, new_v, self._found_inf)
            base.commit(step, t, self._found_inf)
        return param_group


_pytree.register_dataclass(AdamW.ParamGroup)
