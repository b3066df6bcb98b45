"""Bounded dynamism: graphs with symbolic sizes (mark_dynamic) run padded to
power-of-two buckets, compile once per bucket, and give the unpadded
results."""

import contextlib
import copy
import math
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu
from torch_tpu import _C
from torch_tpu.bounded_graph import bucket
from cat_cache_block import Block
from utils import assert_close

TOL = dict(atol=2e-5, rtol=2e-5)


pytestmark = pytest.mark.usefixtures("fresh_dynamo")

def bounded_compiles():
    return torch_tpu.compile_stats()["bounded_compiles"]


def test_bucket_sizes():
    assert [bucket(v, None) for v in (1, 2, 3, 5, 8, 9, 100)] == [1, 2, 4, 8, 8, 16, 128]
    assert bucket(90, 96) == 96 and bucket(5, 6) == 6


# ---- a causal LM with a growing KV cache ----------------------------------------


class TinyLM(nn.Module):
    def __init__(self, vocab=64, d=32, heads=4, layers=2, positions=512):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(positions, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def decode(self, tok, pos, ks, vs):
        """One token in, the next greedy token and the caches one longer out."""
        x = self.emb(tok) + self.pos(pos)
        new_k, new_v = [], []
        for blk, kc, vc in zip(self.blocks, ks, vs):
            x, k, v = blk(x, kc, vc)
            new_k.append(k)
            new_v.append(v)
        return self.head(self.ln(x))[:, -1].argmax(-1), new_k, new_v


def generate(model, device, steps, compiled, prompt=4):
    torch.manual_seed(1)
    shape = (1, 4, prompt, 8)
    ks = [torch.randn(shape).to(device) for _ in model.blocks]
    vs = [torch.randn(shape).to(device) for _ in model.blocks]
    step = torch.compile(model.decode, backend="tpu") if compiled else model.decode
    tok = torch.tensor([[1]], device=device)
    out = []
    for i in range(steps):
        if compiled:
            for t in ks + vs:
                torch._dynamo.mark_dynamic(t, 2, min=2, max=prompt + steps)
        pos = torch.tensor([prompt + i], device=device)
        nxt, ks, vs = step(tok, pos, ks, vs)
        tok = nxt.view(1, 1)
        out.append(nxt)
    return [int(t.item()) for t in out], ks


def test_decode_256_tokens_compiles_per_bucket():
    torch.manual_seed(0)
    model = TinyLM().eval()
    with torch.no_grad():
        want, want_k = generate(model, "cpu", 256, compiled=False)
        tpu_model = TinyLM().eval()
        tpu_model.load_state_dict(model.state_dict())
        tpu_model.to("tpu")
        before = bounded_compiles()
        got, got_k = generate(tpu_model, "tpu", 256, compiled=True)
    compiles = bounded_compiles() - before
    assert got == want
    assert got_k[0].shape == want_k[0].shape == (1, 4, 260, 8)
    assert_close(got_k[1].cpu(), want_k[1], atol=1e-4, rtol=1e-4)
    # Sizes 4..259: buckets 4, 8, ..., 256 and the cap 260.
    assert compiles <= math.ceil(math.log2(256)) + 2, compiles


def test_prefill_then_decode_traces_twice_with_dynamic_true():
    """Generate as Transformers runs it: one compiled forward called with the
    prompt and an empty cache, then one token a step. With dynamic=True
    Dynamo traces it twice (prefill, decode). The prefill's cache comes out
    as a view with room (bounded_graph._room), so the decode trace sees the
    strides every later step has; a contiguous one made Dynamo guard on
    contiguity and trace the decode step a second time at the next step."""
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model = TinyLM().eval()

    def run(m, device, compiled):
        step = torch.compile(m.decode, backend="tpu", dynamic=True) if compiled else m.decode
        # 16 prompt tokens: a full bucket (so the prefill's cache needs
        # room), and no other size of the caches (dynamic=True gives equal
        # sizes one symbol, and the cat would pin it)
        tok = torch.arange(1, 17, device=device).view(1, 16)
        pos = torch.arange(16, device=device)
        ks = [torch.zeros(1, 4, 0, 8, device=device) for _ in m.blocks]
        vs = [torch.zeros(1, 4, 0, 8, device=device) for _ in m.blocks]
        out = []
        for i in range(10):
            nxt, ks, vs = step(tok, pos, ks, vs)
            tok, pos = nxt.view(1, 1), torch.tensor([16 + i], device=device)
            out.append(int(nxt.item()))
        return out, ks

    with torch.no_grad():
        want, want_k = run(model, "cpu", False)
        tpu_model = TinyLM().eval()
        tpu_model.load_state_dict(model.state_dict())
        tpu_model.to("tpu")
        counters.clear()
        before = bounded_compiles()
        got, got_k = run(tpu_model, "tpu", True)
    assert got == want
    assert_close(got_k[0].cpu(), want_k[0], atol=1e-4, rtol=1e-4)
    assert counters["stats"]["unique_graphs"] == 2, dict(counters["stats"])
    # prefill (bucket 16), decode buckets 16, 32 (sizes 16..25)
    assert bounded_compiles() - before <= 4


def test_graph_constant_and_cat_with_empty_1d_run_padded():
    """A tensor constant made in the graph (Transformers' lazily initialised
    cache, `torch.tensor([])`) and torch.cat's skipping of a 1-d empty piece
    (that constant joined with the keys) run padded, not at exact sizes."""
    def fn(x):
        empty = torch.tensor([], device=x.device)
        return torch.cat([empty, x], dim=-2).sum(-2)

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert run_sizes(fn, [5, 6, 7], lambda n: [torch.randn(1, 2, n, 8)], {0: 2}) == 1
    assert not [w for w in seen if "recompiles for every new size" in str(w.message)]


# ---- the rules, one by one --------------------------------------------------------


def run_sizes(fn, sizes, make, dims, lo=2):
    """fn compiled with `dims` ({arg: dim}) marked dynamic from `lo` to 64,
    called at each size; returns the bounded compiles and checks every
    result against CPU."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="tpu")
    before = bounded_compiles()
    with torch.no_grad():
        for n in sizes:
            args = make(n)
            want = fn(*args)
            targs = [a.to("tpu") for a in args]
            for i, d in dims.items():
                torch._dynamo.mark_dynamic(targs[i], d, min=lo, max=64)
            got = compiled(*targs)
            want = want if isinstance(want, tuple) else (want,)
            got = got if isinstance(got, tuple) else (got,)
            for g, w in zip(got, want):
                assert g.shape == w.shape
                assert_close(g.cpu(), w, **TOL)
    return bounded_compiles() - before


def test_reductions_over_padded_dim():
    def fn(x):
        return (x.sum(1), x.mean(1), x.amax(1), x.amin(1, keepdim=True), x.softmax(1),
                x.log_softmax(1), x.argmax(1), x.logsumexp(1))

    c = run_sizes(fn, [9, 10, 13, 16], lambda n: [torch.randn(3, n)], {0: 1})
    assert c == 1


def test_contraction_over_padded_dim():
    def fn(a, b):
        return a @ b, torch.bmm(a.unsqueeze(0), b.unsqueeze(0))

    c = run_sizes(fn, [5, 6, 7], lambda n: [torch.randn(3, n), torch.randn(n, 4)], {0: 1, 1: 0})
    assert c == 1


def test_cat_slice_select_along_padded_dim():
    def fn(x, y):
        z = torch.cat([x, y, x], 1)
        return z, z[:, -1], z[:, 1:-1] * 2, z[:, -3:].sum(1)

    c = run_sizes(fn, [9, 11, 12], lambda n: [torch.randn(2, n), torch.randn(2, 3)], {0: 1})
    assert c == 1


def test_pointwise_with_symbolic_scalar_and_arange():
    def fn(x):
        n = x.shape[0]
        return x * n + torch.arange(n, device=x.device)

    c = run_sizes(fn, [5, 6, 8], lambda n: [torch.randn(n)], {0: 0})
    assert c == 1


def test_sdpa_decode_and_causal_prefill():
    def decode(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)

    def prefill(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    qkv = lambda t: lambda n: [torch.randn(1, 2, t or n, 8), torch.randn(1, 2, n, 8), torch.randn(1, 2, n, 8)]  # noqa: E731
    assert run_sizes(decode, [5, 6, 7], qkv(1), {1: 2, 2: 2}) == 1
    assert run_sizes(prefill, [5, 6, 7], qkv(None), {0: 2, 1: 2, 2: 2}) == 1


def test_topk_and_sort_along_a_static_dim():
    """An MoE router's top-k experts per token, tokens padded."""
    def fn(x):
        v, i = x.softmax(-1).topk(2, dim=-1)
        return v, i, x.sort(-1)[0]

    assert run_sizes(fn, [5, 6, 7], lambda n: [torch.randn(n, 6)], {0: 0}) == 1


@contextlib.contextmanager
def no_exact_size_warning():
    """A graph that cannot run padded warns (and compiles per size): here an
    error."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*recompiles for every new size")
        yield


def test_unsupported_graph_runs_at_exact_sizes():
    def fn(x):
        return F.layer_norm(x, x.shape[-1:]) * 2  # normalised over the padded dim: no rule

    with pytest.warns(UserWarning, match="recompiles for every new size.*native_layer_norm"):
        run_sizes(fn, [5, 6], lambda n: [torch.randn(3, n)], {0: 1})


def test_view_with_a_size_that_divides_by_a_symbolic_int():
    """DeepseekV4's compressor views (1, n, d) as chunks whose count divides
    by an int argument (symbolic under dynamic=True); the probe values the
    view check compares sizes with made that divisor 0: ZeroDivisionError
    crashed the compile, then the graph ran at exact sizes. The traced
    values (bounded_rules._probe_values) now match the view's groups; a
    call whose padded sizes would be smaller than the real ones (n // c is
    not monotone) runs at its exact sizes, and every size gives CPU's
    result."""
    def fn(x, w):
        n = x.shape[1]
        c = (w * (n // w)) // 4
        return x[:, : c * (n // c)].reshape(1, c, n // c, x.shape[2]) * 2

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="tpu", dynamic=True)
    with torch.no_grad():
        for n in range(8, 17):
            x = torch.randn(1, n, 4)
            got, want = compiled(x.to("tpu"), 2), fn(x, 2)
            assert got.shape == want.shape
            assert_close(got.cpu(), want, **TOL)


def test_topk_and_sort_along_the_padded_dim():
    """Along the padded dim the padding (zeros here, from pad_to) must never
    be selected: all real values are negative for the largest, positive for
    the smallest. A real -inf (descending) and a real NaN (ascending) tie
    with the padding's fill and still come before it."""
    def fn(neg, pos):
        return (neg.topk(2, dim=1), pos.topk(2, dim=1, largest=False), pos.sort(1),
                neg.sort(1, descending=True), torch.argsort(pos, dim=1, stable=True))

    def make(n):
        x = torch.randn(2, n).abs() + 1
        neg, pos = -x, x.clone()
        neg[0, 1] = float("-inf")
        pos[1, 2] = float("nan")
        return [neg, pos]

    def flat(fn):
        return lambda *a: tuple(t for r in fn(*a) for t in (r if isinstance(r, tuple) else (r,)))

    with no_exact_size_warning():
        assert run_sizes(flat(fn), [5, 6, 7], make, {0: 1, 1: 1}) == 1


def test_view_merging_the_padded_dim_outermost():
    """(s, 2, 4) -> (2*s, 4) and back: the merged dim's real entries are a
    prefix (2*n of 2*N), so reductions over it mask from its real size."""
    def fn(x):
        y = x.reshape(-1, 4)
        return y.sum(0), y.softmax(0), y.view(x.shape[0], 2, 4) * 2, x.view(1, -1, 8).amax(1)

    with no_exact_size_warning():
        assert run_sizes(fn, [5, 6, 7], lambda n: [torch.randn(n, 2, 4)], {0: 0}) == 1


def test_views_interleaving_padding_with_real_entries_are_gathered():
    """Views whose padding would land among real entries run padded as a
    gather (bounded_rules._relayout_rule): two padded dims merged, a padded
    dim with a dim outside it, and XLNet's relative shift, which views
    (q, k) scores as (k, q) to shift each row by its index. Every result
    equals CPU's at each size, one compile per bucket."""
    def fn(x):
        y = x.t() @ x  # (n, n): two padded dims
        return y.reshape(-1).sum(), y.reshape(-1).cumsum(0), x.flatten() * 2

    def shift(s):
        scores = s @ torch.cat([s, s], 2).transpose(-1, -2)  # (1, 2, n, 2n)
        b, h, q, k = scores.shape
        return scores.reshape(b, h, k, q)[:, :, 1:, :].reshape(b, h, q, k - 1)[..., :q] * 1

    with no_exact_size_warning():
        assert run_sizes(fn, [5, 6, 7], lambda n: [torch.randn(3, n)], {0: 1}) == 1
        torch._dynamo.reset()
        compiled = torch.compile(shift, backend="tpu", dynamic=True)
        before = bounded_compiles()
        with torch.no_grad():
            for n in (5, 6, 7):
                s = torch.randn(1, 2, n, 4)
                assert_close(compiled(s.to("tpu")).cpu(), shift(s), **TOL)
        assert bounded_compiles() - before == 1


def test_reshape_of_a_slice_sized_by_an_exact_quotient_runs_padded():
    """XLNet's relative shift with a memory: reshaping the shifted slice,
    the meta kernels size its last dim s*((t + 2*s - 1)//s), which Dynamo's
    guards make equal to t + 2*s - 1. Read as written that size is smaller
    padded than real (s 3 -> 4, t 4: 8 < 9) and the calls ran at their
    exact sizes; read as the guards say it runs padded, once per bucket."""
    def shift(s, m):
        scores = s @ torch.cat([m, s, s], 2).transpose(-1, -2)
        b, h, q, k = scores.shape
        x = scores.reshape(b, h, k, q)[:, :, 1:, :].reshape(b, h, q, k - 1)
        return torch.index_select(x, 3, torch.arange(q + m.shape[2], device=x.device)) * 1

    torch._dynamo.reset()
    compiled = torch.compile(shift, backend="tpu", dynamic=True)
    before = bounded_compiles()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("error", message="<TorchTpu/")  # "smaller padded than real" included
        for n in (3, 4, 5, 6, 7):
            s, m = torch.randn(1, 2, n, 4), torch.randn(1, 2, 4, 4)
            assert_close(compiled(s.to("tpu"), m.to("tpu")).cpu(), shift(s, m), **TOL)
    assert bounded_compiles() - before == 2  # buckets 4 and 8


def test_results_that_are_views_of_inputs_stay_views_of_the_callers_tensors():
    """A compiled function returning a view of its input (a transpose, a
    narrow, a select) at sizes padded by copying: AOTAutograd rebuilds
    such a result from the caller's tensor with the result's geometry,
    which relative to the padded copy was out of bounds (setStorage crash).
    The results equal CPU's and alias the caller's tensor, as in eager."""
    def fn(y):
        return y.t().reshape(-1, 3), y[:, 1:], y[1], y.unsqueeze(0).transpose(1, 2)

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="tpu", dynamic=True)
    with torch.no_grad():
        for n in (5, 6, 7):
            x = torch.randn(3, n)
            tx = x.to("tpu")
            got = compiled(tx)
            for g, w in zip(got, fn(x)):
                assert g.shape == w.shape
                assert_close(g.cpu(), w, **TOL)
            tx.add_(1)  # seen through every result, as through eager views
            for g, w in zip(got, fn(x + 1)):
                assert_close(g.cpu(), w, **TOL)


