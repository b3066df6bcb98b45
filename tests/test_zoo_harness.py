"""The zoo harness's (c) baseline (tools/zoo.py): Dynamo's own graph count
for a generate on CPU, the programs those graphs need bucketed, and Dynamo
giving up on a frame. CPU only."""

import logging
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))

import zoo  # noqa: E402


class _Generates(torch.nn.Module):
    """generate() calls forward with a sequence one longer each step, as a
    cacheless causal LM does; `per_token` makes forward specialise on the
    length (a Python list of it), as CpmAnt's attention mask does."""

    def __init__(self, per_token):
        super().__init__()
        self.per_token = per_token
        self.w = torch.nn.Parameter(torch.randn(4, 4))

    def forward(self, ids, attention_mask=None):
        x = ids.float().unsqueeze(-1) * self.w[0]
        if self.per_token:
            x = x + torch.tensor(list(range(ids.shape[1]))).float().unsqueeze(-1)
        return x @ self.w

    def generate(self, ids, attention_mask=None, max_new_tokens=0, **kw):
        for _ in range(max_new_tokens):
            nxt = self.forward(ids)[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, nxt], 1)
        return ids


class _SplitByGuard(_Generates):
    """A Python branch on the length's divisibility: two graphs, each over
    the buckets its lengths reach (XLNet's rel_shift reshape guards so)."""

    def forward(self, ids, attention_mask=None):
        x = ids.float().unsqueeze(-1) * self.w[0]
        if ids.shape[1] % 3 == 0:
            x = x * 2
        return x @ self.w


def test_dynamo_graph_count_on_cpu_is_the_models_own(monkeypatch):
    monkeypatch.setattr(zoo, "GEN_TOKENS", 12)
    ids = torch.ones(1, 4, dtype=torch.long)
    kw = dict(max_new_tokens=12)
    plain = _Generates(per_token=False)
    before = plain.forward
    # one graph (dynamic=True), over the lengths 4..15: buckets 4, 8, 16
    assert zoo._dynamo_graphs_on_cpu(plain, ids, kw) == {"graphs": 1, "bucketed": 3}
    # one graph per length, the recompile limit raised so that all count
    assert zoo._dynamo_graphs_on_cpu(_Generates(per_token=True), ids, kw) == {"graphs": 12, "bucketed": 12}
    # 6, 9, 12, 15 (buckets 8, 16) and the rest (4, 8, 16)
    assert zoo._dynamo_graphs_on_cpu(_SplitByGuard(per_token=False), ids, kw) == {"graphs": 2, "bucketed": 5}
    assert plain.forward == before  # the model's own forward again


def test_recompile_limit_is_seen():
    torch._dynamo.reset()
    limits = zoo._RecompileLimitLog()
    try:
        f = torch.compile(lambda x, n: x * n, backend="eager", dynamic=False)
        with torch._dynamo.config.patch(recompile_limit=2, automatic_dynamic_shapes=False):
            for n in range(5):
                f(torch.ones(n + 1), n)
    finally:
        seen = limits.stop()
        torch._dynamo.reset()
    assert seen and "recompile_limit" in seen[0]
    assert limits.handler not in logging.getLogger("torch._dynamo.convert_frame").handlers
