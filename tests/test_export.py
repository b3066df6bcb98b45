"""torch_tpu.export (torch_tpu/stablehlo_export.py, csrc/exec/export.cpp): a
torch.export program as a self-contained StableHLO module, built by the same
lowering rules, that plain jax compiles and runs; outputs compared with
PyTorch on CPU."""

import numpy as np
import pytest
import torch
import torch.nn as nn

import torch_tpu

jax = pytest.importorskip("jax")


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(8, 16)
        self.norm = nn.LayerNorm(16)
        self.l2 = nn.Linear(16, 4)
        self.register_buffer("shift", torch.arange(4.0))

    def forward(self, x, y):
        h = self.l2(torch.relu(self.norm(self.l1(x)))) + self.shift
        return {"scaled": h * y.sum(), "slice_t": h[:, 1:].t()}  # a pytree, a non-contiguous view


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.bn = nn.BatchNorm2d(6)
        self.fc = nn.Linear(6 * 4 * 4, 5)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        return torch.log_softmax(self.fc(x.flatten(1)), -1)


def _close(got, ref, tol=1e-5):
    np.testing.assert_allclose(np.asarray(got), ref.detach().numpy(), atol=tol, rtol=tol)


def test_mlp_runs_under_plain_jax():
    torch.manual_seed(0)
    m = Mlp().eval()
    x, y = torch.randn(3, 8), torch.randn(2)
    e = torch_tpu.export(torch.export.export(m, (x, y)))
    assert e.input_shapes == [(3, 8), (2,)]
    assert "func.func public @main(%arg0: tensor<3x8xf32>, %arg1: tensor<2xf32>)" in e.text
    got = e.call(x.numpy(), y.numpy())  # jax's client compiles and runs the text
    ref = m(x, y)
    assert set(got) == {"scaled", "slice_t"}
    _close(got["scaled"], ref["scaled"])
    _close(got["slice_t"], ref["slice_t"])
    # Other inputs, same module: the weights are constants, the inputs are not.
    x2, y2 = torch.randn(3, 8), torch.randn(2)
    _close(e.call(x2.numpy(), y2.numpy())["scaled"], m(x2, y2)["scaled"])


def test_cnn_with_batch_norm_in_eval():
    torch.manual_seed(1)
    m = Cnn()
    m.bn.running_mean.uniform_(-0.5, 0.5)
    m.bn.running_var.uniform_(0.5, 2.0)
    m.eval()
    x = torch.randn(2, 3, 8, 8)
    e = torch_tpu.export(torch.export.export(m, (x,)))
    _close(e.call(x.numpy()), m(x), tol=1e-4)


def test_bytecode_round_trips_and_runs():
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    m = Mlp().eval()
    x, y = torch.randn(3, 8), torch.randn(2)
    e = torch_tpu.export(torch.export.export(m, (x, y)))
    code = e.bytecode()
    assert code[:4] == b"ML\xefR"  # MLIR bytecode magic
    with mlir.make_ir_context():
        text = str(ir.Module.parse(code))
    assert "stablehlo.composite" in text
    # The parsed-back module computes the same.
    back = type(e)(text, [x, y], None, 2)
    got = back.call(x.numpy(), y.numpy())
    ref = m(x, y)
    _close(got[0], ref["scaled"])


def test_dynamic_dims_raise_a_clear_error():
    m = Mlp().eval()
    x, y = torch.randn(3, 8), torch.randn(2)
    batch = torch.export.Dim("batch", min=2, max=64)
    ep = torch.export.export(m, (x, y), dynamic_shapes={"x": {0: batch}, "y": None})
    with pytest.raises(ValueError, match=r"input 'x' has a dynamic dimension 0.*\[2, 64\]"):
        torch_tpu.export(ep)


def test_not_an_exported_program():
    with pytest.raises(TypeError, match="ExportedProgram"):
        torch_tpu.export(Mlp())
