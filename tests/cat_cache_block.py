"""A transformer block whose attention appends this step's keys and values
to a cache with torch.cat (as Transformers' DynamicCache does): the shape
that grows by one each decode step, shared by the bounded-dynamism tests."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, k_cache, v_cache):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        k = torch.cat([k_cache, k], dim=2)  # grows by one each step
        v = torch.cat([v_cache, v], dim=2)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)))), k, v