def test_view_of_an_input_to_int_arguments_is_a_view_of_the_callers_tensor():
    """`x.view(*shape)` with the shape passed as ints (LongcatFlash's
    `experts(...).view(*orig_shape)` after a graph break): under
    dynamic=True the ints are symbols and the padded run's result is a
    fresh buffer with room, whose geometry AOTAutograd applied to the
    caller's tensor (setStorage out of bounds). The result is the caller's
    tensor viewed at the real sizes, as in eager."""
    def fn(x, heads, n, width):
        return x.view(heads, n, width), x.t()[:, 1:]

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="tpu", dynamic=True)
    with torch.no_grad():
        for n in (3, 4, 5, 6, 7):
            x = torch.randn(n, 32)
            tx = x.to("tpu")
            got = compiled(tx, 1, n, 32)
            for g, w in zip(got, fn(x, 1, n, 32)):
                assert g.shape == w.shape and g.stride() == w.stride()
                assert_close(g.cpu(), w, **TOL)
            tx.add_(1)  # seen through the results, as through eager views
            for g, w in zip(got, fn(x + 1, 1, n, 32)):
                assert_close(g.cpu(), w, **TOL)


@pytest.mark.parametrize("piece", [
    lambda x: x.split([x.shape[0] - 1, 1])[1], lambda x: x.split_with_sizes([x.shape[0] - 2, 2])[1],
    lambda x: x.unbind(0)[-1], lambda x: x.chunk(2)[1], lambda x: x.tensor_split(3)[2],
    lambda x: x.unbind(1)[2], lambda x: x.diagonal(), lambda x: x.unfold(0, 2, 1),
], ids=["split", "split_with_sizes", "unbind", "chunk", "tensor_split", "unbind_static_dim", "diagonal", "unfold"])
def test_a_piece_of_a_split_input_is_a_view_of_the_callers_tensor(piece):
    """A graph that returns a piece of its input's split (split_with_sizes,
    unbind, chunk, tensor_split, then getitem) along the padded dim: the
    piece was taken from the padded copy, and AOTAutograd applied its
    geometry to the caller's tensor: the first rows, or rows at a wrong
    stride, silently (`x.split([n - 1, 1])[1]` gave row 0). It is the same
    piece of the caller's tensor, as in eager."""
    torch._dynamo.reset()
    compiled = torch.compile(piece, backend="tpu", dynamic=True)
    with torch.no_grad():
        for n in (3, 5, 6, 9):
            x = torch.arange(n * 4, dtype=torch.float32).reshape(n, 4)
            tx = x.to("tpu")
            got, want = compiled(tx), piece(x)
            assert got.shape == want.shape and got.stride() == want.stride()
            assert got.storage_offset() == want.storage_offset()
            assert torch.equal(got.cpu(), want)
            tx.add_(1)  # seen through the result, as through an eager view
            assert torch.equal(got.cpu(), piece(x + 1))


