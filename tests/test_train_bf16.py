"""Mixed-precision training on tpu tracks CPU: a small CNN and a small
transformer, 50 steps each of AdamW under torch.autocast(bfloat16) with
clip_grad_norm_, from the same initial weights and batches on both devices.

Tolerance (stated): every step's loss on tpu is within
LOSS_ATOL + LOSS_RTOL * |cpu loss| of CPU's (0.01 + 2%), and every step's
gradient norm (before clipping) within NORM_RTOL (5%) + 1e-3. bfloat16 keeps
8 bits of mantissa and the two autocast implementations do not cast exactly
the same ops (tpu uses CUDA's op lists, CPU its own), so the runs drift
apart by rounding. Measured on XLA:CPU: largest loss difference 0.4% (CNN)
and 0.08% (transformer) relative, gradient norms 0.4% and 0.2%.
Both runs must also learn (final loss well below the first), so a backend
that trains nothing cannot pass by matching a flat curve."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS = 50
LOSS_ATOL, LOSS_RTOL = 0.01, 0.02
NORM_RTOL = 0.05


class SmallCNN(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
        )
        self.head = nn.Linear(32 * 4, classes)

    def forward(self, x):
        return self.head(self.features(x))


class SmallTransformer(nn.Module):
    def __init__(self, vocab=32, d=32, classes=8, seq=12):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
        self.block = nn.TransformerEncoderLayer(d, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, tokens):
        h = self.block(self.embed(tokens) + self.pos)
        return self.head(self.norm(h).mean(dim=1))


def cnn_batches(n, batch=16):
    """Images whose class is the quadrant with the brightest red patch."""
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(n):
        x = torch.randn(batch, 3, 16, 16, generator=g) * 0.5
        y = torch.randint(0, 4, (batch,), generator=g)
        for i, c in enumerate(y.tolist()):
            r, col = divmod(c, 2)
            x[i, 0, r * 8:(r + 1) * 8, col * 8:(col + 1) * 8] += 1.5
        out.append((x, y))
    return out


def transformer_batches(n, batch=16, seq=12):
    """Token sequences labelled by their most frequent bucket (token // 4)."""
    g = torch.Generator().manual_seed(1)
    out = []
    for _ in range(n):
        tok = torch.randint(0, 32, (batch, seq), generator=g)
        counts = F.one_hot(tok // 4, 8).sum(dim=1)
        out.append((tok, counts.argmax(dim=1)))
    return out


def train(model, batches, device):
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    losses, norms = [], []
    for x, y in batches:
        x, y = x.to(device), y.to(device)
        with torch.autocast(device, dtype=torch.bfloat16):
            logits = model(x)
            assert logits.dtype == torch.bfloat16  # the linear head ran in bf16
            loss = F.cross_entropy(logits.float(), y)
        opt.zero_grad()
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)))
        opt.step()
        losses.append(loss.item())
    return losses, norms, model


def check_tracks(make_model, batches):
    torch.manual_seed(0)
    init = make_model()
    state = {k: v.clone() for k, v in init.state_dict().items()}
    cpu_model, tpu_model = make_model(), make_model()
    cpu_model.load_state_dict(state)
    tpu_model.load_state_dict(state)
    cpu_losses, cpu_norms, _ = train(cpu_model, batches, "cpu")
    tpu_losses, tpu_norms, trained = train(tpu_model, batches, "tpu")
    assert all(p.device.type == "tpu" and p.dtype == torch.float32 for p in trained.parameters())
    for step, (t, c) in enumerate(zip(tpu_losses, cpu_losses)):
        bound = LOSS_ATOL + LOSS_RTOL * abs(c)
        assert abs(t - c) <= bound, f"step {step}: tpu loss {t:.4f} vs cpu {c:.4f} (bound {bound:.4f})"
    # gradient norms (before clipping) agree the same way
    for step, (t, c) in enumerate(zip(tpu_norms, cpu_norms)):
        assert abs(t - c) <= 1e-3 + NORM_RTOL * abs(c), f"step {step}: grad norm {t} vs {c}"
    # the first step sees identical weights: only bf16 rounding separates them
    assert abs(tpu_losses[0] - cpu_losses[0]) <= 0.02 * abs(cpu_losses[0])
    for losses in (cpu_losses, tpu_losses):
        first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
        assert last < 0.85 * first, f"did not learn: {first:.3f} -> {last:.3f}"


def test_cnn_bf16_autocast_tracks_cpu():
    check_tracks(SmallCNN, cnn_batches(STEPS))


def test_transformer_bf16_autocast_tracks_cpu():
    check_tracks(SmallTransformer, transformer_batches(STEPS))
