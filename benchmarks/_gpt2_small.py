"""A GPT-2-small-shaped decoder shared by every process of benchmarks/compile.py.

GPT-2 small's widths (d_model 768, 12 heads, MLP 4x with GELU, vocabulary
50257, 1024 positions, pre-LayerNorm blocks, final LayerNorm, language-model
head tied to the token embedding) with fewer blocks (`layers`) so a training
step fits a 2-core machine. No dropout, so every configuration computes the
same function and the losses can be compared.

Weights are created on the CPU from a seed and then moved, and the data comes
from its own CPU generator, so each process (tpu, torchax, inductor) starts
from bit-identical weights and batches.

Attention is either `F.scaled_dot_product_attention(is_causal=True)`
("sdpa") or an explicit masked softmax ("mask"); compile.py's `--attn` picks.

`SHAPES` names the widths compile.py's `--model` picks: "gpt2" (the above)
and "small", the small GPT every tutorial trains (d_model 128, 4 heads, a
65-symbol character vocabulary, 256 positions; 4 blocks by default), where
per-call overhead rather than the matmuls decides the step time.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 50257
N_POSITIONS = 1024
D_MODEL = 768
N_HEADS = 12

# name -> (d_model, heads, vocabulary, positions, default layers, default batch)
SHAPES = {
    "gpt2": (D_MODEL, N_HEADS, VOCAB, N_POSITIONS, 2, 4),
    "small": (128, 4, 65, 256, 4, 8),
}


class Block(nn.Module):
    def __init__(self, d, heads, attn):
        super().__init__()
        self.heads = heads
        self.attn = attn
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def _attention(self, q, k, v):
        if self.attn == "sdpa":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        t = q.shape[-2]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
        causal = torch.ones(t, t, device=q.device, dtype=torch.bool).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        return att @ v

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = self._attention(q, k, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.c_proj(y)
        # GPT-2's GELU is the tanh approximation.
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, layers=2, attn="sdpa", vocab=VOCAB, n_positions=N_POSITIONS, d=D_MODEL, heads=N_HEADS):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(n_positions, d)
        self.h = nn.ModuleList(Block(d, heads, attn) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as in GPT-2
        self._init_weights(layers)

    def _init_weights(self, layers):
        # GPT-2's scheme: N(0, 0.02), residual projections scaled by 1/sqrt(2 * layers).
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif ".ln_" in name or name.startswith("ln_"):
                nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def build(layers, attn, seed=0, shape="gpt2"):
    """The model with weights drawn on the CPU from `seed` (same in every process)."""
    d, heads, vocab, positions = SHAPES[shape][:4]
    torch.manual_seed(seed)
    return GPT2(layers=layers, attn=attn, vocab=vocab, n_positions=positions, d=d, heads=heads)


def to_device(model, device):
    """`model.to(device)` keeping the head tied. Moving CPU parameters to a
    device whose tensors are not shallow-copy compatible with CPU ones
    (torchax's jax; tpu and CUDA are) replaces each module's Parameter
    separately, which silently unties wte and lm_head; tie them again."""
    model = model.to(device)
    model.lm_head.weight = model.wte.weight
    return model


def batch(batch_size, seq, seed=1234, shape="gpt2"):
    """(input ids, next-token targets), int64 on the CPU, from their own generator."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, SHAPES[shape][2], (batch_size, seq + 1), generator=g)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def param_count(model):
    return sum(p.numel() for p in model.parameters())
