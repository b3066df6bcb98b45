"""A Pallas kernel as a torch op inside a small transformer on tpu.

`rms_norm` below is a row-blocked Pallas RMSNorm kernel and `attention` a
causal softmax attention blocked over queries (interpret mode on XLA:CPU,
compiled by Mosaic unchanged on a real TPU), each with its backward written
in jax.numpy, registered with `torch_tpu.jax_op`. The transformer uses them
for every normalisation and attention; the same model with PyTorch's own
RMSNorm math and scaled_dot_product_attention is the reference. Run:

    python examples/pallas_transformer.py

It trains a few steps on tpu eagerly and under torch.compile and on CPU
with the reference model, from the same weights, and prints the losses.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu

EPS = 1e-6


def _pallas_rms_norm(x, w, eps):
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    d = x.shape[-1]
    rows = math.prod(x.shape[:-1])
    x2 = x.reshape(rows, d)
    block = 8 if rows % 8 == 0 else rows

    def kernel(x_ref, w_ref, o_ref):
        v = x_ref[...].astype(jnp.float32)
        inv = jax.lax.rsqrt(jnp.mean(v * v, axis=-1, keepdims=True) + eps)
        o_ref[...] = (v * inv * w_ref[...].astype(jnp.float32)).astype(o_ref.dtype)

    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x2.shape, x2.dtype),
        grid=(rows // block,),
        in_specs=[pl.BlockSpec((block, d), lambda i: (i, 0)), pl.BlockSpec((1, d), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((block, d), lambda i: (i, 0)),
        interpret=jax.default_backend() != "tpu",  # a real chip compiles the kernel with Mosaic
    )(x2, w.reshape(1, d))
    return out.reshape(x.shape)


def _rms_norm_backward(x, w, eps, g):
    """d/dx and d/dw of x * rsqrt(mean(x^2) + eps) * w, in jax.numpy."""
    import jax
    import jax.numpy as jnp

    v = x.astype(jnp.float32)
    g = g.astype(jnp.float32)
    inv = jax.lax.rsqrt(jnp.mean(v * v, axis=-1, keepdims=True) + eps)
    n = v * inv
    gn = g * w.astype(jnp.float32)
    dx = inv * (gn - n * jnp.mean(gn * n, axis=-1, keepdims=True))
    dw = jnp.sum((g * n).reshape(-1, x.shape[-1]), axis=0)
    return dx.astype(x.dtype), dw.astype(w.dtype)


rms_norm = torch_tpu.jax_op("pallas_rms_norm", _pallas_rms_norm, backward=_rms_norm_backward)


def _reference_attention(q, k, v):
    """Causal softmax attention in jax.numpy, [B, H, T, D]."""
    import jax
    import jax.numpy as jnp

    t = q.shape[2]
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -jnp.inf)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)


def _pallas_attention(q, k, v):
    """Causal attention blocked over queries: one kernel instance per
    (batch*head, block of 8 queries) against all keys."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    b, h, t, d = q.shape
    bq = 8 if t % 8 == 0 else t
    scale = 1.0 / math.sqrt(d)
    q3, k3, v3 = (z.reshape(b * h, t, d) for z in (q, k, v))

    def kernel(q_ref, k_ref, v_ref, o_ref):
        qb = q_ref[0].astype(jnp.float32)
        s = jnp.dot(qb, k_ref[0].astype(jnp.float32).T) * scale
        rows = pl.program_id(1) * bq + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
        cols = jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
        s = jnp.where(cols <= rows, s, -jnp.inf)
        p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
        p = p / jnp.sum(p, axis=-1, keepdims=True)
        o_ref[0] = jnp.dot(p, v_ref[0].astype(jnp.float32)).astype(o_ref.dtype)

    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(q3.shape, q3.dtype),
        grid=(b * h, t // bq),
        in_specs=[pl.BlockSpec((1, bq, d), lambda i, j: (i, j, 0)),
                  pl.BlockSpec((1, t, d), lambda i, j: (i, 0, 0)),
                  pl.BlockSpec((1, t, d), lambda i, j: (i, 0, 0))],
        out_specs=pl.BlockSpec((1, bq, d), lambda i, j: (i, j, 0)),
        interpret=jax.default_backend() != "tpu",
    )(q3, k3, v3)
    return out.reshape(b, h, t, d)


def _attention_backward(q, k, v, g):
    # Pallas kernels have no reverse-mode rule: the backward is jax.vjp of
    # the same math in jax.numpy.
    import jax

    return jax.vjp(_reference_attention, q, k, v)[1](g)


attention = torch_tpu.jax_op("pallas_causal_attention", _pallas_attention, backward=_attention_backward)


def torch_rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


class RMSNorm(nn.Module):
    def __init__(self, d, use_pallas):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.use_pallas = use_pallas

    def forward(self, x):
        if self.use_pallas:
            return rms_norm(x, self.weight, EPS)
        return torch_rms_norm(x, self.weight, EPS)


class Block(nn.Module):
    def __init__(self, d, heads, use_pallas):
        super().__init__()
        self.heads = heads
        self.use_pallas = use_pallas
        self.n1 = RMSNorm(d, use_pallas)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.n2 = RMSNorm(d, use_pallas)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.use_pallas:
            a = attention(q.contiguous(), k.contiguous(), v.contiguous())
        else:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.n2(x))))


class TinyLM(nn.Module):
    def __init__(self, vocab=64, d=32, heads=4, layers=2, use_pallas=True):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads, use_pallas) for _ in range(layers))
        self.norm = RMSNorm(d, use_pallas)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.emb(idx)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


def make_models(seed=0, **kw):
    """(pallas model, reference model) with the same weights."""
    torch.manual_seed(seed)
    m = TinyLM(use_pallas=True, **kw)
    ref = TinyLM(use_pallas=False, **kw)
    ref.load_state_dict(m.state_dict())
    return m, ref


def loss_fn(model, idx, tgt):
    logits = model(idx)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))


def train(model, device, data, steps, compile=False):
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = functools.partial(loss_fn, model)
    if compile:
        step = torch.compile(step, backend="tpu")
    losses = []
    for idx, tgt in data[:steps]:
        loss = step(idx.to(device), tgt.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main():
    torch.manual_seed(1)
    data = [(torch.randint(0, 64, (2, 16)), torch.randint(0, 64, (2, 16))) for _ in range(5)]
    for compiled in (False, True):
        m, ref = make_models()
        tpu = train(m, "tpu", data, 5, compile=compiled)
        cpu = train(ref, "cpu", data, 5)
        print(("compiled" if compiled else "eager   "), "tpu (Pallas kernels):", [f"{v:.5f}" for v in tpu])
        print("         cpu (PyTorch ops):    ", [f"{v:.5f}" for v in cpu])


if __name__ == "__main__":
    main()
