"""`torch.tpu.optimizers` (torch_tpu/functional_optim/): the reference
backend's functional AdamW / Sgd / Muon against torch.optim (or, for Muon,
a plain-torch recomputation) on CPU, and SingleTraceTrainer's compiled
one-program step against the same training on CPU with torch.optim."""

import copy
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils import _pytree

from torch_tpu import _C
from utils import assert_close

from torch.tpu.optimizers import AdamW, Muon, Optimizer, Sgd, SingleTraceTrainer

TOL = dict(atol=1e-5, rtol=1e-5)
STEPS = 4


def _params(seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(6, 5, generator=g), "b": torch.randn(5, generator=g)}


def _grads(params, steps, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [{k: torch.randn(p.shape, generator=g) for k, p in params.items()} for _ in range(steps)]


def _run_functional(opt, params, grads, device="tpu"):
    group = opt.init_param_group({k: v.clone().to(device) for k, v in params.items()})
    for g in grads:
        out = opt.step(group, {k: v.to(device) for k, v in g.items()})
        assert out is group  # updated in place, the same group returned
    return group


def _run_torch(make, params, grads):
    ps = {k: v.clone().requires_grad_() for k, v in params.items()}
    opt = make(list(ps.values()))
    for g in grads:
        for k, p in ps.items():
            p.grad = g[k].clone()
        opt.step()
    return {k: p.detach() for k, p in ps.items()}


@pytest.mark.parametrize("kw", [dict(), dict(weight_decay=0.1, beta1=0.8, beta2=0.99, eps=1e-6),
                                dict(maximize=True, lr=0.05)])
def test_adamw_matches_torch_optim(kw):
    params, grads = _params(), _grads(_params(), STEPS)
    ours = _run_functional(AdamW(use_bfloat16_moments=False, **kw), params, grads)
    tk = {"lr": kw.get("lr", 1e-3), "weight_decay": kw.get("weight_decay", 1e-2),
          "betas": (kw.get("beta1", 0.9), kw.get("beta2", 0.999)), "eps": kw.get("eps", 1e-8),
          "maximize": kw.get("maximize", False)}
    expected = _run_torch(lambda ps: torch.optim.AdamW(ps, **tk), params, grads)
    for k in params:
        assert_close(ours.params[k], expected[k], **TOL)
        assert ours.opt_steps[k].item() == STEPS


def test_adamw_bfloat16_moments_match_cpu():
    # The reference's default: moments stored in bfloat16. Same optimizer
    # on CPU tensors is the reference result; fp32 moments are close.
    params, grads = _params(), _grads(_params(), STEPS)
    opt = AdamW(lr=0.01)
    ours = _run_functional(opt, params, grads)
    cpu = _run_functional(opt, params, grads, device="cpu")
    fp32 = _run_functional(AdamW(lr=0.01, use_bfloat16_moments=False), params, grads, device="cpu")
    for k in params:
        assert ours.opt_state_m[k].dtype == ours.opt_state_v[k].dtype == torch.bfloat16
        assert_close(ours.params[k], cpu.params[k], **TOL)
        assert_close(ours.opt_state_v[k], cpu.opt_state_v[k])
        assert_close(ours.params[k], fp32.params[k], atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("kw", [dict(), dict(momentum=0.9), dict(momentum=0.9, dampening=0.3),
                                dict(momentum=0.8, nesterov=True, weight_decay=0.05),
                                dict(weight_decay=0.1, maximize=True)])
def test_sgd_matches_torch_optim(kw):
    params, grads = _params(), _grads(_params(), STEPS)
    ours = _run_functional(Sgd(lr=0.1, **kw), params, grads)
    expected = _run_torch(lambda ps: torch.optim.SGD(ps, lr=0.1, **kw), params, grads)
    for k in params:
        assert_close(ours.params[k], expected[k], **TOL)
        assert ours.opt_steps[k].item() == 1 + STEPS  # counts start at 1
    assert bool(ours.opt_state_m) == (kw.get("momentum", 0) != 0)


def _newton_schulz_cpu(g, steps=5, a=3.4445, b=-4.7750, c=2.0315, eps=1e-7):
    x = g.bfloat16()
    if g.shape[0] > g.shape[1]:
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if g.shape[0] > g.shape[1] else x


@pytest.mark.parametrize("nesterov,adjust", [(True, None), (False, "match_rms_adamw")])
def test_muon_matches_cpu_newton_schulz(nesterov, adjust):
    g = torch.Generator().manual_seed(0)
    params = {"tall": torch.randn(12, 5, generator=g), "wide": torch.randn(4, 9, generator=g)}
    grads = _grads(params, 3)
    lr, wd, mu = 0.02, 0.1, 0.9
    ours = _run_functional(Muon(lr=lr, weight_decay=wd, momentum=mu, nesterov=nesterov,
                                adjust_lr_fn=adjust), params, grads)
    for k, p in params.items():
        p, buf = p.clone(), torch.zeros_like(p)
        rows, cols = p.shape
        ratio = 0.2 * math.sqrt(max(rows, cols)) if adjust else math.sqrt(max(1, rows / cols))
        for step in grads:
            buf = mu * buf + (1 - mu) * step[k]
            update = (1 - mu) * step[k] + mu * buf if nesterov else buf
            p = p * (1 - lr * wd) - lr * ratio * _newton_schulz_cpu(update).float()
        # bfloat16 iterations: XLA's and ATen's matmuls round differently
        assert_close(ours.params[k], p, atol=2e-3, rtol=2e-3)
        assert_close(ours.opt_state_m[k], buf, **TOL)
        assert ours.opt_steps[k].item() == 1 + 3


def test_grad_scale_and_found_inf():
    params, grads = _params(), _grads(_params(), 1)
    scale = torch.tensor(4.0, device="tpu")
    scaled = [{k: v * 4 for k, v in grads[0].items()}]
    plain = _run_functional(AdamW(use_bfloat16_moments=False), params, grads)
    unscaled = _run_functional(AdamW(use_bfloat16_moments=False, grad_scale=scale), params, scaled)
    skipped = _run_functional(Sgd(lr=0.1, momentum=0.9, found_inf=torch.tensor(1.0, device="tpu")),
                              params, grads)
    for k in params:
        assert_close(unscaled.params[k], plain.params[k].cpu(), **TOL)
        assert_close(skipped.params[k], params[k], atol=0, rtol=0)
        assert skipped.opt_steps[k].item() == 1.0


def test_param_group_structure_and_defaults():
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2)).to("tpu")
    group = AdamW().init_param_group(model)
    assert list(group.params) == ["0_weight", "0_bias", "1_weight", "1_bias"]
    # parameters are the module's storage: an update reaches the module
    group.params["0_bias"].add_(1.0)
    assert_close(model[0].bias, group.params["0_bias"].cpu(), atol=0, rtol=0)
    assert all(s.item() == 0.0 and s.device.type == "tpu" for s in group.opt_steps.values())
    leaves, spec = _pytree.tree_flatten(group)
    assert len(leaves) == 16 and isinstance(_pytree.tree_unflatten(leaves, spec), AdamW.ParamGroup)
    opt = Muon(lr=0.5)
    assert opt.defaults["lr"] == 0.5 and opt.defaults["momentum"] == 0.95
    with pytest.raises(TypeError):
        opt.defaults["lr"] = 1.0
    assert isinstance(opt, Optimizer) and set(Sgd().defaults) >= {"lr", "momentum", "nesterov"}
    assert Sgd().init_param_group({}).params == {}


