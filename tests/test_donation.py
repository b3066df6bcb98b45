"""Buffer donation (csrc/runtime/donation.*): a fused program writes its
results into the buffers of parameters nobody else holds (an input storage
that an in-place op gave a new buffer, a temporary that died), and a replay
donates the old buffers of the inputs it overwrites. Every value is checked
against CPU: donation must never lose data that is still readable."""

import pytest
import torch

import torch_tpu
from torch_tpu import _C
from utils import assert_close

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

BIG = 64 * 1024  # floats: 256 KiB, above the donation threshold


def donated():
    return _C._fusion_stats()["donated"]


def copies():
    return _C._fusion_stats()["donation_copies"]


@pytest.fixture(autouse=True)
def replay_on(monkeypatch):
    monkeypatch.delenv("TORCH_TPU_GRAPH_REPLAY", raising=False)


def test_in_place_update_in_fused_trace_is_donated():
    x = torch.randn(BIG)
    t = x.to("tpu")
    before = donated()
    with torch_tpu.eager_mode("fused"):
        t.mul_(2)
        t.add_(1)
        torch_tpu.mark_step()
    assert donated() - before >= 1
    assert_close(t, x * 2 + 1)


def test_buffer_shared_with_a_view_is_kept():
    # `v` is a view of `t`: one storage, so the update is visible through both
    # (PyTorch semantics) and nothing is lost.
    x = torch.randn(BIG)
    t = x.to("tpu")
    v = t[:10]
    with torch_tpu.eager_mode("fused"):
        t.mul_(3)
        torch_tpu.mark_step()
    assert_close(t, x * 3)
    assert_close(v, x[:10] * 3)


def test_old_value_read_by_a_clone_survives():
    x = torch.randn(BIG)
    t = x.to("tpu")
    with torch_tpu.eager_mode("fused"):
        old = t.clone()
        t.add_(5)
        torch_tpu.mark_step()
    assert_close(old, x)
    assert_close(t, x + 5)


def test_small_buffers_are_not_donated():
    t = torch.ones(16, device="tpu")
    before = donated()
    with torch_tpu.eager_mode("fused"):
        t.mul_(2)
        t.add_(1)
        torch_tpu.mark_step()
    assert donated() == before
    assert_close(t, torch.full((16,), 3.0))


