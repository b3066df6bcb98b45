"""`torch.tpu.optimizers.SingleTraceTrainer`: the reference backend's way to
run a training step (forward, loss, backward and optimizer step) as one
compiled program.

The step is written as a pure function of the flattened ParamGroup, the
model's buffers and the batch (torch.func.functional_call under
torch.func.grad_and_value, then the functional optimizer) and traced once
with make_fx into one FX graph, which the user's `compile_fn` compiles.
On this backend `compile_fn` is typically `torch.compile` (its default
backend for tpu tensors is "tpu") or `lambda gm: torch.compile(gm,
backend="tpu")`: the graph has no input that needs a gradient, so
AOTAutograd gives one inference graph with the optimizer's in-place writes
kept in it (dynamo_backend.py), which runs as one fused XLA program and,
from its third call, as a replay of it (graph_replay.py): one program per
step, the machinery any compiled graph uses. The optimizer writes the
parameters in place, and they share storage with the model's, so the model
sees every update.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from typing import Any, Callable

import torch
from torch.utils import _pytree

__all__ = ["SingleTraceTrainer"]


def _call_args(inputs: Any) -> tuple[tuple, dict]:
    """The reference's convention for a batch: a dict is keyword arguments,
    a tuple or list positional arguments, anything else one argument."""
    if isinstance(inputs, dict):
        return (), inputs
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs), {}
    return (inputs,), {}


def _loss_from_output(out: Any, targets: Any) -> torch.Tensor:
    """The built-in loss: MSE against `targets` when given, else the
    output's own loss (a Hugging Face output or a dict's "loss"), else the
    mean of its logits / sample / first tensor (a stand-in that still
    exercises the whole backward)."""
    if targets is not None:
        return torch.nn.functional.mse_loss(out, targets)
    for attr in ("loss", "logits", "sample"):
        value = out.get(attr) if isinstance(out, dict) else getattr(out, attr, None)
        if isinstance(value, torch.Tensor):
            return value if attr == "loss" else value.mean()
    for leaf in _pytree.tree_leaves(out):
        if isinstance(leaf, torch.Tensor):
            return leaf.mean()
    raise TypeError(f"cannot find a loss in the model's output of type {type(out).__name__}; "
                    "pass compute_loss_fn to SingleTraceTrainer")


@contextlib.contextmanager
def _masks_built_in_graph():
    """Hugging Face builds attention masks with data-dependent shortcuts
    (is the padding mask all ones?) unless `masking_utils.is_tracing` says
    it is being traced, which it can't tell under make_fx inside torch.func
    (its tensors are functorch wrappers); so the trace would fail on a
    data-dependent branch. While tracing, it is told so."""
    masking = sys.modules.get("transformers.masking_utils")
    if masking is None or not hasattr(masking, "is_tracing"):
        yield
        return
    saved = masking.is_tracing
    masking.is_tracing = lambda *args, **kwargs: True
    try:
        yield
    finally:
        masking.is_tracing = saved


def _compile(compile_fn: Callable, gm: torch.fx.GraphModule, flat_inputs: list) -> Callable:
    """Calls `compile_fn(gm)` when it takes one positional argument (as
    `torch.compile` does), else `compile_fn(gm, flat_inputs)` (a Dynamo
    backend's signature)."""
    try:
        params = inspect.signature(compile_fn).parameters.values()
    except (TypeError, ValueError):  # a builtin: assume a backend's signature
        return compile_fn(gm, flat_inputs)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in params) or len(positional) != 1:
        return compile_fn(gm, flat_inputs)
    return compile_fn(gm)


