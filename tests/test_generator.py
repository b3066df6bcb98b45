"""The tpu generator: seeding and state round trips through torch's API."""

import torch


def test_manual_seed_reproduces_and_calls_differ():
    torch.manual_seed(123)
    a = torch.rand(64, device="tpu").cpu()
    b = torch.rand(64, device="tpu").cpu()
    torch.manual_seed(123)
    a2 = torch.rand(64, device="tpu").cpu()
    assert torch.equal(a, a2)
    assert not torch.equal(a, b)


def test_tpu_manual_seed_and_state_round_trip():
    torch.tpu.manual_seed(7)
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    x = torch.randn(32, device="tpu").cpu()
    torch.tpu.set_rng_state(state)
    y = torch.randn(32, device="tpu").cpu()
    assert torch.equal(x, y)


def test_fork_rng():
    torch.manual_seed(5)
    with torch.random.fork_rng(device_type="tpu"):
        inside = torch.rand(8, device="tpu").cpu()
    after = torch.rand(8, device="tpu").cpu()
    assert torch.equal(inside, after)


def test_explicit_generator():
    g = torch.Generator(device="tpu").manual_seed(3)
    a = torch.rand(16, device="tpu", generator=g).cpu()
    g.manual_seed(3)
    b = torch.rand(16, device="tpu", generator=g).cpu()
    assert torch.equal(a, b)
    assert g.device.type == "tpu"
