"""Drop-in behaviour: code written for CUDA runs unchanged on tpu.

- `model.to("tpu")` keeps Parameter objects (optimizers built before the
  move, tied weights), csrc/aten/shallow_copy.cpp;
- a 0-dim CPU tensor is a scalar operand in any position, exec/op_runner.cpp;
- torch.histc takes integer input as on CUDA, lowering/sort.cpp;
- torch.compile with no backend uses ours for tpu inputs, dynamo_backend.py;
- a script ending in an uncaught exception exits like on CPU.
"""

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn

import torch_tpu
from utils import assert_close

# ---- model.to("tpu") keeps Parameters --------------------------------------------


class TiedLM(nn.Module):
    """An embedding tied to the output head (as in GPT-2), a norm with buffers."""

    def __init__(self, vocab=11, d=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.norm = nn.BatchNorm1d(d)
        self.mid = nn.Linear(d, d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, idx):
        h = self.emb(idx)
        h = self.norm(h.reshape(-1, h.shape[-1])).reshape(h.shape)
        h = torch.relu(self.mid(h))
        return self.head(h)


def _params(model):
    return list(model.named_parameters(remove_duplicate=False))


def test_to_keeps_parameter_objects_and_ids():
    torch.manual_seed(0)
    m = TiedLM()
    before = [(n, p, id(p)) for n, p in _params(m)]
    values = [p.detach().clone() for _, p, _ in before]
    for move in (lambda: m.to("tpu"), lambda: m.to(torch.float64), lambda: m.cpu(), lambda: m.tpu(),
                 lambda: m.to(torch.float32), lambda: m.to("cpu")):
        move()
        after = _params(m)
        assert [n for n, _ in after] == [n for n, _, _ in before]
        for (_, p, pid), (_, q) in zip(before, after):
            assert q is p and id(q) == pid
            assert isinstance(q, nn.Parameter) and q.is_leaf and q.requires_grad
    m.to("tpu")
    assert all(p.device.type == "tpu" for _, p in _params(m))
    for v, (_, p, _) in zip(values, before):
        assert_close(p, v)


def test_to_keeps_ties():
    m = TiedLM()
    n_cpu = len(list(m.parameters()))
    m.to("tpu")
    assert m.head.weight is m.emb.weight
    assert len(list(m.parameters())) == n_cpu
    m.to(torch.bfloat16).cpu()
    assert m.head.weight is m.emb.weight and m.head.weight.device.type == "cpu"


def test_to_moves_grads_keeping_them():
    m = nn.Linear(4, 3)
    m(torch.randn(2, 4)).sum().backward()
    g = m.weight.grad
    expected = g.clone()
    m.to("tpu")
    assert m.weight.grad is g and g.device.type == "tpu"
    assert_close(m.weight.grad, expected)


def _train(model, opt, idx, tgt, steps=3):
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        out = model(idx)
        loss = nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), tgt.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("make_opt", [
    lambda ps: torch.optim.SGD(ps, lr=0.5, momentum=0.9),
    lambda ps: torch.optim.AdamW(ps, lr=0.05),
], ids=["sgd", "adamw"])
def test_optimizer_built_before_move_trains_as_on_cpu(make_opt):
    g = torch.Generator().manual_seed(3)
    idx = torch.randint(0, 11, (4, 5), generator=g)
    tgt = torch.randint(0, 11, (4, 5), generator=g)
    torch.manual_seed(1)
    ref = TiedLM()
    torch.manual_seed(1)
    m = TiedLM()
    ref_losses = _train(ref, make_opt(ref.parameters()), idx, tgt)
    opt = make_opt(m.parameters())  # as accelerate's prepare(model, opt) does
    m.to("tpu")
    losses = _train(m, opt, idx.tpu(), tgt.tpu())
    assert ref_losses[-1] < ref_losses[0]  # it does train
    assert_close(torch.tensor(losses), torch.tensor(ref_losses), atol=1e-5, rtol=1e-5)
    for (n, p), (_, q) in zip(ref.named_parameters(), m.named_parameters()):
        assert_close(q, p, atol=1e-5, rtol=1e-5)
    for (n, b), (_, c) in zip(ref.named_buffers(), m.named_buffers()):
        assert c.device.type == "tpu", n
        assert_close(c, b, atol=1e-5, rtol=1e-5)
    assert m.head.weight is m.emb.weight


