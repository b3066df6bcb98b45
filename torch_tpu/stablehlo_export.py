"""`torch_tpu.export(exported_program)`: a `torch.export` program as one
self-contained StableHLO module that plain jax can compile and run.

The module is built by the same lowering rules as everything else: the
exported graph runs once on tpu, in Fused Eager, under a capture
(csrc/exec/graph_replay.*), so its ops become the one fused program a
compiled graph would be; csrc/exec/export.cpp then wraps that program's
@main (which reads flat storage buffers) into a @main that takes the user
inputs in their shapes, holds the weights as dense constants, and returns
the user outputs in their shapes.

Dynamic dimensions are refused with an error naming them: every program
here has static shapes (bounded dynamism pads compiled graphs, but an
exported module has no runtime to pad for it).
"""

from __future__ import annotations

import io
from typing import Any

import torch
from torch.export.graph_signature import InputKind, OutputKind
from torch.utils import _pytree as pytree

from . import _C

__all__ = ["export", "ExportedStableHLO"]


class ExportedStableHLO:
    """What `torch_tpu.export` returns.

    `text`: the StableHLO module (MLIR text); `bytecode()`: the same module
    as MLIR bytecode; `input_shapes`/`input_dtypes`: @main's arguments (the
    exported program's tensor inputs, flattened); `call(*arrays)` compiles
    the module with jax's own client and runs it, returning the outputs as
    jax arrays in the exported program's output structure."""

    def __init__(self, text: str, inputs: list[torch.Tensor], out_spec: Any, num_outputs: int):
        self.text = text
        self.input_shapes = [tuple(t.shape) for t in inputs]
        self.input_dtypes = [t.dtype for t in inputs]
        self._out_spec = out_spec
        self._num_outputs = num_outputs
        self._exe = None

    def __repr__(self) -> str:
        args = ", ".join(f"{d}{list(s)}" for s, d in zip(self.input_shapes, self.input_dtypes))
        return f"ExportedStableHLO(({args}) -> {self._num_outputs} outputs, {len(self.text)} characters)"

    def bytecode(self) -> bytes:
        """The module as MLIR bytecode (parsed and written by jax's MLIR)."""
        from jax._src.interpreters import mlir
        from jax._src.lib.mlir import ir

        with mlir.make_ir_context():
            module = ir.Module.parse(self.text)
            buf = io.BytesIO()
            module.operation.write_bytecode(buf)
            return buf.getvalue()

    def call(self, *arrays):
        """Runs the module under plain jax on jax's default device."""
        import jax
        import jax.extend.backend
        import numpy as np
        from jax._src.lib import xla_client as xc

        backend = jax.extend.backend.get_backend()
        device = backend.local_devices()[0]
        if self._exe is None:
            options = xc.CompileOptions()
            options.device_assignment = xc.DeviceAssignment.create(np.array([[device.id]], "int32"))
            self._exe = backend.compile_and_load(self.text.encode(), xc.DeviceList((device,)), options)
        if len(arrays) != len(self.input_shapes):
            raise TypeError(f"exported module takes {len(self.input_shapes)} arrays, got {len(arrays)}")
        outs = self._exe.execute([jax.device_put(a, device) for a in arrays])
        return pytree.tree_unflatten(list(outs), self._out_spec) if self._out_spec is not None else outs


def _check_static(ep: torch.export.ExportedProgram) -> None:
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    for spec, node in zip(ep.graph_signature.input_specs, placeholders):
        val = node.meta.get("val")
        if spec.kind != InputKind.USER_INPUT or not isinstance(val, torch.Tensor):
            continue
        for d, size in enumerate(val.shape):
            if not isinstance(size, int):
                sym = size.node.expr
                rng = next((r for s, r in ep.range_constraints.items() if s == sym), None)
                raise ValueError(
                    f"torch_tpu.export: input '{spec.arg.name}' has a dynamic dimension {d} ({sym}"
                    + (f", range [{rng.lower}, {rng.upper}]" if rng is not None else "")
                    + "); StableHLO export needs static shapes: export with static shapes, one module per size")


def _run_graph(ep: torch.export.ExportedProgram, flat: list) -> list:
    """The graph's user outputs, contiguous. Every other value it computed
    (a non-contiguous output's original, buffer mutations) is dropped on
    return: the capture accepts only results that are outputs."""
    with torch.no_grad():
        outs = torch.fx.Interpreter(ep.graph_module).run(*flat)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    user = [o for o, s in zip(outs, ep.graph_signature.output_specs) if s.kind == OutputKind.USER_OUTPUT]
    for o in user:
        if not isinstance(o, torch.Tensor):
            raise TypeError(f"torch_tpu.export: an output is a {type(o).__name__}; only tensors are exported")
    return [o.contiguous() for o in user]


def export(ep: torch.export.ExportedProgram) -> ExportedStableHLO:
    """The exported program's StableHLO module, with its weights (see the
    module docstring). Its @main takes the program's tensor inputs
    (flattened, in order) and returns its user outputs."""
    if not isinstance(ep, torch.export.ExportedProgram):
        raise TypeError(f"torch_tpu.export takes a torch.export.ExportedProgram, got {type(ep).__name__}")
    _check_static(ep)
    sig = ep.graph_signature
    user_inputs = pytree.tree_leaves(ep.example_inputs)
    flat: list[torch.Tensor] = []
    is_arg: list[bool] = []
    args: list[torch.Tensor] = []
    it = iter(user_inputs)
    for spec in sig.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            v = next(it)
            if not isinstance(v, torch.Tensor):
                raise TypeError(f"torch_tpu.export: input '{spec.arg.name}' is a {type(v).__name__}; "
                                "only tensor inputs are supported")
            t = v.detach().contiguous().clone().to("tpu")
            args.append(v)
            is_arg.append(True)
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            t = ep.state_dict[spec.target].detach().contiguous().to("tpu")
            is_arg.append(False)
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            t = ep.constants[spec.target].detach().contiguous().to("tpu")
            is_arg.append(False)
        else:
            raise NotImplementedError(f"torch_tpu.export: input kind {spec.kind} is not supported")
        flat.append(t)

    from . import modes

    device = flat[0].device.index if flat else _C._current_device()
    prev = modes.get_eager_mode()
    _C._mark_step()
    modes.eager_mode("fused")
    _C._export_capture_begin(flat, device)
    try:
        tensors = _run_graph(ep, flat)
    except BaseException:
        _C._export_capture_abort()
        modes.eager_mode(prev)
        raise
    try:
        text = _C._export_capture_end(flat, tensors, is_arg)
    finally:
        modes.eager_mode(prev)
    return ExportedStableHLO(text, args, ep.call_spec.out_spec, len(tensors))