def test_index_and_index_put_with_padded_indices():
    """x[perm], the inverse permutation built with index_put, a negative
    index into the padded dim (counted from the real size) and an
    accumulating index_put whose padding entries (index 0, value 1) must not
    count."""
    def fn(x):
        perm = x[:, 0].argsort()
        inv = torch.empty_like(perm)
        inv[perm] = torch.arange(perm.shape[0], device=x.device)
        ids = (x[:, 1].abs() * 10).long() % 5
        counts = torch.zeros(5, device=x.device).index_put((ids,), torch.ones(x.shape[0], device=x.device), accumulate=True)
        last = x[torch.tensor([-1, 0], device=x.device)]
        return x[perm], x[perm][inv], inv, counts, last

    with no_exact_size_warning():
        assert run_sizes(fn, [5, 6, 7], lambda n: [torch.randn(n, 4)], {0: 0}) == 1


BAD_INDEX = {
    # name: (fn(x, i), an index tensor in range at the real size 6)
    "index": lambda x, i: x[i],
    "index_put": lambda x, i: x.index_put((i,), torch.ones(i.shape[0], x.shape[1], device=x.device)),
    "gather": lambda x, i: x.gather(0, i.unsqueeze(1).expand(-1, x.shape[1])),
    "scatter": lambda x, i: x.scatter(0, i.unsqueeze(1).expand(-1, x.shape[1]), 1.0),
}


@pytest.mark.parametrize("op", sorted(BAD_INDEX))
@pytest.mark.parametrize("bad", [6, 7, -7])
def test_index_past_real_size_raises(op, bad):
    """An index into a padded dim that is out of range at the real size (6,
    padded to 8) but would land in the padding raises as on CPU, rather
    than read or write the padding (a silent wrong answer)."""
    fn = BAD_INDEX[op]
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="tpu")
    x = torch.randn(6, 3)
    good = torch.tensor([5, 0, 2])
    if op != "gather" and op != "scatter":
        good = torch.tensor([5, -6, 2])
    tx = x.to("tpu")
    torch._dynamo.mark_dynamic(tx, 0, min=2, max=64)
    with no_exact_size_warning():  # it runs padded
        assert_close(compiled(tx, good.to("tpu")).cpu(), fn(x, good), **TOL)
    wrong = torch.tensor([5, bad, 2])
    with pytest.raises((IndexError, RuntimeError)):
        fn(x, wrong)
    with pytest.raises((IndexError, RuntimeError), match="out of bounds"):
        compiled(tx, wrong.to("tpu")).cpu()
    torch.tpu.synchronize()


def grouped_experts(x, router, w, top_k=2):
    """Transformers' grouped_mm experts path (integrations/moe.py), small:
    tokens flattened with their top-k experts, sorted by expert, counted
    with histc into grouped_mm offsets, multiplied and put back in order."""
    weights, experts = (x @ router).softmax(-1).topk(top_k, dim=-1)
    ids = experts.reshape(-1)
    ids_g, perm = torch.sort(ids)
    rows = x[perm // top_k]
    counts = torch.histc(ids_g.float(), bins=w.shape[0], min=0, max=w.shape[0] - 1)
    offs = torch.cumsum(counts, 0, dtype=torch.int32)
    out = torch._grouped_mm(rows, w, offs=offs) * weights.reshape(-1)[perm].unsqueeze(-1)
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.shape[0], device=x.device)
    return out[inv].view(x.shape[0], top_k, -1).sum(1)


def test_grouped_mm_experts_run_padded():
    """The whole MoE chain padded: padded tokens sort last, histc leaves
    them out of the offsets, so grouped_mm gives each real row its expert."""
    torch.manual_seed(0)
    w = torch.randn(3, 4, 8)
    router = torch.randn(4, 3)
    make = lambda n: [torch.randn(n, 4), router, w]  # noqa: E731
    with no_exact_size_warning():
        assert run_sizes(grouped_experts, [5, 6, 7], make, {0: 0}) == 1


# ---- Fused Eager: torch_tpu.mark_dynamic ----------------------------------------


def test_fused_eager_decode_compiles_per_bucket():
    """The same decode loop, eager: the caches are marked once and stay
    padded (BoundedTensor) as they grow."""
    steps, prompt = 60, 4
    torch.manual_seed(0)
    model = TinyLM().eval()
    tpu_model = TinyLM().eval()
    tpu_model.load_state_dict(model.state_dict())
    tpu_model.to("tpu")

    def run(m, device, mark):
        torch.manual_seed(1)
        ks = [torch.randn(1, 4, prompt, 8).to(device) for _ in m.blocks]
        vs = [torch.randn(1, 4, prompt, 8).to(device) for _ in m.blocks]
        if mark:
            ks = [torch_tpu.mark_dynamic(t, 2, 1, prompt + steps) for t in ks]
            vs = [torch_tpu.mark_dynamic(t, 2, 1, prompt + steps) for t in vs]
        tok, out = torch.tensor([[1]], device=device), []
        for i in range(steps):
            nxt, ks, vs = m.decode(tok, torch.tensor([prompt + i], device=device), ks, vs)
            tok = nxt.view(1, 1)
            out.append(int(nxt.item()))
        return out, ks

    with torch.no_grad():
        want, want_k = run(model, "cpu", False)
        with torch_tpu.eager_mode("fused"):
            before = _C._fusion_stats()["compiles"]
            got, got_k = run(tpu_model, "tpu", True)
            compiles = _C._fusion_stats()["compiles"] - before
    assert got == want
    assert isinstance(got_k[0], torch_tpu.bounded_tensor.BoundedTensor)
    assert got_k[0].shape == (1, 4, prompt + steps, 8)
    assert_close(got_k[0].cpu(), want_k[0], atol=1e-4, rtol=1e-4)
    # Sizes 4..64 cross 4 buckets (8, 16, 32, 64); a step that crosses one
    # pads inside its trace, so each bucket has at most two programs.
    assert compiles <= 2 * (math.ceil(math.log2(steps + prompt)) + 1), compiles