def test_compiled_optimizer_step_replays_with_donation():
    torch.manual_seed(0)
    model = torch.nn.Linear(256, 512)  # 512 KiB weight
    ref = torch.nn.Linear(256, 512)
    ref.load_state_dict(model.state_dict())
    model = model.to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=0.01, capturable=True)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=0.01)
    step = torch.compile(opt.step, backend="tpu")
    before, replays = donated(), torch_tpu.compile_stats()["replays"]
    for i in range(5):
        x = torch.randn(8, 256)
        for m, o, s, dev in ((model, opt, step, "tpu"), (ref, ref_opt, ref_opt.step, "cpu")):
            o.zero_grad()
            m(x.to(dev)).pow(2).mean().backward()
            s()
    assert torch_tpu.compile_stats()["replays"] - replays >= 2
    assert donated() - before >= 3  # weight, exp_avg, exp_avg_sq of the replays at least
    assert_close(model.weight, ref.weight, atol=1e-4, rtol=1e-3)
    assert_close(opt.state[model.weight]["exp_avg_sq"], ref_opt.state[ref.weight]["exp_avg_sq"], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("chain", [False, True])
def test_replay_copies_a_buffer_a_pending_trace_still_reads(chain):
    # Run at once (chaining off), the replay must copy the buffer the
    # pending trace still reads; chained into that trace (the default), it
    # is the same parameter there and nothing is copied.
    prev = torch_tpu._C._replay_chaining()
    torch_tpu._C._set_replay_chaining(chain)
    try:
        _replay_with_pending_reader(expected_copies=0 if chain else 1)
    finally:
        torch_tpu._C._set_replay_chaining(prev)


def _replay_with_pending_reader(expected_copies):
    def bump(x):
        x.mul_(2)

    f = torch.compile(bump, backend="tpu")
    x = torch.randn(BIG)
    t = x.to("tpu")
    for _ in range(3):  # plain, capture, then replays
        f(t)
        x.mul_(2)
    before = copies()
    with torch_tpu.eager_mode("fused"):
        pending = t + 0  # deferred: its trace holds t's current buffer
        f(t)             # a replay that overwrites t
        x_old = x.clone()
        x.mul_(2)
        torch_tpu.mark_step()
    assert copies() - before == expected_copies
    assert_close(pending, x_old)
    assert_close(t, x)


def test_saved_activations_survive_a_second_backward():
    # retain_graph: the backward graph's inputs are read again, so a replay
    # must never donate them (only inputs it overwrites).
    torch.manual_seed(0)
    lin = torch.nn.Linear(128, 512)
    model = torch.compile(lin.to("tpu"), backend="tpu")
    x = torch.randn(64, 128)
    grads = []
    for _ in range(4):
        lin.zero_grad()
        y = model(x.to("tpu")).tanh().sum()
        y.backward(retain_graph=True)
        first = lin.weight.grad.cpu().clone()
        lin.zero_grad()
        y.backward()
        assert_close(lin.weight.grad, first)
        grads.append(first)
    ref = torch.nn.Linear(128, 512)
    ref.load_state_dict({k: v.cpu() for k, v in lin.state_dict().items()})
    ref(x).tanh().sum().backward()
    assert_close(grads[-1], ref.weight.grad, atol=1e-4, rtol=1e-4)


@pytest.mark.skipif(torch.tpu.platform() != "cpu", reason="the recycler serves XLA:CPU's host buffers; "
                    "an accelerator's memory is reused by donation and its own allocator")
def test_freed_results_are_recycled_into_the_next_trace():
    x = torch.randn(BIG)
    t = x.to("tpu")
    tpu = torch.tpu
    tpu.empty_cache()
    with torch_tpu.eager_mode("fused"):
        for i in range(3):
            y = (t * 2 + i).exp()  # a fresh result: written into a recycled buffer from the 2nd step on
            torch_tpu.mark_step()
            assert_close(y, (x * 2 + i).exp())
            before = tpu.memory_reserved() - tpu.memory_allocated()
            del y  # its buffer is kept for reuse
            assert tpu.memory_reserved() - tpu.memory_allocated() >= before + BIG * 4
    tpu.empty_cache()
    assert tpu.memory_reserved() == tpu.memory_allocated()


def test_recycled_buffer_contents_are_never_read():
    # A recycled buffer holds an old result; the program must overwrite all of it.
    with torch_tpu.eager_mode("fused"):
        a = torch.full((BIG,), 7.0, device="tpu") * 1
        torch_tpu.mark_step()
        del a
        b = torch.zeros(BIG, device="tpu") + torch.arange(BIG, device="tpu", dtype=torch.float32) * 0
        torch_tpu.mark_step()
    assert_close(b, torch.zeros(BIG))


# ---- Strict Eager: a write into part of a storage updates it in place ------------
# (op_runner.cpp, donatable_writes): the storage's buffer, when that storage
# alone holds it, is donated to the op's program, which updates only the
# view's elements (DDP's copies into its flat gradient bucket).


def _strict_slice_writes(dev):
    """The same writes on `dev` (cpu or tpu); returns every tensor to compare."""
    g = torch.Generator().manual_seed(0)
    base = torch.randn(4 * BIG, generator=g).to(dev)
    grads = [torch.randn(BIG, generator=g).to(dev) for _ in range(3)]
    whole = base.view(4, BIG)          # an alias of the whole storage
    tail = base[3 * BIG:]              # another view, written by no one
    before = base.clone()              # a copy taken before the writes
    v0 = base._version
    for k, gr in enumerate(grads):
        base[k * BIG:(k + 1) * BIG].copy_(gr)
    versions = base._version - v0
    base[BIG // 2:BIG // 2 + 100].fill_(7.0)                 # another op, a small part
    base[:BIG].copy_(base[2 * BIG:3 * BIG])                  # source: the same storage
    whole[3, ::2].mul_(2.0)                                  # strided view of the alias
    return [base, whole, tail, before, *grads], versions


def test_strict_slice_write_updates_the_storage_in_place():
    with torch_tpu.eager_mode("strict"):
        start = donated()
        got, got_versions = _strict_slice_writes("tpu")
        n = donated() - start
        want, want_versions = _strict_slice_writes("cpu")
        assert got_versions == want_versions == 3  # autograd's version counter, as on CPU
        for g_, w_ in zip(got, want):
            assert_close(g_, w_)
        assert n >= 5  # each write into a part of `base` took its buffer


def test_strict_slice_write_keeps_a_shared_or_small_buffer():
    with torch_tpu.eager_mode("strict"):
        # small: below the threshold, nothing donated, values right
        s = torch.zeros(100, device="tpu")
        start = donated()
        s[10:20].copy_(torch.ones(10, device="tpu"))
        assert donated() == start
        want = torch.zeros(100)
        want[10:20] = 1
        assert_close(s, want)
        # a view of another dtype reads the storage's bits: never aliased
        # (the program's storage type differs), still exact
        x = torch.randn(2 * BIG)
        t = x.to("tpu")
        t.view(torch.int32)[:BIG].copy_(torch.arange(BIG, dtype=torch.int32).to("tpu"))
        x.view(torch.int32)[:BIG].copy_(torch.arange(BIG, dtype=torch.int32))
        assert torch.equal(t.cpu().view(torch.int32), x.view(torch.int32))


def test_strict_slice_write_after_fused_work():
    # a storage last written by a fused trace, then a slice write in Strict
    x = torch.randn(2 * BIG)
    t = x.to("tpu")
    with torch_tpu.eager_mode("fused"):
        t.mul_(2)
    with torch_tpu.eager_mode("strict"):
        r = t[:BIG]
        t[BIG:].copy_(r)
        want = x * 2
        want[BIG:] = want[:BIG]
        assert_close(t, want)
        assert_close(r, want[:BIG])