def test_bad_input_raises_clearly():
    with pytest.raises(ValueError, match="lr"):
        AdamW(lr=-1.0)
    with pytest.raises(ValueError, match="beta2"):
        AdamW(beta2=1.0)
    with pytest.raises(ValueError, match="amsgrad"):
        AdamW(amsgrad=True)
    with pytest.raises(ValueError, match="Nesterov"):
        Sgd(nesterov=True)
    with pytest.raises(ValueError, match="ns_steps"):
        Muon(ns_steps=100)
    with pytest.raises(ValueError, match="adjust_lr_fn"):
        Muon(adjust_lr_fn="bogus")
    with pytest.raises(ValueError, match="2-D"):
        Muon().init_param_group({"b": torch.zeros(3, device="tpu")})
    with pytest.raises(TypeError, match="params"):
        Sgd().init_param_group([torch.zeros(3)])
    group = Sgd().init_param_group({"w": torch.zeros(2, 3, device="tpu")})
    with pytest.raises(KeyError, match="'w'"):
        Sgd().step(group, {})
    with pytest.raises(ValueError, match="shape"):
        Sgd().step(group, {"w": torch.zeros(3, 2, device="tpu")})
    with pytest.raises(TypeError, match="nn.Module"):
        SingleTraceTrainer("not a model")
    with pytest.raises(ValueError, match="compile_fn"):
        SingleTraceTrainer(nn.Linear(2, 2).to("tpu"), Sgd()).make_compiled_train_step(torch.zeros(1, 2))