def test_compiled_function_given_a_cat_grown_tensor_in_fused_eager():
    """A tensor that Fused Eager's cat keeps padded (a BoundedTensor) given
    to a compiled function: Dynamo traced into the subclass's dispatch and
    failed on the third call ("exception table entry start instruction has
    no offset"). Its hooks are now opaque to Dynamo: the ops on it run as in
    eager, with CPU's values."""
    f = lambda x: x * 2 + x.sum(-1, keepdim=True)  # noqa: E731
    cf = torch.compile(f, backend="tpu")
    x = torch.zeros(1, 1)
    with torch.no_grad(), torch_tpu.eager_mode("fused"):
        xt = x.to("tpu")
        for _ in range(6):
            assert_close(cf(xt).cpu(), f(x))
            x = torch.cat([x, torch.full((1, 1), float(x.shape[1]))], 1)
            xt = torch.cat([xt, torch.full((1, 1), float(xt.shape[1]), device="tpu")], 1)
        assert isinstance(xt, torch_tpu.bounded_tensor.BoundedTensor)


def test_mark_dynamic_eager_ops_match_cpu():
    x = torch.randn(3, 11)
    with torch_tpu.eager_mode("fused"):
        b = torch_tpu.mark_dynamic(x.to("tpu"), 1, 2, 64)
        assert b.shape == x.shape and b._padded.shape == (3, 16)
        y = torch.cat([b, b[:, :2]], 1)
        z = torch.ones(3, device="tpu")
        outs = [b.sum(1), b.softmax(1), (b @ b.t()), y[:, -1], y.mean(1), b * 2 + 1,
                torch.select_scatter(b, z, 1, -1), torch.slice_scatter(b, z[:, None].expand(3, 2), 1, -3, None, 2)]
        outs = [o.cpu() for o in outs]
    wy = torch.cat([x, x[:, :2]], 1)
    wants = [x.sum(1), x.softmax(1), x @ x.t(), wy[:, -1], wy.mean(1), x * 2 + 1,
             torch.select_scatter(x, torch.ones(3), 1, -1),
             torch.slice_scatter(x, torch.ones(3, 2), 1, -3, None, 2)]
    for o, w in zip(outs, wants):
        assert o.shape == w.shape
        assert_close(o, w, **TOL)


def test_mark_dynamic_eager_sdpa_runs_whole_and_matches_cpu(monkeypatch):
    """scaled_dot_product_attention over a padded KV cache runs as one
    padded op (bounded_rules._sdpa_rule, not its decomposition): padded
    keys masked out of the scores (no mask, boolean, float, causal),
    padded values zeroed, padded query rows; GQA."""
    from torch_tpu import bounded_tensor

    ran = []
    run = bounded_tensor._Plan.run
    monkeypatch.setattr(bounded_tensor._Plan, "run", lambda self, *a: ran.append(self.func) or run(self, *a))
    torch.manual_seed(0)
    q1, q5 = torch.randn(1, 4, 1, 8), torch.randn(1, 4, 5, 8)
    k, v = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    bool_mask, float_mask = torch.rand(1, 1, 1, 5) > 0.3, torch.randn(1, 1, 1, 5)
    cases = [dict(), dict(attn_mask=bool_mask), dict(attn_mask=float_mask), dict(is_causal=True)]
    with torch_tpu.eager_mode("fused"):
        kb, vb = (torch_tpu.mark_dynamic(t.to("tpu"), 2, 1, 64) for t in (k, v))
        vb._padded[:, :, 5:] = float("nan")  # garbage that 0 * padding must not let through
        for kw in cases:
            q = q5 if kw.get("is_causal") else q1
            qb = torch_tpu.mark_dynamic(q.to("tpu"), 2, 1, 64) if kw.get("is_causal") else q.to("tpu")
            tkw = {n: (m.to("tpu") if n == "attn_mask" else m) for n, m in kw.items()}
            if "attn_mask" in kw:  # the mask grows with the cache: padded along its last dim
                tkw["attn_mask"] = torch_tpu.mark_dynamic(tkw["attn_mask"], 3, 1, 64)
            ran.clear()
            got = F.scaled_dot_product_attention(qb, kb, vb, enable_gqa=True, **tkw)
            assert ran == [torch.ops.aten.scaled_dot_product_attention.default], ran
            want = F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kw)
            assert got.shape == want.shape
            assert_close(got.cpu(), want, **TOL)


def test_bounded_tensor_behaves_as_a_tensor():
    """What user code does with a tensor, on a BoundedTensor: writes into
    views that the padded value runs as copies (a slice or select along the
    padded dim, a view the padded layout does not allow) reach the tensor;
    its memory is the real entries' view of the padded storage (data_ptr,
    stride, storage agree); tolist, torch.save/load (as a plain tensor) and
    deepcopy give the real entries."""
    import copy
    import io

    writes = [
        lambda y: y.__setitem__((0, -1), 99.0),
        lambda y: y[:, -3:-1].add_(1),
        lambda y: y[:, -1:].view(2).fill_(0),
        lambda y: y.view(-1)[-1:].fill_(5),
        lambda y: torch.add(torch.ones(2, 2, device=y.device), 1, out=y[:, 2:][:, -2:]),
        lambda y: y.split(4, dim=1)[-1].mul_(-1),
    ]
    x = torch.arange(18.0).view(2, 9)
    with torch_tpu.eager_mode("fused"):
        for w in writes:
            want, y = x.clone(), torch_tpu.mark_dynamic(x.to("tpu"), 1, 1, 64)
            w(want)
            w(y)
            assert_close(y.cpu(), want)
        y = torch_tpu.mark_dynamic(x.to("tpu"), 1, 1, 64)
        assert y.stride() == y._padded.stride() and y.data_ptr() == y._padded.data_ptr()
        assert y.untyped_storage().data_ptr() == y._padded.untyped_storage().data_ptr()
        assert y.tolist() == x.tolist()
        buf = io.BytesIO()
        torch.save({"y": y}, buf)
        buf.seek(0)
        assert torch.load(buf, map_location="cpu")["y"].tolist() == x.tolist()
        z = copy.deepcopy(y)
        z.add_(1)
        assert y.tolist() == x.tolist() and z.tolist() == (x + 1).tolist()


@pytest.mark.parametrize("take", [
    lambda y: y[:, -1], lambda y: y[:, -2:], lambda y: y.narrow(1, y.shape[1] - 2, 2),
    lambda y: y.chunk(2, 1)[1], lambda y: y.tensor_split(3, 1)[2], lambda y: y.unfold(1, 2, 1),
    lambda y: y[:, -3:][:, 1:],
], ids=["select", "slice", "narrow", "chunk", "tensor_split", "unfold", "slice_of_slice"])
def test_views_taken_before_a_write_read_the_new_values(take):
    """A view that the padded value runs as a copy (along the padded dim)
    was a snapshot: written through afterwards, by the tensor or by a
    sibling view, it still read the old values, silently. Each such copy
    is taken again after a write into its source's storage, as a view
    reads through."""
    x = torch.arange(18.0).view(2, 9)
    with torch_tpu.eager_mode("fused"), torch.no_grad():
        y = torch_tpu.mark_dynamic(x.to("tpu"), 1, 1, 64)
        want, got = take(x.clone()), take(y)
        base = want._base
        base.add_(1)  # the tensor written in place
        y.add_(1)
        assert_close(got.cpu(), want)
        sib_want, sib_got = base[:, -1], y[:, -1]
        sib_want.mul_(10)  # a sibling view written in place
        sib_got.mul_(10)
        assert_close(got.cpu(), want)
        assert_close(y.cpu(), base)


