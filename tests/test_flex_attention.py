"""torch.nn.attention.flex_attention on tpu (torch_tpu/flex_attention.py).

Forward against CPU's own flex_attention (CPU has no flex backward), and
forward plus gradients against the same attention written out densely in
float64 on CPU: score_mod, block masks made by create_block_mask on tpu,
captured buffers that take a gradient, GQA, the log-sum-exp, autocast;
eager and under torch.compile(backend="tpu").
"""

from __future__ import annotations

import warnings

import pytest
import torch

import torch_tpu  # noqa: F401

from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention  # noqa: E402

from utils import assert_close  # noqa: E402

B, H, L, S, E = 2, 2, 32, 48, 8

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")


@pytest.fixture(params=["eager", "compiled"])
def flex(request, fresh_dynamo):
    if request.param == "eager":
        return flex_attention
    return torch.compile(flex_attention, backend="tpu")


def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _dense(q, k, v, bias=None, mask=None, scale=None):
    """Attention written out: softmax(q k^T * scale + bias, masked) v, and the row log-sum-exp."""
    s = q @ k.transpose(-1, -2) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if bias is not None:
        s = s + bias
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return s.softmax(-1) @ v, torch.logsumexp(s, -1)


def _leaves(*tensors):
    """float32 tpu copies that take gradients, and float64 CPU ones."""
    return ([t.float().to("tpu").requires_grad_() for t in tensors],
            [t.clone().requires_grad_() for t in tensors])


def _check_grads(tpu, cpu, atol=1e-4):
    for a, b in zip(tpu, cpu):
        assert_close(a.grad.cpu().double(), b.grad, atol=atol, rtol=1e-4)


def test_forward_matches_cpu_flex(flex):
    """Same score_mod (a tanh soft cap) and causal block mask as CPU's own flex_attention."""
    def soft_cap(score, b, h, i, j):
        return 5.0 * torch.tanh(score / 5.0)

    def causal(b, h, i, j):
        return i >= j

    q, k, v = (_rand(B, H, L, E, seed=s).float() for s in range(3))
    with torch.no_grad():
        expected = flex_attention(q, k, v, score_mod=soft_cap, block_mask=create_block_mask(causal, B, 1, L, L, device="cpu"))
    got = flex(q.to("tpu"), k.to("tpu"), v.to("tpu"), score_mod=soft_cap,
               block_mask=create_block_mask(causal, B, 1, L, L, device="tpu"))
    assert got.device.type == "tpu"
    assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-5)


def test_document_mask_gradients(flex):
    """A mask_mod reading a tpu tensor (document ids), small blocks so some are empty, and the backward."""
    doc = torch.tensor([0] * 10 + [1] * 15 + [2] * 7)
    doc_tpu = doc.to("tpu")

    def same_doc_causal(b, h, i, j):
        return (doc_tpu[i] == doc_tpu[j]) & (i >= j)

    block_mask = create_block_mask(same_doc_causal, None, None, L, L, device="tpu", BLOCK_SIZE=8)
    (qt, kt, vt), (qc, kc, vc) = _leaves(*(_rand(B, H, L, E, seed=s) for s in range(3)))
    out = flex(qt, kt, vt, block_mask=block_mask)
    (out * out).sum().backward()
    i = torch.arange(L)
    mask = (doc[:, None] == doc[None, :]) & (i[:, None] >= i[None, :])
    ref, _ = _dense(qc, kc, vc, mask=mask)
    (ref * ref).sum().backward()
    assert_close(out.detach().cpu().double(), ref.detach(), atol=2e-5, rtol=1e-5)
    _check_grads((qt, kt, vt), (qc, kc, vc))


def test_captured_bias_takes_gradient(flex):
    """A score_mod adding a learned [H, L, S] bias: the bias gets its gradient, as on CUDA."""
    (qt, kt, vt, bt), (qc, kc, vc, bc) = _leaves(_rand(B, H, L, E, seed=0), _rand(B, H, S, E, seed=1),
                                                 _rand(B, H, S, E, seed=2), 0.5 * _rand(H, L, S, seed=3))

    def add_bias(score, b, h, i, j):
        return score + bt[h, i, j]

    out = flex(qt, kt, vt, score_mod=add_bias)
    (out * out).sum().backward()
    ref, _ = _dense(qc, kc, vc, bias=bc)
    (ref * ref).sum().backward()
    assert_close(out.detach().cpu().double(), ref.detach(), atol=2e-5, rtol=1e-5)
    _check_grads((qt, kt, vt, bt), (qc, kc, vc, bc))