def test_load_state_dict_after_move():
    torch.manual_seed(0)
    src = TiedLM()
    src.norm.running_mean.add_(1.5)
    m = TiedLM().to("tpu")
    params = [p for _, p in _params(m)]
    m.load_state_dict(src.state_dict())
    assert [p for _, p in _params(m)] == params and all(p is q for p, q in zip(params, [p for _, p in _params(m)]))
    for (n, p), (_, q) in zip(src.state_dict().items(), m.state_dict().items()):
        assert q.device.type == "tpu", n
        assert_close(q, p)
    assert m.head.weight is m.emb.weight


def test_shallow_copy_compatibility_rules():
    cpu, tpu = torch.zeros(2), torch.zeros(2, device="tpu")
    compat = torch._has_compatible_shallow_copy_type
    assert compat(cpu, tpu) and compat(tpu, cpu) and compat(tpu, tpu) and compat(cpu, cpu)
    assert not compat(tpu, torch.zeros(2).to_sparse())
    assert not compat(torch.zeros(2).to_sparse(), tpu)
    # `.data =` across devices, as on CUDA: the tensor takes the new data.
    p = nn.Parameter(torch.ones(3, device="tpu"))
    p.data = torch.full((3,), 2.0)
    assert p.device.type == "cpu" and p.tolist() == [2.0, 2.0, 2.0]
    p.data = torch.full((3,), 5.0, device="tpu")
    assert p.device.type == "tpu" and p.cpu().tolist() == [5.0, 5.0, 5.0]
    (p * p).sum().backward()
    assert p.grad.device.type == "tpu" and p.grad.cpu().tolist() == [10.0, 10.0, 10.0]


# ---- 0-dim CPU tensors in any position ---------------------------------------------

BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "true_divide": torch.true_divide,
    "floor_divide": torch.floor_divide, "remainder": torch.remainder, "fmod": torch.fmod, "pow": torch.pow,
    "maximum": torch.maximum, "minimum": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin,
    "atan2": torch.atan2, "hypot": torch.hypot, "copysign": torch.copysign, "logaddexp": torch.logaddexp,
    "xlogy": torch.xlogy, "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt,
    "ge": torch.ge, "rsub": torch.rsub, "where": lambda a, b: torch.where(torch.tensor([True, False, True, False]).to(
        a.device if a.dim() else b.device), a, b),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("side", ["left", "right"])
def test_cpu_scalar_tensor_either_side(name, side):
    fn = BINARY[name]
    x = torch.tensor([1.5, -2.0, 3.25, 0.5])
    c = torch.tensor(2.0)
    args = (c, x) if side == "left" else (x, c)
    expected = fn(*args)
    got = fn(*[a.tpu() if a.dim() else a for a in args])
    assert got.device.type == "tpu" and got.dtype == expected.dtype
    assert_close(got, expected)


@pytest.mark.parametrize("xdt,cdt", [
    (torch.int32, torch.float64), (torch.int64, torch.float32), (torch.float16, torch.float64),
    (torch.bfloat16, torch.float32), (torch.float32, torch.int64), (torch.int32, torch.int64),
    (torch.bool, torch.int32), (torch.uint8, torch.int64),
])
@pytest.mark.parametrize("op", ["mul", "sub", "maximum"])
def test_cpu_scalar_tensor_type_promotion(xdt, cdt, op):
    fn = getattr(torch, op)
    x = torch.tensor([1, 0, 3, 2]).to(xdt)
    c = torch.tensor(3).to(cdt)
    if op == "sub" and torch.bool in (xdt, cdt):
        pytest.skip("sub refuses bool, on CPU as on tpu")
    for args in ((c, x), (x, c)):
        expected = fn(*args)
        got = fn(*[a.tpu() if a.dim() else a for a in args])
        assert got.dtype == expected.dtype, (args[0].dtype, args[1].dtype)
        assert_close(got, expected)