def test_mark_dynamic_outside_fused_only_marks():
    t = torch.randn(2, 5, device="tpu")
    with torch_tpu.eager_mode("strict"):
        assert torch_tpu.mark_dynamic(t, 1, 2, 8) is t
    with pytest.raises(ValueError, match="outside"):
        torch_tpu.mark_dynamic(t, 1, 6, 8)


def test_error_in_graph_with_symbolic_sizes_names_op_and_line():
    def fn(x):
        return x.uniform_(2.0, 1.0).sum(0)  # from > to: raised when it runs

    compiled = torch.compile(fn, backend="tpu")
    x = torch.randn(6, 3, device="tpu")
    torch._dynamo.mark_dynamic(x, 0, min=2, max=64)
    with pytest.raises(RuntimeError) as info:
        compiled(x)
    msg = str(info.value)
    assert "uniform" in msg and "test_bounded_dynamism.py" in msg


def test_copy_into_slices_of_a_new_tensor_along_a_static_dim():
    # MLA attention (AXK1, DeepSeek-style) builds its key as new_empty and
    # copy_ into two slices of the last dim: functionalised to aten.copy and
    # slice_scatter, which run unchanged when the padded dim is another one.
    def fn(a, b):
        k = a.new_empty(*a.shape[:-1], a.shape[-1] + b.shape[-1])
        k[..., : a.shape[-1]].copy_(a)
        k[..., a.shape[-1]:].copy_(b.expand(-1, a.shape[1], -1, -1))
        return k * 2

    make = lambda n: [torch.randn(1, 2, n, 4), torch.randn(1, 1, n, 3)]  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph run at exact sizes warns
        assert run_sizes(fn, [5, 6, 7], make, {0: 2, 1: 2}) == 1



def test_slice_and_select_scatter_along_a_padded_dim():
    """DeepseekV4's compressor shifts its chunks by one along the padded
    chunk dim (`new_kv[:, 1:, :r] = kv[:, :-1, :, :d]`) and writes chunk 0:
    slice_scatter and select_scatter along the padded dim. Negative and
    symbolic starts count from the real size; a source padded along the
    dim writes only its real entries (into a static dim too)."""
    def fn(x, y, z):
        n = x.shape[1]
        out = x.clone()
        out[:, 1:, :2] = y[:, :-1, :2]  # shift by one
        out[:, 0, :2] = z[:, :2]
        out[:, -1, 2:] = z[:, 2:] * 3  # negative index: the last real entry
        out[:, -2:, :1] = 7.0
        out[:, n - 2:n - 1, 1:2] = -1.0  # symbolic start
        out[:, ::2, 3:] = y[:, ::2, 3:] + 1  # step 2 from 0
        fixed = torch.zeros(2, 65, 4, device=x.device)  # longer than any n marked
        fixed[:, :n] = y  # a padded source into a static dim
        return out * 2, fixed

    make = lambda n: [torch.randn(2, n, 4), torch.randn(2, n, 4), torch.randn(2, 4)]  # noqa: E731
    with no_exact_size_warning():
        # from 3: `x[:, 1:]` of a dim of 2 would be Dynamo's size-1 special case
        assert run_sizes(fn, [5, 6, 7], make, {0: 1, 1: 1}, lo=3) == 1


def test_view_of_an_empty_tensor_with_a_padded_dim():
    """A view of a tensor with a zero-size dim besides the padded one
    (LongcatFlash) has no entries to interleave: it runs padded."""
    def fn(x):
        e = x[:, :0]
        return e.view(x.shape[0], 2, 0).sum(-1) + x[:, :1]

    with no_exact_size_warning():
        assert run_sizes(fn, [5, 6, 7], lambda n: [torch.randn(n, 4)], {0: 0}) == 1


def test_view_splitting_one_symbol_by_another():
    """LongcatFlash views its s0 flattened tokens as (s1 batch, s0 // s1):
    the view check's probe values once made that quotient 0 (s1 the
    larger) and refused the graph as a view of an empty tensor. (Dynamo
    names the symbols from the arguments' names: with these, torch 2.13
    gives x's size s77 and heads' s84, the order that made the 0.)"""
    def fn(x, heads):
        return x.view(heads.shape[0], -1, 4).sum(1) + heads[:, None]

    make = lambda n: [torch.randn(2 * n, 4), torch.randn(2)]  # noqa: E731
    with no_exact_size_warning():
        assert run_sizes(fn, [5, 6, 7], make, {0: 0, 1: 0}) == 1


def test_gather_and_scatter_with_padded_indices():
    """An MoE router's group mask (Glm4MoeLite: full_like, scatter of the
    top groups, gather of their scores), tokens padded; a scatter whose
    index is padded along the scattered dim (padding rows of zeros give
    argmax 0: their writes must not reach entry 0); and a sparse-attention
    mask (AXK2: 0 scattered into -inf at each query's top-k keys)."""
    def fn(x):
        top = x.topk(2, dim=1).indices
        mask = torch.full_like(x, 0).scatter(1, top, 1)
        hits = torch.zeros(9, device=x.device).scatter_add(0, x.argmax(1), torch.ones_like(x[:, 0]))
        keys = (x @ x.t()).topk(2, dim=-1).indices
        sparse = torch.full((x.shape[0], x.shape[0]), float("-inf"), device=x.device).scatter(-1, keys, 0.0)
        return mask, x.gather(1, top), torch.zeros_like(x).scatter_add(1, top, x[:, :2]), hits, sparse

    with no_exact_size_warning():
        assert run_sizes(fn, [5, 6, 7], lambda n: [torch.randn(n, 9)], {0: 0}) == 1


def test_symbolic_int_argument_shapes_exactly():
    """dynamic=True makes an int argument a symbol (a sliding window's
    length: DeepseekV4, GraniteMoeSWA); one that shapes a tensor is no
    input's size, so it stays exact while the sizes are bucketed."""
    def fn(x, w):
        return x[:, -w:].sum(1), x[:, :w] * 2

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="tpu", dynamic=True)
    before = bounded_compiles()
    with no_exact_size_warning(), torch.no_grad():
        for n in (5, 6, 7):
            x = torch.randn(3, n)
            for g, w in zip(compiled(x.to("tpu"), 3), fn(x, 3)):
                assert g.shape == w.shape
                assert_close(g.cpu(), w, **TOL)
    assert bounded_compiles() - before == 1


def test_int_argument_that_only_sizes_tensors_is_bucketed():
    """XLM's get_masks(slen, lengths) makes `arange(slen)` and its causal
    mask from the int alone: under dynamic=True the graph has no input of
    symbolic size, only the symbolic int, and compiled once per length.
    Every use of the int here is a size or read at its real value (slice
    bound, pointwise operand), so it is bucketed: one compile for 5..7. A
    use that needs its exact value (tril's diagonal) keeps it exact."""
    def masks(lengths, n):
        alen = torch.arange(n, device=lengths.device)
        causal = alen[None, None, :].repeat(lengths.shape[0], n, 1) <= alen[None, :, None]
        return causal, alen < lengths[:, None], lengths.max(), (alen * n).sum(), alen[-n + 1:]

    def diagonal(x, n):
        return x.sum(1), torch.ones(n, n, device=x.device).tril(n - 4).sum(0)

    torch._dynamo.reset()
    compiled = torch.compile(masks, backend="tpu", dynamic=True)
    before = bounded_compiles()
    with no_exact_size_warning(), torch.no_grad():
        for n in (5, 6, 7):
            lengths = torch.tensor([n - 2, n])
            for g, w in zip(compiled(lengths.to("tpu"), n), masks(lengths, n)):
                assert g.shape == w.shape
                assert torch.equal(g.cpu(), w)
    assert bounded_compiles() - before == 1
    compiled = torch.compile(diagonal, backend="tpu", dynamic=True)
    with torch.no_grad():
        for n in (5, 6, 7):
            x = torch.randn(3, n + 2)
            for g, w in zip(compiled(x.to("tpu"), n), diagonal(x, n)):
                assert g.shape == w.shape
                assert_close(g.cpu(), w, **TOL)


