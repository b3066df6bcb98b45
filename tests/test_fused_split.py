"""Fused Eager: a trace that recurs with a few ops changed (a decode step
over a growing KV cache and token buffer) runs split around them, so the
decode step's fused programs are compiled a bounded number of times, and
gives CPU's tokens (fusing_runtime.cpp, split_if_unstable)."""

import contextlib
import math

import pytest
import torch
import torch.nn as nn

import torch_tpu
from torch_tpu import _C
from cat_cache_block import Block
from torch_tpu import auto_bucket
from utils import assert_close

# Each test sets Fused Eager itself, so the pass's mode changes nothing:
# run once, in the Strict pass.
pytestmark = pytest.mark.mode_independent


class TinyLM(nn.Module):
    def __init__(self, vocab=64, d=32, heads=4, layers=1, positions=128):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(positions, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)


@contextlib.contextmanager
def auto_bucketing(on):
    prev = auto_bucket.set_enabled(on)
    try:
        yield
    finally:
        auto_bucket.set_enabled(prev)


def generate(model, device, steps, prompt=4, after_step=None):
    """Greedy decoding the way Transformers' generate does it: the token
    buffer grows by torch.cat and the step reads its last column (a view of
    a growing buffer), the caches grow by torch.cat, and a host read of the
    new token (the stopping check) ends each step's trace. A 64 KiB state
    buffer updated in place each step checks donation across the split."""
    torch.manual_seed(1)
    shape = (1, model.blocks[0].heads, prompt, 8)
    ks = [torch.randn(shape).to(device) for _ in model.blocks]
    vs = [torch.randn(shape).to(device) for _ in model.blocks]
    ids = torch.tensor([[1, 5, 9, 3]], device=device)
    state = torch.zeros(128, 128, device=device)
    out = []
    for i in range(steps):
        x = model.emb(ids[:, -1:]) + model.pos(torch.tensor([prompt + i], device=device))
        new_k, new_v = [], []
        for blk, kc, vc in zip(model.blocks, ks, vs):
            x, k, v = blk(x, kc, vc)
            new_k.append(k)
            new_v.append(v)
        ks, vs = new_k, new_v
        logits = model.head(model.ln(x))[:, -1]
        state.mul_(0.5).add_(logits.sum())
        nxt = logits.argmax(-1)
        ids = torch.cat([ids, nxt[:, None]], dim=-1)
        out.append(int(nxt.item()))
        if after_step is not None:
            after_step(i, ks)
    return out, ks, state


def test_decode_loop_fused_compiles_bounded_and_matches_cpu():
    steps = 10
    torch.manual_seed(0)
    model = TinyLM().eval()
    tpu_model = TinyLM().eval()
    tpu_model.load_state_dict(model.state_dict())
    tpu_model.to("tpu")
    with torch.no_grad(), auto_bucketing(False):  # this test is about splitting; bucketing is below
        want, want_k, want_state = generate(model, "cpu", steps)
        with torch_tpu.eager_mode("fused"):
            # The first two steps: each op's program for these sizes exists.
            generate(tpu_model, "tpu", 2)
            before, split_before = _C._fusion_stats()["compiles"], torch_tpu.fusion_stats()["split_traces"]
            got, got_k, got_state = generate(tpu_model, "tpu", steps)
            compiles = _C._fusion_stats()["compiles"] - before
            splits = torch_tpu.fusion_stats()["split_traces"] - split_before
    assert got == want
    assert_close(got_k[0].cpu(), want_k[0], atol=1e-4, rtol=1e-4)
    assert_close(got_state.cpu(), want_state, atol=1e-3, rtol=1e-5)
    # Every step but the ones before the history exists ran split; without
    # splitting each of the 10 steps compiled a new fused program.
    assert splits >= steps - 3, splits
    assert compiles <= math.ceil(math.log2(steps)) + 2, compiles


def test_shape_stable_loop_compiles_once_and_never_splits():
    """A trace that recurs unchanged reuses its fused program; one that
    alternates between two cached shapes is never split."""
    w = torch.randn(16, 16)
    wt = w.to("tpu")

    def step(x, w):
        return ((x @ w).relu() * 2 + 1).sum(-1)

    with torch_tpu.eager_mode("fused"):
        split_before = torch_tpu.fusion_stats()["split_traces"]
        before = _C._fusion_stats()["compiles"]
        for i in range(6):
            n = 4 if i % 2 == 0 else 8
            x = torch.arange(n * 16, dtype=torch.float32).view(n, 16) / 100
            got = step(x.to("tpu"), wt).cpu()
            assert_close(got, step(x, w), atol=1e-4, rtol=1e-5)
        compiles = _C._fusion_stats()["compiles"] - before
        splits = torch_tpu.fusion_stats()["split_traces"] - split_before
    assert splits == 0
    assert compiles <= 2, compiles


def test_growing_cat_is_bucketed_without_marks():
    """The same decode loop with no mark: the second torch.cat of a cache
    along one dim makes it a BoundedTensor (auto_bucket.py), padded to the
    next power of two, so the steps inside a bucket compile nothing (no
    program per length), and every step's token and the final cache equal
    CPU's (padded keys never reach the softmax or the argmax)."""
    steps, prompt = 12, 4  # cache lengths 5..16: buckets 8 and 16
    torch.manual_seed(0)
    model = TinyLM(d=16, heads=2).eval()  # sizes no other test here has built programs for
    tpu_model = TinyLM(d=16, heads=2).eval()
    tpu_model.load_state_dict(model.state_dict())
    tpu_model.to("tpu")
    per_step, kinds = [], []

    def programs():  # new op and fused programs, compiled or loaded from the disk cache
        return _C._recompile_stats()["programs"]

    def count(i, ks):
        per_step.append(programs())
        kinds.append(type(ks[0]).__name__)

    with torch.no_grad():
        want, want_k, want_state = generate(model, "cpu", steps)
        with torch_tpu.eager_mode("fused"), auto_bucketing(True):  # the default (auto_bucket.py), whatever TPU_FUSE_BUCKET says
            before = programs()
            got, got_k, got_state = generate(tpu_model, "tpu", steps, after_step=count)
    assert got == want
    assert kinds[0] == "Tensor" and set(kinds[1:]) == {"BoundedTensor"}, kinds
    assert got_k[0].shape == (1, 2, prompt + steps, 8) and got_k[0]._padded.shape[2] == 16
    assert_close(got_k[0].cpu(), want_k[0], atol=1e-4, rtol=1e-4)
    assert_close(got_state.cpu(), want_state, atol=1e-3, rtol=1e-5)
    # Step i leaves the cache at length prompt + i + 1. Lengths 11..16 are
    # the bucket of 16 after its first two steps (the crossing pads inside
    # its trace): no new program at all there. Without bucketing each of
    # those steps builds the programs of the ops over the cache for its
    # length.
    new = [b - a for a, b in zip([before] + per_step, per_step)]
    assert sum(new[prompt + 2:]) == 0, new
