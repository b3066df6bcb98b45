"""RNG state as training needs it: seeding makes random ops repeat, states
round-trip mid-stream (also through torch.save), fork_rng restores, dropout
masks change each step and repeat under the same seed.

The tpu generator is a counter-based one (threefry in XLA), so its numbers
are not CPU's; what is compared with CPU is the distribution and dropout's
semantics (zeros and the 1/(1-p) scale), not the values."""

import io

import pytest
import torch
import torch.nn.functional as F

from utils import assert_close


def draw():
    return [
        torch.rand(50, device="tpu").cpu(),
        torch.randn(7, 3, device="tpu").cpu(),
        torch.randint(0, 1000, (40,), device="tpu").cpu(),
        torch.empty(30, device="tpu").uniform_(-2, 2).cpu(),
        torch.empty(30, device="tpu").normal_(1, 3).cpu(),
        torch.bernoulli(torch.full((64,), 0.5, device="tpu")).cpu(),
        torch.randperm(20, device="tpu").cpu(),
    ]


def assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert torch.equal(x, y), (x, y)


def assert_differ(a, b):
    assert any(not torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("seed_fn", [torch.manual_seed, torch.tpu.manual_seed, torch.tpu.manual_seed_all])
def test_seeding_repeats_every_random_op(seed_fn):
    seed_fn(1234)
    first = draw()
    second = draw()
    seed_fn(1234)
    again = draw()
    assert_same(first, again)
    assert_differ(first, second)
    seed_fn(4321)
    assert_differ(first, draw())


def test_initial_seed_follows_manual_seed():
    torch.manual_seed(99)
    assert torch.tpu.initial_seed() == 99
    torch.tpu.manual_seed(17)
    assert torch.tpu.initial_seed() == 17


def test_seed_all_picks_one_new_seed_for_every_device():
    torch.tpu.manual_seed_all(5)
    torch.tpu.seed_all()
    seed = torch.tpu.initial_seed()
    assert seed != 5
    assert all(g.initial_seed() == seed for g in torch.tpu.default_generators)
    first = draw()
    torch.tpu.manual_seed_all(seed)
    assert_same(first, draw())


def test_get_set_rng_state_mid_stream():
    torch.tpu.manual_seed(3)
    draw()  # move the generator off its start
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    expected = draw()
    assert not torch.equal(state, torch.tpu.get_rng_state())
    torch.tpu.set_rng_state(state)
    assert torch.equal(state, torch.tpu.get_rng_state())
    assert_same(draw(), expected)
    # device given by index, string or torch.device means the same generator
    assert torch.equal(torch.tpu.get_rng_state(0), torch.tpu.get_rng_state("tpu:0"))
    assert torch.equal(torch.tpu.get_rng_state(torch.device("tpu")), torch.tpu.get_rng_state())
    assert len(torch.tpu.get_rng_state_all()) == torch.tpu.device_count()


def test_rng_state_survives_torch_save():
    torch.tpu.manual_seed(11)
    draw()
    buf = io.BytesIO()
    torch.save({"tpu": torch.tpu.get_rng_state(), "cpu": torch.get_rng_state()}, buf)
    expected = draw()
    torch.tpu.manual_seed(0)
    buf.seek(0)
    states = torch.load(buf)
    torch.tpu.set_rng_state(states["tpu"])
    assert_same(draw(), expected)


def test_set_rng_state_rejects_bad_state():
    with pytest.raises((RuntimeError, TypeError, ValueError)):
        torch.tpu.set_rng_state(torch.zeros(3, dtype=torch.uint8))
    with pytest.raises((RuntimeError, TypeError, ValueError)):
        torch.tpu.set_rng_state(torch.zeros(16, dtype=torch.float32))


def test_fork_rng_restores_state_even_when_reseeded_inside():
    torch.manual_seed(5)
    cpu_before = torch.get_rng_state()
    tpu_before = torch.tpu.get_rng_state()
    with torch.random.fork_rng(device_type="tpu"):
        torch.manual_seed(777)
        inside = draw()
        torch.rand(10)  # CPU draws inside are undone as well
    assert torch.equal(torch.tpu.get_rng_state(), tpu_before)
    assert torch.equal(torch.get_rng_state(), cpu_before)
    after = draw()
    torch.manual_seed(5)
    assert_same(draw(), after)
    torch.manual_seed(777)
    assert_same(draw(), inside)


def test_fork_rng_explicit_devices_and_disabled():
    torch.tpu.manual_seed(8)
    before = torch.tpu.get_rng_state()
    with torch.random.fork_rng(devices=[0], device_type="tpu"):
        draw()
    assert torch.equal(torch.tpu.get_rng_state(), before)
    with torch.random.fork_rng(devices=[0], device_type="tpu", enabled=False):
        draw()
    assert not torch.equal(torch.tpu.get_rng_state(), before)


def test_generator_state_round_trip():
    g = torch.Generator(device="tpu").manual_seed(21)
    torch.rand(5, device="tpu", generator=g)
    state = g.get_state()
    a = torch.randn(40, device="tpu", generator=g).cpu()
    g.set_state(state)
    b = torch.randn(40, device="tpu", generator=g).cpu()
    assert torch.equal(a, b)
    # the default generator is untouched by an explicit one
    torch.tpu.manual_seed(21)
    default_state = torch.tpu.get_rng_state()
    torch.rand(100, device="tpu", generator=g)
    assert torch.equal(torch.tpu.get_rng_state(), default_state)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_masks_change_and_repeat(p):
    x = torch.ones(64, 64)
    xt = x.to("tpu")
    torch.manual_seed(0)
    masks = [F.dropout(xt, p, training=True).cpu() for _ in range(3)]
    torch.manual_seed(0)
    again = [F.dropout(xt, p, training=True).cpu() for _ in range(3)]
    assert_same(masks, again)
    assert not torch.equal(masks[0], masks[1]) and not torch.equal(masks[1], masks[2])
    for m in masks:
        # kept entries carry CPU's scale, 1/(1-p); dropped ones are zero
        kept = m != 0
        assert_close(m[kept], torch.full((int(kept.sum()),), 1 / (1 - p)))
        frac = 1 - kept.float().mean().item()
        assert abs(frac - p) < 0.05, frac  # 4096 draws: 5 sigma is under 0.04
    # eval mode and p=0 are the identity, as on CPU
    assert torch.equal(F.dropout(xt, p, training=False).cpu(), x)
    assert torch.equal(F.dropout(xt, 0.0, training=True).cpu(), x)


def test_dropout_module_backward_uses_the_forward_mask():
    torch.manual_seed(2)
    drop = torch.nn.Dropout(0.5)
    x = torch.randn(32, 32).to("tpu").requires_grad_()
    y = drop(x)
    y.sum().backward()
    mask = (y.detach().cpu() != 0)
    expected = mask.float() * 2.0
    assert torch.equal(x.grad.cpu(), expected)


def test_distribution_moments_match_cpu():
    torch.manual_seed(0)
    u = torch.rand(200_000, device="tpu").cpu().double()
    n = torch.randn(200_000, device="tpu").cpu().double()
    # CPU's expectations: U(0,1) mean 1/2 var 1/12; N(0,1) mean 0 var 1
    assert abs(u.mean().item() - 0.5) < 0.005 and abs(u.var().item() - 1 / 12) < 0.002
    assert abs(n.mean().item()) < 0.01 and abs(n.var().item() - 1) < 0.02
    assert u.min().item() >= 0 and u.max().item() < 1


def _checkpointed_block_grads(use_checkpoint, reentrant=False, compiled=False):
    """Output and gradients of a dropout block run on tpu, checkpointed or not,
    eager or under torch.compile, from the same seeds."""
    from torch.utils.checkpoint import checkpoint

    if compiled:
        torch._dynamo.reset()
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Dropout(0.5), torch.nn.GELU(),
                                torch.nn.Linear(32, 16)).to("tpu")
    x = torch.randn(8, 16).to("tpu").requires_grad_()
    def f(x):
        return (checkpoint(block, x, use_reentrant=reentrant) if use_checkpoint else block(x)).pow(2).sum()

    if compiled:
        f = torch.compile(f, backend="tpu")
    torch.manual_seed(1)
    y = f(x)
    y.backward()
    return [y.detach().cpu(), x.grad.cpu()] + [p.grad.cpu() for p in block.parameters()]


# torch.utils.checkpoint stashes a device's RNG state only when the device
# module's `_initialized` is true; without it the recomputed forward drew new
# dropout masks and the gradients were silently those of another mask.
@pytest.mark.parametrize("reentrant", [False, True])
def test_activation_checkpointing_recomputes_the_same_dropout_mask(reentrant):
    want = _checkpointed_block_grads(False)
    assert torch.tpu._initialized  # the device is in use
    for got, w in zip(_checkpointed_block_grads(True, reentrant), want):
        assert_close(got, w)


# Under torch.compile AOTAutograd recomputes a checkpointed region's ops in
# the backward graph; its wrapper for random ones (`run_and_save_rng_state`)
# knows no tpu, so the graph failed. The backend's partitioner saves the
# random ops' outputs instead: the gradients are those of the forward's masks.
def test_compiled_activation_checkpointing_with_dropout():
    want = _checkpointed_block_grads(False, compiled=True)
    for got, w in zip(_checkpointed_block_grads(True, compiled=True), want):
        assert_close(got, w)