def test_gather_along_static_and_padded_dims():
    """gather runs padded: an MoE router's weights of its top-k experts
    (MiniMax-M2, PhiMoE: tokens padded, gathered along the experts), and
    along the padded dim itself, with an index whose padding would be out
    of range (n - 1 - arange(P) is negative past n) unless masked."""
    def router(x):
        w = x.softmax(-1)
        v, i = w.topk(2, dim=-1)
        return w.gather(1, i) + v

    def along(x, i):
        n = x.shape[0]
        rev = (n - 1 - torch.arange(n, device=x.device)).unsqueeze(1).expand(-1, x.shape[1])
        return x.gather(0, rev), x.t().gather(1, i)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph run at exact sizes warns
        assert run_sizes(router, [5, 6, 7], lambda n: [torch.randn(n, 6)], {0: 0}) == 1
        make = lambda n: [torch.randn(n, 3), torch.randint(0, 5, (3, 4))]  # noqa: E731
        assert run_sizes(along, [5, 6, 7], make, {0: 0}) == 1


def test_convolution_along_a_padded_dim():
    """A causal depthwise conv1d over the padded sequence (Mamba's:
    padding k - 1, cut back to the length), a centred one and a strided
    transposed one, whose last real outputs read past the real input: the
    input's padding is zeroed, so they see CPU's zeros."""
    conv = nn.Conv1d(4, 4, 3, padding=2, groups=4)
    up = nn.ConvTranspose1d(4, 2, 3, stride=2, padding=1, output_padding=1)

    def fn(x, w, b, wu, bu):
        x = x + 1  # the padding is no longer zero
        causal = F.conv1d(x, w, b, padding=2, groups=4)[..., : x.shape[-1]]
        centred = F.conv1d(x, w, b, padding=1, groups=4)
        return causal, centred, F.conv_transpose1d(x, wu, bu, stride=2, padding=1, output_padding=1)

    params = [conv.weight.detach(), conv.bias.detach(), up.weight.detach(), up.bias.detach()]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph run at exact sizes warns
        assert run_sizes(fn, [5, 6, 7], lambda n: [torch.randn(1, 4, n)] + params, {0: 2}) == 1


def test_split_and_cumsum_along_a_padded_dim():
    """ProphetNet chunks its main and predict streams along the padded
    sequence (cat of two streams, then split) and counts positions with a
    cumsum along it: pieces start at the real offsets, scans run as they
    are."""
    def fn(x):
        z = torch.cat([x + 1, x * 2], 1)
        a, b = z.split([x.shape[1], x.shape[1]], dim=1)
        c, d = z.split([2, 2 * x.shape[1] - 2], dim=1)
        return a, b, c, d.sum(1), x.cumsum(1), x.cummax(1)[0]

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph run at exact sizes warns
        assert run_sizes(fn, [5, 6, 7], lambda n: [torch.randn(2, n)], {0: 1}) == 1


def test_constant_pad_along_a_padded_dim():
    """F.pad growing the padded dim (Qwen3-Next pads its sequence to a
    chunk multiple): the pad values sit right after the real entries."""
    def fn(x):
        x = x + 1  # the padding is no longer zero
        return F.pad(x, (2, 3), value=-1.5), F.pad(x, (0, 0, 1, 2)).sum(-1)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph run at exact sizes warns
        assert run_sizes(fn, [5, 6, 7], lambda n: [torch.randn(2, n)], {0: 1}) == 1


def test_vector_norm_over_a_padded_dim():
    """linalg_vector_norm over the padded dim (Dbrx's and Inkling's
    q/k norms, F.normalize): the padding becomes 0, which no ord >= 0
    counts; a negative ord (0 would change its min) is refused."""
    def fn(x):
        x = x + 1  # the padding is no longer zero
        return (torch.linalg.vector_norm(x, dim=1), torch.linalg.vector_norm(x, ord=1, dim=(0, 1), keepdim=True),
                torch.linalg.vector_norm(x, ord=float("inf"), dim=1), torch.linalg.vector_norm(x.round(), ord=0),
                F.normalize(x, dim=1), torch.linalg.vector_norm(x, dim=0))

    with no_exact_size_warning():
        assert run_sizes(fn, [5, 6, 7], lambda n: [torch.randn(3, n)], {0: 1}) == 1

    def negative(x):
        return torch.linalg.vector_norm(x, ord=-1, dim=1)

    with pytest.warns(UserWarning, match="ord -1"):
        run_sizes(negative, [5, 6], lambda n: [torch.randn(3, n)], {0: 1})


def test_pointwise_polar_logsigmoid_and_eye():
    """polar (DeepSeek-V2's rotary frequencies), log_sigmoid_forward
    (Inkling's router) and eye with a symbolic size (XLNet's
    `-torch.eye(qlen)`) run padded."""
    def fn(x):
        n = x.shape[0]
        rot = torch.view_as_real(torch.polar(x.abs() + 1, x))
        return rot, F.logsigmoid(x), x[:, :1] - torch.eye(n, device=x.device), torch.eye(n, 3, device=x.device) * 2

    with no_exact_size_warning():
        assert run_sizes(fn, [5, 6, 7], lambda n: [torch.randn(n, 4)], {0: 0}) == 1


def test_expand_flip_and_unfold_along_a_padded_dim():
    """expand of a size-1 dim to the padded size (HRM's `z_L_init.expand_as`,
    XLM's position ids), flip (a real entry n - 1 - i, not padding, comes
    first) and unfold (the real windows are a prefix)."""
    def fn(x, init):
        x = x + 1  # the padding is no longer zero
        grid = x[:, None, :1].expand(-1, x.shape[0], 3)
        return (init.expand_as(x) * x, grid, x.flip(0), x.flip(0, 1), torch.cat([x, x, x]).unfold(0, 2, 2).sum(-1), x.unfold(0, 2, 1),
                x.unfold(1, 2, 1))

    init = torch.randn(1, 4)
    with no_exact_size_warning():
        assert run_sizes(fn, [5, 6, 7], lambda n: [torch.randn(n, 4), init], {0: 0}) == 1


def test_symbolic_pad_and_fill_values():
    """F.pad by a symbolic amount (GraniteMoeHybrid pads its sequence to a
    chunk multiple; the real pad is not the padded one, so the values are
    placed from the real size) and full/full_like filled with a length."""
    def fn(x, y):
        x = x + 1  # the padding is no longer zero
        n = x.shape[1]
        chunked = F.pad(x, (0, (4 - n % 4) % 4), value=-2.0)
        grown = F.pad(y, (0, n))  # a static dim grown by a symbolic pad
        return chunked, chunked.sum(1), grown, torch.full_like(x, n), torch.full((2,), n, device=x.device) * x[:, 0]

    make = lambda n: [torch.randn(2, n), torch.randn(2, 3)]  # noqa: E731
    with no_exact_size_warning():
        assert run_sizes(fn, [5, 6, 7], make, {0: 1}) == 1

    def left(x):
        n = x.shape[1]
        return F.pad(x, ((4 - n % 4) % 4, 0))

    with pytest.warns(UserWarning, match="symbolic left pad"):
        run_sizes(left, [5, 6], lambda n: [torch.randn(2, n)], {0: 1})


