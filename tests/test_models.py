"""Small models trained on tpu and on CPU from the same weights: the losses
must track step for step."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, d_in=16, d_hidden=32, n_classes=4):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.out = nn.Linear(d_hidden, n_classes)

    def forward(self, x):
        return self.out(F.gelu(self.fc2(F.relu(self.fc1(x)))))


class TinyTransformer(nn.Module):
    """A pre-norm causal transformer block stack, written out so that every
    op it uses is visible (no fused CPU-only kernels)."""

    def __init__(self, vocab=32, d=32, heads=4, layers=2, seq=8):
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(nn.ModuleDict(dict(
                ln1=nn.LayerNorm(d), qkv=nn.Linear(d, 3 * d), proj=nn.Linear(d, d),
                ln2=nn.LayerNorm(d), fc=nn.Linear(d, 4 * d), fc2=nn.Linear(4 * d, d),
            )))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        b, t = idx.shape
        x = self.tok(idx) + self.pos[:t]
        mask = torch.triu(torch.ones(t, t, device=idx.device, dtype=torch.bool), diagonal=1)
        for blk in self.blocks:
            h = blk["ln1"](x)
            q, k, v = blk["qkv"](h).split(x.shape[-1], dim=-1)
            q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / (q.shape[-1] ** 0.5)
            att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, -1)
            x = x + blk["proj"](y)
            x = x + blk["fc2"](F.gelu(blk["fc"](blk["ln2"](x))))
        return self.head(self.ln(x))


def train(model, batches, device, steps, lr=0.05):
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    losses = []
    for i in range(steps):
        x, y = (t.to(device) for t in batches[i % len(batches)])
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


def _compare(model, batches, steps=20):
    ref = copy.deepcopy(model)
    cpu_losses, cpu_model = train(ref, batches, "cpu", steps)
    tpu_losses, tpu_model = train(model, batches, "tpu", steps)
    assert cpu_losses[-1] < cpu_losses[0]  # it does learn
    torch.testing.assert_close(torch.tensor(tpu_losses), torch.tensor(cpu_losses), atol=2e-4, rtol=2e-4)
    for (n, p_cpu), (_, p_tpu) in zip(cpu_model.named_parameters(), tpu_model.named_parameters()):
        torch.testing.assert_close(p_tpu.detach().cpu(), p_cpu.detach(), atol=1e-4, rtol=1e-4, msg=n)


def test_mlp_trains_like_cpu():
    torch.manual_seed(0)
    x = torch.randn(64, 16)
    y = (x[:, :4].argmax(dim=1))
    batches = [(x[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)]
    _compare(MLP(), batches)


def test_transformer_trains_like_cpu():
    torch.manual_seed(0)
    data = torch.randint(0, 32, (8, 9))
    batches = [(data[i:i + 4, :-1], data[i:i + 4, 1:]) for i in range(0, 8, 4)]
    _compare(TinyTransformer(), batches)