# ---- SingleTraceTrainer ----------------------------------------------------

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(6, 16), nn.Linear(16, 16), nn.Linear(16, 3)

    def forward(self, x):
        return self.fc3(F.gelu(self.fc2(torch.tanh(self.fc1(x)))))


def _data(n=6):
    g = torch.Generator().manual_seed(3)
    return [(torch.randn(8, 6, generator=g), torch.randn(8, 3, generator=g)) for _ in range(n)]


def _tpu_compile(gm):
    return torch.compile(gm, backend="tpu")


def _train_cpu(model, make_opt, data, loss_fn=F.mse_loss):
    opt = make_opt(model.parameters())
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses)


@pytest.mark.usefixtures("fresh_dynamo")
@pytest.mark.parametrize("name", ["adamw", "sgd"])
def test_trainer_matches_cpu_training_as_one_program_per_step(name):
    torch.manual_seed(0)
    init, data = MLP(), _data()
    ours_opt, make_ref = {
        "adamw": (AdamW(lr=0.01, weight_decay=0.1, use_bfloat16_moments=False),
                  lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1)),
        "sgd": (Sgd(lr=0.05, momentum=0.9, nesterov=True),
                lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True)),
    }[name]
    ref = copy.deepcopy(init)
    ref_losses = _train_cpu(ref, make_ref, data)

    model = copy.deepcopy(init).to("tpu")
    trainer = SingleTraceTrainer(model, ours_opt, compile_fn=_tpu_compile)
    step = trainer.make_compiled_train_step(data[0][0].to("tpu"), data[0][1].to("tpu"))
    losses, seen = [], []
    for x, y in data:
        before, compiles = _C._fusion_stats()["flushes"], _C._compile_count()
        loss = step(x.to("tpu"), y.to("tpu"))
        torch.tpu.synchronize()
        seen.append((_C._fusion_stats()["flushes"] - before, _C._compile_count() - compiles))
        losses.append(loss.cpu())
    assert_close(torch.stack(losses), ref_losses, **TOL)
    for n, p in ref.named_parameters():
        assert_close(trainer.params[n], p.detach(), **TOL)
        assert_close(dict(model.named_parameters())[n], p.detach(), **TOL)  # the module sees it
    # forward, backward and optimizer: one program per step, compiled once
    assert seen[0][1] >= 1 and all(s == (1, 0) for s in seen[2:]), seen


@pytest.mark.usefixtures("fresh_dynamo")
@pytest.mark.parametrize("compile_fn", [torch.compile, lambda gm, inputs: torch.compile(gm, backend="tpu"),
                                        lambda gm: gm], ids=["torch.compile", "backend_signature", "eager"])
def test_trainer_takes_either_compile_fn_signature(compile_fn):
    torch.manual_seed(0)
    init, data = MLP(), _data(3)
    ref_losses = _train_cpu(copy.deepcopy(init), lambda ps: torch.optim.SGD(ps, lr=0.1), data)
    trainer = SingleTraceTrainer(copy.deepcopy(init).to("tpu"), Sgd(lr=0.1), compile_fn)
    step = trainer.make_compiled_train_step(data[0][0].to("tpu"), data[0][1].to("tpu"))
    losses = torch.stack([step(x.to("tpu"), y.to("tpu")).cpu() for x, y in data])
    assert_close(losses, ref_losses, **TOL)
    with pytest.raises(ValueError, match="targets"):
        step(data[0][0].to("tpu"))