def test_cpu_scalar_tensor_in_place_and_out():
    x = torch.tensor([1.0, 2.0, 4.0])
    c = torch.tensor(3.0)
    for method in ("mul_", "add_", "sub_", "div_", "pow_", "clamp_min_", "copysign_"):
        expected = getattr(x.clone(), method)(c)
        t = x.tpu()
        ret = getattr(t, method)(c)
        assert ret is t
        assert_close(t, expected)
    for fn in (torch.mul, torch.sub, torch.div, torch.maximum, torch.atan2):
        for args in ((c, x), (x, c)):
            expected = fn(*args)
            out = torch.empty(0, device="tpu")
            ret = fn(*[a.tpu() if a.dim() else a for a in args], out=out)
            assert ret is out
            assert_close(out, expected)
    # A 0-dim CPU tensor is a scalar to read, never a place to write (as on CUDA).
    with pytest.raises(RuntimeError):
        torch.add(x.tpu(), c, out=torch.tensor(0.0))
    with pytest.raises(RuntimeError, match="same device"):
        torch.tensor(1.0).add_(torch.tensor(3.0, device="tpu"))
    # integer self, float 0-dim tensor: in-place cannot cast, as on CPU
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.tensor([1, 2], device="tpu").mul_(torch.tensor(1.5))


def test_cpu_scalar_tensor_scheduler_step():
    """A Diffusers-style scheduler step: 0-dim CPU coefficients on the left."""
    torch.manual_seed(0)
    sample, eps = torch.randn(2, 4, 8, 8), torch.randn(2, 4, 8, 8)
    alpha_t, alpha_prev = torch.tensor(0.7), torch.tensor(0.9)

    def step(sample, eps):
        beta_t = 1 - alpha_t
        pred = (sample - beta_t ** 0.5 * eps) / alpha_t ** 0.5
        return alpha_prev ** 0.5 * pred + (1 - alpha_prev) ** 0.5 * eps

    assert_close(step(sample.tpu(), eps.tpu()), step(sample, eps))


# ---- torch.histc on integer input -----------------------------------------------------


def _histc_cuda_integral(x, bins, lo, hi):
    """CUDA's kernel for integer input, in Python int arithmetic."""
    vals = [int(v) for v in x.flatten().tolist()]
    lo, hi = int(lo), int(hi)
    if lo == hi and vals:
        lo, hi = min(vals), max(vals)
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    counts = [0] * bins
    for v in vals:
        if lo <= v <= hi:
            b = (v - lo) * bins // (hi - lo)
            counts[min(b, bins - 1)] += 1
    return torch.tensor(counts, dtype=x.dtype)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.int16])
@pytest.mark.parametrize("bins,lo,hi", [(8, 0, 7), (5, 0, 0), (3, 2, 9), (7, 1, 1), (4, 0.5, 6.9)])
def test_histc_integer(dtype, bins, lo, hi):
    g = torch.Generator().manual_seed(5)
    x = torch.randint(0, 10, (3, 17), generator=g).to(dtype)
    got = torch.histc(x.tpu(), bins=bins, min=lo, max=hi)
    assert got.dtype == dtype and got.shape == (bins,)
    assert torch.equal(got.cpu(), _histc_cuda_integral(x, bins, lo, hi))


def test_histc_integer_moe_experts_path():
    """Transformers' MoE experts: histc of expert ids counts tokens per expert."""
    experts = 8
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, experts, (64, 2), generator=g)
    got = torch.histc(ids.int().tpu(), bins=experts, min=0, max=experts - 1)
    assert torch.equal(got.cpu(), torch.bincount(ids.flatten(), minlength=experts).int())
    assert torch.histc(torch.empty(0, dtype=torch.int32, device="tpu"), bins=3).cpu().tolist() == [0, 0, 0]