def test_copy_into_a_padded_input():
    """A graph that writes one of its inputs (Mamba-style conv state
    updated with copy_, kept in the graph by AOTAutograd): the caller's
    tensor gets the real entries, whatever its padded form was."""
    def fn(state, x):
        state.copy_(torch.cat([state[:, 1:], x], 1))
        return state.sum(1) * 2

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="tpu")
    before = bounded_compiles()
    with no_exact_size_warning(), torch.no_grad():
        for n in (5, 6, 7):
            state, x = torch.randn(n, 4), torch.randn(n, 1)
            big = torch.randn(10, 4).to("tpu")  # the state as a view of a larger tensor
            tstate = big[:n]
            rest = big[n:].cpu()
            tx = x.to("tpu")
            for t in (tstate, tx):
                torch._dynamo.mark_dynamic(t, 0, min=2, max=64)
            tstate.copy_(state.to("tpu"))
            got = compiled(tstate, tx)
            want = fn(state, x)
            assert_close(got.cpu(), want, **TOL)
            assert_close(tstate.cpu(), state, **TOL)
            assert_close(big[n:].cpu(), rest)  # nothing written past the real entries
    assert bounded_compiles() - before == 1


def test_histc_with_the_data_range_over_a_padded_dim():
    """histc(min=max=0) bins by the data's own range (HunYuan's MoE router):
    the padding must neither widen that range nor be counted."""
    def fn(x, ids):
        return torch.histc(x, bins=5), torch.histc(ids.float(), bins=4, min=0, max=0)

    torch.manual_seed(0)
    make = lambda n: [torch.randn(2, n) * 3 + 1, torch.randint(0, 6, (n,))]  # noqa: E731
    with no_exact_size_warning():
        assert run_sizes(fn, [5, 6, 7, 9], make, {0: 1, 1: 0}) == 2


def test_compiled_graph_growing_a_cat_returns_plain_tensors():
    """A compiled decode step at static sizes (dynamic=False) whose cat
    grows the previous call's result: its ops run in Fused Eager, and the
    automatic buckets made the result a BoundedTensor, which the next
    Dynamo frame traced into and crashed on (InternalTorchDynamoError,
    CpmAntForCausalLM). A graph's results are plain tensors."""
    torch._dynamo.reset()
    step = torch.compile(lambda c, x: (torch.cat([c, x], 1), x * 2), backend="tpu", dynamic=False)
    c, want = torch.zeros(1, 2, device="tpu"), torch.zeros(1, 2)
    with torch.no_grad():
        for i in range(4):
            x = torch.full((1, 1), float(i))
            c, _ = step(c, x.to("tpu"))
            want = torch.cat([want, x], 1)
            assert type(c) is torch.Tensor
    assert_close(c.cpu(), want)


def test_repeat_of_static_and_size_one_dims_runs_padded():
    """repeat tiling static dims, and size-1 dims repeated a symbolic number
    of times (a causal mask: `arange(n)[None, None].repeat(b, n, 1)`), runs
    padded; tiling the padded dim itself is refused."""
    def fn(x):
        n = x.shape[1]
        alen = torch.arange(n, device=x.device)
        mask = alen[None, None, :].repeat(2, n, 1) <= alen[None, :, None]
        return x.repeat(3, 1), x[:, None, :].repeat(1, 2, 1), (mask * x.sum()).sum(-1)

    torch.manual_seed(0)
    with no_exact_size_warning():
        assert run_sizes(fn, [5, 6, 7], lambda n: [torch.randn(2, n)], {0: 1}) == 1
    with pytest.warns(UserWarning, match="tiles the padded dim"):
        run_sizes(lambda x: x.repeat(1, 2) * 2, [5, 6], lambda n: [torch.randn(2, n)], {0: 1})


def _tail_past_last_window(x, c):
    """The entries past the last full window of c.shape[0], as DeepseekV4's
    compressor keeps them: (n + 1) mod w of them."""
    y = torch.cat([x, x[:, -1:]], 1)
    k = (y.shape[1] // c.shape[0]) * c.shape[0]
    return y[:, k:] * 2


def test_size_smaller_padded_than_real_runs_that_call_exact():
    """A size that is not monotone in its symbols, (n + 1) mod w here
    (DeepseekV4's compressor keeps the tokens past the last full window),
    can be smaller at the padded sizes than at the real ones. Run padded,
    the result had too few rows and narrowing it to the real ones raised.
    Where lowering the padded n cannot help (w = 6 pads to 8: the divisor
    itself differs, n = 7 pads to 8 and 9 mod 8 = 1 < 2 = 8 mod 6) the call
    runs at its exact sizes, with a warning naming the size."""
    torch._dynamo.reset()
    compiled = torch.compile(_tail_past_last_window, backend="tpu", dynamic=True)
    c = torch.zeros(6)
    with torch.no_grad(), pytest.warns(UserWarning, match="smaller padded than real"):
        for n in (5, 7, 6, 10):  # 5, 6 run padded (bucket 8: 9 mod 8 = 1 >= 0, 1), 7 and 10 exact
            x = torch.randn(3, n, 2)
            got, want = compiled(x.to("tpu"), c.to("tpu")), _tail_past_last_window(x, c)
            assert got.shape == want.shape
            assert_close(got.cpu(), want, **TOL)


def test_size_smaller_padded_than_real_lowers_the_padded_size():
    """(n + 1) mod 8 for n from 9 to 14 is 2..7, but at their bucket 16 it
    is 17 mod 8 = 1: each of these sizes ran at its exact sizes, one program
    per size (DeepseekV4's HCA compressor, w = 128, from n = 65 on). The
    padded n is lowered instead to the largest value with the same quotient
    (n + 1) // 8 = 1, 14: one program for the six sizes, CPU's results, no
    call at exact sizes (no warning)."""
    torch._dynamo.reset()
    compiled = torch.compile(_tail_past_last_window, backend="tpu", dynamic=True)
    c = torch.zeros(8)
    before = bounded_compiles()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # a call run at exact sizes warns
        for n in (9, 12, 14, 10, 11, 13):
            x = torch.randn(3, n, 2)
            got, want = compiled(x.to("tpu"), c.to("tpu")), _tail_past_last_window(x, c)
            assert got.shape == want.shape
            assert_close(got.cpu(), want, **TOL)
    assert bounded_compiles() - before == 1


@pytest.mark.parametrize("chunk", [4, 16])
def test_view_into_chunks_of_a_length_rounded_up(chunk):
    """Mamba 2's chunked scan (GraniteMoeHybrid, Bamba): the sequence is
    padded to a multiple of the chunk size, L = n + (-n mod k), then viewed
    as (L // k, L // (L // k)) chunks. L // (L // k) is k, which sympy
    cannot prove from the Mod form. Both chunk sizes (several chunks, one
    chunk) must run padded: one program for the bucket of 5, 6 and 7."""
    class Chunked(nn.Module):
        def __init__(self, chunk):
            super().__init__()
            self.chunk = chunk  # a module attribute, static as in the model

        def forward(self, x):
            k, n = self.chunk, x.shape[1]
            y = F.pad(x, (0, 0, 0, (k - n % k) % k))
            L = y.shape[1]
            c = y.view(x.shape[0], L // k, L // (L // k), 2, 2).cumsum(2)
            states = torch.einsum("bclhn,bclhp->bchpn", c, c)
            y = torch.einsum("bclhn,bchpn->bclhp", c, states)  # Mamba's state -> output per chunk
            return c.sum(2), c.view(x.shape[0], L, 4)[:, :n] * 2, y.reshape(x.shape[0], L, 4)[:, :n]

    fn = Chunked(chunk)
    compiled = torch.compile(fn, backend="tpu", dynamic=True)
    before = bounded_compiles()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph run at exact sizes warns
        for n in (5, 6, 7):
            x = torch.randn(1, n, 4)  # batch 1: einsum merges the batch dims around the chunk dim
            xt = x.to("tpu")
            for d in (0, 2):  # batch and width static, as a model's are
                torch._dynamo.mark_static(xt, d)
            got, want = compiled(xt), fn(x)
            for g, w in zip(got, want):
                assert g.shape == w.shape
                assert_close(g.cpu(), w, **TOL)
    assert bounded_compiles() - before == 1


def test_size_fixed_by_a_guard_is_a_constant_for_the_view_check():
    """Mamba 2's chunked scan at a prompt shorter than its chunk
    (GraniteMoeHybrid): Dynamo guards on there being one chunk, L // 256 ==
    1 for L the length rounded up to 256, and einsum then views a chunk dim
    of that size away, [4, 256, 16, 1, L // 256, 1] -> [4, 256, 16]. Only
    the guard makes the view valid; the view check takes such a size as
    the constant the guard fixes, and a size no guard fixes stays symbolic."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from torch_tpu.bounded_rules import _guarded_value, _rounded_up_as_multiples, sym_expr

    env = ShapeEnv()
    n = env.create_symintnode(env.create_symbol(4, ConstantSource("n")), hint=4)
    L = n + (256 - n % 256) % 256
    assert _guarded_value(sym_expr(L // 8), env) == sym_expr(L // 8)  # no guard fixes it
    assert L // 256 == 1  # Dynamo's guard, as tracing the model adds it
    assert _guarded_value(sym_expr(L // 256), env) == 1
    assert _rounded_up_as_multiples([sym_expr(L)], env) == [256]
    assert _guarded_value(sym_expr(n), env) == sym_expr(n)  # the length itself stays symbolic


def test_triangular_solve_per_padded_chunk():
    """Qwen3-Next's chunked delta rule solves one unit lower-triangular
    system per chunk; the chunk count is padded (a batch dim), the systems
    are static."""
    def fn(a, b):
        a = a.tril(-1) + torch.eye(4, device=a.device)
        return torch.linalg.solve_triangular(a, b, upper=False, unitriangular=True).sum(1)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph run at exact sizes warns
        assert run_sizes(fn, [5, 6, 7], lambda n: [torch.randn(2, n, 4, 4) * 0.3, torch.randn(2, n, 4, 3)],
                         {0: 1, 1: 1}) == 1


def test_size_a_guard_fixes_is_checked_at_the_padded_sizes():
    """A size that Dynamo's guards fix ((n + 3) // 8 == 1 for n from 5 to
    12) is a static dim for the rules; the guard holds at the real sizes,
    not always at the padded ones: n = 9 pads to 16, where it is 2. Such a
    call runs at its exact sizes, with a warning naming the size."""
    def fn(x):
        y = F.pad(x, (0, 3))
        k = y.shape[0] // 8
        if k == 1:
            return y[:k * 8].view(k, 8).sum(0) + y.sum()
        return y.sum() * 2

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="tpu", dynamic=True)
    with torch.no_grad(), pytest.warns(UserWarning, match="at the sizes it was traced for"):
        for n in (5, 6, 9):  # 5 and 6 run padded (bucket 8: 11 // 8 = 1), 9 exact
            x = torch.randn(n)
            got, want = compiled(x.to("tpu")), fn(x)
            assert got.shape == want.shape
            assert_close(got.cpu(), want, **TOL)


def test_padded_graph_runs_as_its_own_program_between_host_reads():
    """A step cut by host reads, as Xmod's (its language adapter reads a
    `nonzero` in every layer): the same padded attention graph runs once
    after a static graph and once after eager ops. Chained into the pending
    trace, each neighbourhood made its own program per bucket (9 here);
    run on its own, the bucket's one program serves both calls: the static
    graph's program plus one per bucket (4, 8, 16, 32, 64)."""
    def pre(x):
        return x * 2 + 1

    def attn(x, k):
        k = torch.cat([k, x], 1)
        w = (k @ x.transpose(1, 2)).softmax(1)
        return (w * k).sum(1, keepdim=True) / 4, k

    def run(device, compiled):
        torch.manual_seed(0)
        x0 = torch.randn(1, 1, 8).to(device)
        ks = [torch.randn(1, 4, 8).to(device) for _ in range(2)]
        p = torch.compile(pre, backend="tpu") if compiled else pre
        a = torch.compile(attn, backend="tpu", dynamic=True) if compiled else attn
        out = []
        for i in range(30):  # caches 4..33
            y, ks[0] = a(p(x0 + i), ks[0])  # after a static graph's replay
            out.append(y.sum().item())  # a host read between the "layers"
            y, ks[1] = a(x0 * (i + 1), ks[1])  # after eager ops
            out.append(y.sum().item())
        return out, ks

    with torch.no_grad(), torch_tpu.eager_mode("strict"):
        want, want_k = run("cpu", False)
        _C._begin_program_window()
        got, got_k = run("tpu", True)
        programs = _C._fusion_stats()["window_programs"]
    assert_close(torch.tensor(got), torch.tensor(want), **TOL)
    for g, w in zip(got_k, want_k):
        assert g.shape == w.shape == (1, 34, 8)
        assert_close(g.cpu(), w, **TOL)
    assert programs == 1 + 5, programs