class SingleTraceTrainer:
    """Trains `model` with `optimizer` (a `torch.tpu.optimizers` optimizer;
    None: the step only computes gradients, left in `param.grad`) through a
    step traced and compiled as one program (see the module docstring).
    `compute_loss_fn(model, args, kwargs) -> loss`, when given, replaces the
    built-in loss; it is called with the traced parameters in the model and
    is not given the targets."""

    def __init__(self, model: torch.nn.Module, optimizer: Any = None,
                 compile_fn: Callable[..., Any] | None = None,
                 compute_loss_fn: Callable[..., torch.Tensor] | None = None):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
        if optimizer is not None and not (callable(optimizer) and hasattr(optimizer, "init_param_group")):
            raise TypeError("optimizer must be a torch.tpu.optimizers optimizer (with "
                            f"init_param_group and step) or None, got {type(optimizer).__name__}")
        for name, fn in (("compile_fn", compile_fn), ("compute_loss_fn", compute_loss_fn)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} must be callable, got {type(fn).__name__}")
        self._model, self._optimizer = model, optimizer
        self._compile_fn, self._compute_loss_fn = compile_fn, compute_loss_fn
        if callable(getattr(model, "tie_weights", None)):
            model.tie_weights()  # Hugging Face: shared weights are one parameter from here on
        # Pytree keys can't hold "."; `_names` maps them back to the module's names.
        self._names: dict[str, str] = {}
        params = {}
        for name, p in model.named_parameters():
            params[self._key(name)] = p.detach()  # shares the parameter's storage
        self._buffers = {self._key(name): b.detach() for name, b in model.named_buffers()}
        self._param_group = optimizer.init_param_group(params) if optimizer is not None else params

    def _key(self, name: str) -> str:
        key = name.replace(".", "_")
        if self._names.setdefault(key, name) != name:
            raise ValueError(f"parameters/buffers {self._names[key]!r} and {name!r} both map to "
                             f"the key {key!r}")
        return key

    @property
    def param_group(self) -> Any:
        """The tensors the step updates: the optimizer's ParamGroup, or a dict
        of parameters when there is no optimizer."""
        return self._param_group

    @property
    def params(self) -> dict[str, torch.Tensor]:
        """The parameters, under the module's names."""
        group = self._param_group
        params = group.params if hasattr(group, "params") else group
        return {self._names[k]: v for k, v in params.items()}

    def _loss(self, params: dict, buffers: dict, inputs: Any, targets: Any) -> torch.Tensor:
        state = {self._names[k]: v for k, v in {**params, **buffers}.items()}
        args, kwargs = _call_args(inputs)
        if self._compute_loss_fn is not None:
            from torch.nn.utils.stateless import _reparametrize_module

            # tie_weights: a tied weight, listed once, is swapped in for every alias.
            with _reparametrize_module(self._model, state, tie_weights=True):
                loss = self._compute_loss_fn(self._model, args, kwargs)
        else:
            out = torch.func.functional_call(self._model, state, args, kwargs, tie_weights=True)
            loss = _loss_from_output(out, targets)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise TypeError("the loss must be a one-element tensor, got "
                            f"{type(loss).__name__}{tuple(getattr(loss, 'shape', ()))}")
        return loss

    def make_compiled_train_step(self, example_inputs: Any, example_targets: Any = None,
                                 compile_fn: Callable[..., Any] | None = None) -> Callable[..., torch.Tensor]:
        """Traces the step for batches shaped like the examples, compiles it
        with `compile_fn` (or the constructor's) and returns
        `train_step(inputs, targets=None) -> loss`, which updates the
        parameters, optimizer state and buffers."""
        compile_fn = compile_fn if compile_fn is not None else self._compile_fn
        if compile_fn is None:
            raise ValueError("SingleTraceTrainer needs a compile_fn (for instance torch.compile), "
                             "given to the constructor or to make_compiled_train_step")
        if not callable(compile_fn):
            raise TypeError(f"compile_fn must be callable, got {type(compile_fn).__name__}")
        has_targets = example_targets is not None
        state = (self._param_group, self._buffers)
        flat_inputs, in_spec = _pytree.tree_flatten(state + (example_inputs,) + ((example_targets,) if has_targets else ()))
        out_spec: list = []

        def step(*flat):
            group, buffers, inputs, *rest = _pytree.tree_unflatten(list(flat), in_spec)
            targets = rest[0] if has_targets else None
            params = group.params if hasattr(group, "params") else group
            if params:
                loss_of = lambda p, b: self._loss(p, b, inputs, targets)  # noqa: E731
                wrt = params
            else:  # no parameters: gradients of the inputs, as the reference does
                loss_of = lambda x, b: self._loss({}, b, x, targets)  # noqa: E731
                wrt = inputs
            grads, loss = torch.func.grad_and_value(loss_of)(wrt, buffers)
            # Buffers are written in place by the model (BatchNorm's running stats).
            out = (loss, self._optimizer(group, grads) if self._optimizer is not None else grads, buffers)
            flat_out, spec = _pytree.tree_flatten(out)
            out_spec[:] = [spec]
            return tuple(flat_out)

        from torch.fx.experimental.proxy_tensor import make_fx

        with _masks_built_in_graph():
            graph = make_fx(step, tracing_mode="fake")(*flat_inputs)
        compiled = _compile(compile_fn, graph, flat_inputs)

        def train_step(inputs: Any, targets: Any = None) -> torch.Tensor:
            if (targets is None) == has_targets:
                raise ValueError("train_step takes targets exactly when make_compiled_train_step "
                                 f"was given example_targets ({'given' if has_targets else 'not given'})")
            flat, spec = _pytree.tree_flatten((self._param_group, self._buffers, inputs)
                                              + ((targets,) if has_targets else ()))
            if spec != in_spec:
                raise ValueError("the batch's structure differs from the example's it was traced "
                                 f"with:\n{spec}\nagainst\n{in_spec}")
            loss, result, buffers = _pytree.tree_unflatten(list(compiled(*flat)), out_spec[0])
            if self._optimizer is not None:
                self._adopt(result, buffers)
            else:
                self._adopt(self._param_group, buffers)
                named = dict(self._model.named_parameters())
                for key, grad in result.items():
                    if key in self._names and self._names[key] in named:
                        named[self._names[key]].grad = grad
            return loss

        return train_step

    def _adopt(self, group: Any, buffers: dict) -> None:
        """Keeps the step's results. The step writes the parameters and
        buffers in place, into the storage the model shares, so usually
        nothing is copied; a compile_fn whose program returned new tensors
        instead gets them copied into the model."""
        self._param_group, self._buffers = group, buffers
        params = group.params if hasattr(group, "params") else group
        model_state = dict(self._model.named_parameters())
        model_state.update(self._model.named_buffers())
        with torch.no_grad():
            for key, value in {**params, **buffers}.items():
                target = model_state.get(self._names[key])
                if target is not None and not torch._C._is_alias_of(target, value):
                    target.copy_(value)
