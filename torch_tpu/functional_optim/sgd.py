"""`torch.tpu.optimizers.Sgd`: the reference backend's functional SGD
(torch.optim.SGD's update: weight decay, momentum with dampening, Nesterov)
as plain tensor ops over a ParamGroup. The first-step rule of momentum
(the buffer starts as the gradient) is a select on the device step count,
not a Python branch, so a traced step is the same program every step.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import torch
from torch.utils import _pytree

from . import base

__all__ = ["Sgd"]


class Sgd(base.Optimizer):
    """SGD over a ParamGroup. Momentum buffers exist only when `momentum` is
    nonzero; step counts start at 1 (the reference's layout). `foreach`,
    `fused` and `has_sparse_grad` are accepted for the reference's signature
    and change nothing here; `grad_scale` / `found_inf` unscale the
    gradients / skip the step as in torch.optim's fused SGD. The first
    momentum step follows torch.optim.SGD (buffer = gradient), also with
    dampening."""

    @dataclasses.dataclass
    class ParamGroup:
        """Parameters and SGD state: momentum buffers and step counts."""

        params: dict[str, torch.Tensor]
        opt_state_m: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)
        opt_steps: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)

    _HYPERPARAMETER_NAMES: ClassVar[tuple[str, ...]] = (
        "lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize", "foreach", "fused",
        "grad_scale", "found_inf", "has_sparse_grad")

    def __init__(self, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False,
                 foreach: bool | None = False, fused: bool | None = True,
                 grad_scale: torch.Tensor | None = None, found_inf: torch.Tensor | None = None,
                 has_sparse_grad: bool = False):
        super().__init__(lr=lr, weight_decay=weight_decay)
        base._check_number("momentum", momentum)
        base._check_number("dampening", dampening, low=float("-inf"))
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        self._momentum, self._dampening = float(momentum), float(dampening)
        self._nesterov, self._maximize = bool(nesterov), bool(maximize)
        self._foreach, self._fused, self._has_sparse_grad = foreach, fused, has_sparse_grad
        self._grad_scale, self._found_inf = grad_scale, found_inf

    def init_param_group(self, params) -> "Sgd.ParamGroup":
        params = base.named_params(params)
        momentum = base.zeros_like_all(params) if self._momentum != 0.0 else {}
        return self.ParamGroup(params=params, opt_state_m=momentum,
                               opt_steps=base.step_counters(params, 1.0))

    def step(self, param_group: "Sgd.ParamGroup", grads) -> "Sgd.ParamGroup":
        grads = base.grads_for(param_group.params, grads, self._maximize, self._grad_scale)
        mu, damp = self._momentum, self._dampening
        for name, p in param_group.params.items():
            d_p, step = grads[name], param_group.opt_steps[name]
            if self._weight_decay != 0.0:
                d_p = d_p + self._weight_decay * p
            if mu != 0.0:
                buf = param_group.opt_state_m.get(name)
                if buf is None:
                    raise KeyError(f"param_group.opt_state_m has no momentum buffer for {name!r} "
                                   "(was the group made by an Sgd without momentum?)")
                new_buf = torch.where(step == 1.0, d_p, mu * buf + (1.0 - damp) * d_p)
                base.commit(buf, new_buf, self._found_inf)
                d_p = d_p + mu * new_buf if self._nesterov else new_buf
            base.commit(p, p - self._lr * d_p, self._found_inf)
            base.commit(step, step + 1.0, self._found_inf)
        return param_group


_pytree.register_dataclass(Sgd.ParamGroup)