def test_histc_float_unchanged_and_bool_refused():
    x = torch.randn(50, generator=torch.Generator().manual_seed(1))
    assert_close(torch.histc(x.tpu(), bins=6, min=-1, max=1), torch.histc(x, bins=6, min=-1, max=1))
    with pytest.raises(RuntimeError, match="histc"):
        torch.histc(torch.tensor([True, False], device="tpu"), bins=2)


# ---- torch.compile with no backend ----------------------------------------------------


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.lin(x)) * 2 + 1


# torch before 2.13 has no settable default backend: torch.compile() is inductor.
_settable_default = pytest.mark.skipif(not hasattr(torch._dynamo.backends.registry, "get_default_backend"),
                                       reason="this torch has no settable default Dynamo backend")


@_settable_default
@pytest.mark.usefixtures("fresh_dynamo")
def test_compile_default_backend_is_tpu_for_tpu_inputs():
    torch.manual_seed(0)
    m = Block()
    x = torch.randn(3, 4)
    expected = m(x)
    graphs = torch_tpu.compile_stats()["graphs"]
    got = torch.compile(m.tpu())(x.tpu())
    assert torch_tpu.compile_stats()["graphs"] > graphs  # our backend compiled it
    assert_close(got, expected)


@pytest.mark.usefixtures("fresh_dynamo")
def test_compile_inductor_on_tpu_inputs_names_tpu_backend():
    m = Block().tpu()
    with pytest.raises(Exception, match='backend="tpu"'):
        torch.compile(m, backend="inductor")(torch.randn(3, 4, device="tpu"))


@_settable_default
@pytest.mark.usefixtures("fresh_dynamo")
def test_compile_default_backend_is_inductor_for_cpu_inputs(monkeypatch):
    from torch._dynamo.backends.registry import get_default_backend

    from torch_tpu import dynamo_backend

    default = get_default_backend()
    assert default is dynamo_backend._default_backend
    seen = []

    def fake_inductor(mode, options):
        seen.append((mode, options))
        return lambda gm, inputs: gm.forward

    monkeypatch.setattr(default, "_inductor_for", fake_inductor)
    m = Block()
    x = torch.randn(3, 4)
    assert_close(torch.compile(m, mode="max-autotune")(x), m(x))
    assert seen == [("max-autotune", None)]
    # The Inductor it builds is torch.compile's own, configured the same way.
    monkeypatch.undo()
    w = default._inductor_for("max-autotune", None)
    assert isinstance(w, torch._TorchCompileInductorWrapper)
    assert w == torch._TorchCompileInductorWrapper("max-autotune", None, None)


def test_import_torch_stays_lazy():
    code = ("import sys, torch, torch_tpu; "
            "print(sorted(m for m in ('torch._dynamo', 'torch._inductor') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# ---- exit after an uncaught exception ---------------------------------------------------

EXIT_SCRIPTS = {
    "plain": "x = torch.ones(3, device='tpu') * 2; x.sum().item()",
    "backward": "w = torch.randn(16, 16, device='tpu', requires_grad=True); (w @ w).sum().backward()",
    "pending": "x = torch.randn(256, 256, device='tpu')\nfor _ in range(4): x = x @ x",
    "fused": "torch_tpu.eager_mode('fused'); y = torch.randn(8, 8, device='tpu').sin()",
    "compiled": "f = torch.compile(lambda a: a.sin() + 1, backend='tpu'); f(torch.randn(4, device='tpu'))",
    "no_lowering": "torch._weight_int4pack_mm(torch.randn(4, 4, device='tpu'), torch.ones(4, 4, dtype=torch.int32, "
                   "device='tpu'), 2, torch.randn(4, 4, device='tpu'))",
}


@pytest.mark.parametrize("what", sorted(EXIT_SCRIPTS))
def test_uncaught_exception_exits_cleanly(what):
    code = "import torch, torch_tpu\n" + EXIT_SCRIPTS[what] + "\nraise ValueError('boom')\n"
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         timeout=300, env=env)
    assert "terminate called" not in out.stderr
    assert "Fatal Python error" not in out.stderr
    assert out.returncode == 1, out.stderr[-2000:]
    assert out.stderr.rstrip().splitlines()[-1].split(":")[0] in ("ValueError", "NotImplementedError")