@pytest.mark.parametrize("fn", [
    lambda x: (x + 1).tril(x.shape[1] - 4),
    lambda x: (x + 1).triu(x.shape[1] - 3).sum(1),
    lambda x: x * (x.shape[1] / 2) + 1,
], ids=["tril_diagonal", "triu_diagonal", "symfloat_operand"])
def test_size_used_as_a_value_is_never_its_padded_value(fn):
    """A size used as a value and not as a size (tril's diagonal, a float
    made from it) must be the real size: at the padded one these gave
    silently wrong results. Such graphs run at exact sizes."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="tpu", dynamic=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in (5, 6, 7):
            x = torch.randn(3, n)
            assert_close(compiled(x.to("tpu")).cpu(), fn(x), **TOL)


def test_fresh_input_filling_its_bucket_gets_the_buckets_layout():
    """A graph input made outside the graph (eager ops, a step that Dynamo
    left untraced: DeepseekV4's decode steps past its recompile limit) that
    fills its bucket exactly, size 16 of bucket 16 here, was taken as it
    is, contiguous, while every other size of the bucket is copied into
    storage with room for the graph's growth (pad_to): two layouts, two
    programs for the bucket. Every size of the bucket now has the room
    layout: one program for sizes 9..16."""
    def attn(x, k):
        k = torch.cat([k, x], 1)
        w = (k @ x.transpose(1, 2)).softmax(1)
        return (w * k).sum(1, keepdim=True), k

    torch._dynamo.reset()
    compiled = torch.compile(attn, backend="tpu", dynamic=True)
    torch.manual_seed(0)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph run at exact sizes warns
        before = bounded_compiles()
        for n in (9, 12, 16, 13, 16):
            x, k = torch.randn(1, 1, 8), torch.randn(1, n, 8)
            got, want = compiled(x.to("tpu"), k.to("tpu")), attn(x, k)
            for g, w in zip(got, want):
                assert g.shape == w.shape
                assert_close(g.cpu(), w, **TOL)
    assert bounded_compiles() - before == 1


def test_results_grown_by_another_symbol_keep_one_storage_size_per_bucket():
    """XLNet's decode step returns mems + the step's tokens (s0 + s1, both
    symbolic) and generate feeds it back with its last 2 rows cut: one row
    more per call. A program's key holds its inputs' storage sizes; the
    bucket's first call came in storage sized without the step's tokens
    (the last bucket's result), its later ones in this graph's results
    (with them): two programs per bucket. pad_to now reserves the symbolic
    growth too: one program per bucket of the mems (8, 16)."""
    torch.manual_seed(0)
    proj = nn.Linear(8, 8)  # its size makes the model dim static

    def step_of(proj):
        def step(mems, h):
            new = torch.cat([mems, h * 2], 0)
            return proj(new.sum(0) + h).tanh(), new
        return step

    step = step_of(proj)
    torch._dynamo.reset()
    compiled = torch.compile(step_of(copy.deepcopy(proj).to("tpu")), backend="tpu", dynamic=True)
    mems, h = torch.randn(5, 1, 8), torch.randn(3, 1, 8)
    got_mems = mems.to("tpu")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph run at exact sizes warns
        before = bounded_compiles()
        for _ in range(12):  # mems 5..16
            want, mems_next = step(mems, h)
            got, got_next = compiled(got_mems, h.to("tpu"))
            assert_close(got.cpu(), want, **TOL)
            assert_close(got_next.cpu(), mems_next, **TOL)
            mems, got_mems = mems_next[:-2], got_next[:-2]
    assert bounded_compiles() - before == 2
