"""Every torch.optim optimizer, in its default, foreach and fused forms, with
LR schedulers and gradient clipping: 10 steps on tpu give the parameters
that 10 steps on CPU give from the same start."""

import pytest
import torch
from torch import nn

from utils import assert_close

O = torch.optim

# (optimizer, kwargs, forms PyTorch offers besides the default)
CASES = [
    ("sgd", O.SGD, dict(lr=0.05, maximize=True), ("foreach", "fused")),
    ("sgd_momentum", O.SGD, dict(lr=0.05, momentum=0.9, weight_decay=0.01), ("foreach", "fused")),
    ("sgd_nesterov", O.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, dampening=0), ("foreach", "fused")),
    ("adam", O.Adam, dict(lr=0.01), ("foreach", "fused")),
    ("adam_amsgrad_wd", O.Adam, dict(lr=0.01, amsgrad=True, weight_decay=0.1), ("fused",)),
    ("adam_maximize", O.Adam, dict(lr=0.01, maximize=True), ("fused",)),
    ("adamw", O.AdamW, dict(lr=0.01, weight_decay=0.1), ("foreach", "fused")),
    ("adamw_amsgrad", O.AdamW, dict(lr=0.01, amsgrad=True), ("fused",)),
    ("adamax", O.Adamax, dict(lr=0.01), ("foreach",)),
    ("nadam", O.NAdam, dict(lr=0.01), ("foreach",)),
    ("nadam_decoupled", O.NAdam, dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True), ()),
    ("radam", O.RAdam, dict(lr=0.01), ("foreach",)),
    ("rmsprop", O.RMSprop, dict(lr=0.01), ("foreach",)),
    ("rmsprop_centered_momentum", O.RMSprop, dict(lr=0.01, centered=True, momentum=0.5), ()),
    ("adagrad", O.Adagrad, dict(lr=0.1), ("foreach", "fused")),
    ("adagrad_decay", O.Adagrad, dict(lr=0.1, lr_decay=0.01, weight_decay=0.01), ("fused",)),
    ("adadelta", O.Adadelta, dict(lr=1.0), ("foreach",)),
    ("asgd", O.ASGD, dict(lr=0.01, t0=3), ("foreach",)),
    ("rprop", O.Rprop, dict(lr=0.01), ("foreach",)),
]

PARAMS = []
for name, cls, kw, forms in CASES:
    PARAMS.append(pytest.param(cls, kw, "default", id=f"{name}-default"))
    for form in forms:
        PARAMS.append(pytest.param(cls, kw, form, id=f"{name}-{form}"))


def make_model(device):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))
    return m.to(device)


def data(device):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(20, 6, generator=g)
    y = torch.randn(20, 3, generator=g)
    return x.to(device), y.to(device)


def train(device, cls, kw, form, steps=10, clip=None, sched=None):
    m = make_model(device)
    x, y = data(device)
    kw = dict(kw)
    if form == "foreach":
        kw["foreach"] = True
    elif form == "fused":
        kw["fused"] = True
    elif cls is not O.LBFGS:
        kw["foreach"] = False
    opt = cls(m.parameters(), **kw)
    scheduler = sched(opt) if sched else None
    for _ in range(steps):
        def closure():
            opt.zero_grad()
            loss = nn.functional.mse_loss(m(x), y)
            loss.backward()
            if clip == "norm":
                nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            elif clip == "value":
                nn.utils.clip_grad_value_(m.parameters(), 0.05)
            return loss
        opt.step(closure)
        if scheduler is not None:
            scheduler.step()
    params = [p.detach().cpu() for p in m.parameters()]
    state = [{k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in s.items()}
             for s in opt.state.values()]
    return params, state


def compare(cls, kw, form, **extra):
    # CPU reference: the same optimizer (CPU has fused kernels for Adam, AdamW,
    # SGD and Adagrad too).
    expected, exp_state = train("cpu", cls, kw, form, **extra)
    actual, act_state = train("tpu", cls, kw, form, **extra)
    start = [p.detach() for p in make_model("cpu").parameters()]
    # The test can fail: the parameters moved.
    assert any((a - b).abs().max() > 1e-4 for a, b in zip(expected, start))
    for a, e in zip(actual, expected):
        assert_close(a, e, atol=2e-5, rtol=2e-5)
    for sa, se in zip(act_state, exp_state):
        assert sa.keys() == se.keys()
        for k in se:
            if isinstance(se[k], torch.Tensor):
                assert_close(sa[k].float(), se[k].float(), atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("cls,kw,form", PARAMS)
def test_optimizer_matches_cpu(cls, kw, form):
    compare(cls, kw, form)


def test_lbfgs():
    compare(O.LBFGS, dict(lr=0.5, max_iter=4, history_size=5), "default", steps=4)


def test_lbfgs_strong_wolfe():
    compare(O.LBFGS, dict(lr=1.0, max_iter=4, line_search_fn="strong_wolfe"), "default", steps=3)


@pytest.mark.parametrize("form", ["default", "foreach", "fused"])
def test_clip_grad_norm_with_scheduler(form):
    compare(O.AdamW, dict(lr=0.02), form, clip="norm",
            sched=lambda o: O.lr_scheduler.StepLR(o, step_size=3, gamma=0.5))


@pytest.mark.parametrize("form", ["default", "foreach"])
def test_clip_grad_value_with_cosine(form):
    compare(O.SGD, dict(lr=0.1, momentum=0.9), form, clip="value",
            sched=lambda o: O.lr_scheduler.CosineAnnealingLR(o, T_max=10))


def test_onecycle_schedule():
    compare(O.Adam, dict(lr=0.01), "foreach",
            sched=lambda o: O.lr_scheduler.OneCycleLR(o, max_lr=0.05, total_steps=10))


def test_clip_grad_norm_value():
    torch.manual_seed(0)
    ps = [torch.randn(5, 4, requires_grad=True), torch.randn(7, requires_grad=True)]
    for p in ps:
        p.grad = torch.randn_like(p) * 3
    tps = [p.detach().to("tpu").requires_grad_() for p in ps]
    for p, t in zip(ps, tps):
        t.grad = p.grad.to("tpu")
    for norm_type in (2.0, 1.0, float("inf")):
        n_cpu = nn.utils.clip_grad_norm_(ps, 1.0, norm_type=norm_type)
        n_tpu = nn.utils.clip_grad_norm_(tps, 1.0, norm_type=norm_type)
        assert n_tpu.device.type == "tpu"
        assert_close(n_tpu, n_cpu)
        for p, t in zip(ps, tps):
            assert_close(t.grad, p.grad)


def test_lr_change_does_not_recompile():
    m = make_model("tpu")
    x, y = data("tpu")
    opt = O.Adam(m.parameters(), lr=0.01, fused=True)
    sched = O.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (s + 1))

    def step():
        opt.zero_grad()
        nn.functional.mse_loss(m(x), y).backward()
        opt.step()
        sched.step()

    for _ in range(3):
        step()
    torch.tpu.synchronize()
    before = torch_tpu._C._compile_count()
    for _ in range(3):
        step()
    torch.tpu.synchronize()
    assert torch_tpu._C._compile_count() == before


import torch_tpu  # noqa: E402