def test_gqa_lse_and_max_scores(flex):
    q, k, v = _rand(B, 4, L, E, seed=0), _rand(B, 2, S, E, seed=1), _rand(B, 2, S, E, seed=2)
    out, aux = flex(q.float().to("tpu"), k.float().to("tpu"), v.float().to("tpu"), enable_gqa=True, scale=0.25,
                    return_aux=AuxRequest(lse=True, max_scores=True))
    kk, vv = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
    ref, lse = _dense(q, kk, vv, scale=0.25)
    assert_close(out.cpu().double(), ref, atol=2e-5, rtol=1e-5)
    assert_close(aux.lse.cpu().double(), lse, atol=2e-5, rtol=1e-5)
    assert_close(aux.max_scores.cpu().double(), (q @ kk.transpose(-1, -2) * 0.25).amax(-1), atol=2e-5, rtol=1e-5)


def test_autocast_bf16(flex):
    """torch.autocast("tpu") runs it in bfloat16, as autocast does on CUDA."""
    (qt, kt, vt), (qc, kc, vc) = _leaves(*(_rand(B, H, L, E, seed=s) for s in range(3)))
    with torch.autocast("tpu", dtype=torch.bfloat16):
        out = flex(qt, kt, vt)
    assert out.dtype == torch.bfloat16
    out.float().sum().backward()
    ref, _ = _dense(qc, kc, vc)
    ref.sum().backward()
    assert_close(out.detach().cpu().double(), ref.detach(), atol=3e-2, rtol=3e-2)
    _check_grads((qt, kt, vt), (qc, kc, vc), atol=5e-2)


class _Attention(torch.nn.Module):
    def __init__(self, flex_impl=True):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)
        self.out = torch.nn.Linear(16, 16)
        self.flex_impl = flex_impl

    def forward(self, x, block_mask=None):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, 2, 8).permute(2, 0, 3, 1, 4)
        if self.flex_impl:
            y = flex_attention(q, k, v, block_mask=block_mask)
        else:
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, n, 16))


@pytest.mark.parametrize("compiled", [False, True])
def test_module_training(compiled, fresh_dynamo):
    """A causal attention block using flex_attention trains on tpu (eager or
    compiled as a whole module) as the same block with SDPA trains on CPU."""
    torch.manual_seed(0)
    cpu = _Attention(flex_impl=False)
    tpu = _Attention().to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    run = torch.compile(tpu, backend="tpu") if compiled else tpu
    block_mask = create_block_mask(lambda b, h, i, j: i >= j, None, None, L, L, device="tpu")
    opt_cpu = torch.optim.SGD(cpu.parameters(), lr=0.1)
    opt_tpu = torch.optim.SGD(tpu.parameters(), lr=0.1)
    x = _rand(2, L, 16, seed=4).float()
    for _ in range(3):
        for model, opt, out in ((cpu, opt_cpu, lambda: cpu(x)), (tpu, opt_tpu, lambda: run(x.to("tpu"), block_mask))):
            opt.zero_grad()
            loss = out().square().mean()
            loss.backward()
            opt.step()
    for (name, a), b in zip(tpu.state_dict().items(), cpu.state_dict().values()):
        assert_close(a.cpu(), b, atol=1e-5, rtol=1e-5, msg=name)


def test_default_backend_for_graph_without_tpu_inputs(fresh_dynamo):
    """torch.compile with no backend picks "tpu" for a graph that takes no
    tensor but makes tpu tensors (Transformers compiles create_block_mask so),
    not Inductor, which cannot compile for tpu."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        block_mask = create_block_mask(lambda b, h, i, j: i >= j, 1, 1, L, L, device="tpu", _compile=True)
    expected = create_block_mask(lambda b, h, i, j: i >= j, 1, 1, L, L, device="cpu")
    assert block_mask.kv_num_blocks.device.type == "tpu"
    assert torch.equal(block_mask.to_dense().cpu(), expected.to_dense())


def test_other_devices_keep_torch_check():
    """Only tpu is let through: CPU's refusal of a flex backward stays torch's."""
    q = torch.randn(1, 1, 8, 8, requires_grad=True)
    with pytest.raises(NotImplementedError, match="backward on CPU"):
        flex_attention(q, q, q)