@pytest.mark.usefixtures("fresh_dynamo")
def test_trainer_without_optimizer_leaves_gradients_in_param_grad():
    torch.manual_seed(0)
    init, (x, y) = MLP(), _data(1)[0]
    ref = copy.deepcopy(init)
    F.mse_loss(ref(x), y).backward()
    model = copy.deepcopy(init).to("tpu")
    step = SingleTraceTrainer(model, None, _tpu_compile).make_compiled_train_step(x.to("tpu"), y.to("tpu"))
    step(x.to("tpu"), y.to("tpu"))
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        assert p.grad is not None, n
        assert_close(p.grad, q.grad, **TOL)
        assert_close(p, q.detach(), atol=0, rtol=0)  # no optimizer: parameters unchanged


class BNClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        # no bias before the norm: its gradient would be rounding noise,
        # which AdamW's normalization amplifies into a different update
        self.fc, self.bn, self.out = nn.Linear(6, 8, bias=False), nn.BatchNorm1d(8), nn.Linear(8, 4)

    def forward(self, x):
        return self.out(torch.relu(self.bn(self.fc(x))))


@pytest.mark.usefixtures("fresh_dynamo")
def test_trainer_with_compute_loss_fn_and_buffers():
    # compute_loss_fn (cross entropy with labels in the batch dict) and
    # BatchNorm's running statistics, written by the step, against CPU.
    torch.manual_seed(0)
    init = BNClassifier()
    g = torch.Generator().manual_seed(5)
    data = [(torch.randn(8, 6, generator=g), torch.randint(0, 4, (8,), generator=g)) for _ in range(4)]
    ref = copy.deepcopy(init)
    _train_cpu(ref, lambda ps: torch.optim.AdamW(ps, lr=0.01), data, F.cross_entropy)

    def loss_fn(model, args, kwargs):
        return F.cross_entropy(model(kwargs["x"]), kwargs["labels"])

    model = copy.deepcopy(init).to("tpu")
    trainer = SingleTraceTrainer(model, AdamW(lr=0.01, use_bfloat16_moments=False), _tpu_compile, loss_fn)
    batch = lambda x, y: {"x": x.to("tpu"), "labels": y.to("tpu")}  # noqa: E731
    step = trainer.make_compiled_train_step(batch(*data[0]))
    for x, y in data:
        step(batch(x, y))
    for n, p in ref.named_parameters():
        assert_close(trainer.params[n], p.detach(), **TOL)
    for n, b in ref.named_buffers():
        assert_close(dict(model.named_buffers())[n], b, **TOL)


@pytest.mark.usefixtures("fresh_dynamo")
def test_trainer_traces_hugging_face_model_with_attention_mask():
    # Hugging Face builds its masks with data-dependent shortcuts unless it
    # knows it is traced; the trainer tells it so while tracing.
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=16,
                                  bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0,
                                  attn_pdrop=0.0)  # no dropout: CPU and tpu draw differently
    torch.manual_seed(0)
    init = transformers.GPT2LMHeadModel(cfg)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 50, (2, 8), generator=g)
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, 6:] = 0
    batch = {"input_ids": ids, "labels": ids, "attention_mask": mask}

    ref = copy.deepcopy(init)
    opt, ref_losses = torch.optim.AdamW(ref.parameters(), lr=1e-2), []
    for _ in range(3):
        opt.zero_grad()
        loss = ref(**batch).loss
        loss.backward()
        opt.step()
        ref_losses.append(loss.detach())

    trainer = SingleTraceTrainer(copy.deepcopy(init).to("tpu"), AdamW(lr=1e-2, use_bfloat16_moments=False),
                                 torch.compile)
    tpu_batch = {k: v.to("tpu") for k, v in batch.items()}
    step = trainer.make_compiled_train_step(tpu_batch)
    losses = torch.stack([step(tpu_batch).cpu() for _ in range(3)])
    assert_close(losses, torch.stack(ref_losses), atol=1e-4, rtol=1e-4)
