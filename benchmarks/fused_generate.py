"""Cold greedy `generate` in Strict and Fused Eager (issue 14, item 4).

A tiny random-weight Llama-like and GPT-2-like causal LM (configs built here,
nothing downloaded), greedy generation of --tokens new tokens with the
default (dynamic) cache and with the static cache (`disable_compile=True`,
so the eager modes run it). Each (model, cache, mode) runs in a fresh process
on a fresh temporary compilation cache (TORCH_TPU_CACHE_DIR), so every
figure is a cold start: the wall time of the first generate, XLA compiles,
fused programs compiled (`torch_tpu.compile_stats()`), the recompile reasons
of the fused programs (the first few) and whether the tokens equal CPU's.
`warm` is the fastest of three more generates in the same process (the
machine is shared: the minimum is the least disturbed). No assertions on
time; exits 1 if tokens differ.

Modes: strict, fused (Fused Eager as it starts: automatic buckets for a
cat-grown dim, traces split around the ops that still change), fusedsplit
(TPU_FUSE_BUCKET=0: splitting only), fused0 (TPU_FUSE_BUCKET=0 and
TPU_FUSE_SPLIT=0: every changed trace compiles whole, as before both).

Usage: python benchmarks/fused_generate.py [--tokens 64] [--models llama,gpt2]
       [--caches dynamic,static] [--modes strict,fused,fusedsplit,fused0] [--reasons 6] [--json PATH]

--json PATH writes every row (model, cache, mode and the worker's figures,
with `vs_strict`: cold / Strict's cold in the same run) for
benchmarks/issue14.py.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile


def worker(a):
    import time

    import torch

    import torch_tpu
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    if a.model == "llama":
        cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                          pad_token_id=0, bos_token_id=1, eos_token_id=2)
        model = LlamaForCausalLM(cfg)
    else:
        cfg = GPT2Config(vocab_size=256, n_embd=64, n_layer=2, n_head=4, n_positions=256,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2)
        model = GPT2LMHeadModel(cfg)
    model.eval()
    ids = torch.randint(3, 256, (1, 8), generator=torch.Generator().manual_seed(1))
    kw = dict(do_sample=False, max_new_tokens=a.tokens, min_new_tokens=a.tokens)
    if a.cache == "static":
        kw.update(cache_implementation="static", disable_compile=True)

    def generate(dev):
        with torch.no_grad():
            return model.generate(ids.to(dev), attention_mask=torch.ones_like(ids).to(dev), **kw).cpu()

    expected = generate("cpu")
    model.to("tpu")
    torch_tpu._C._compile_count()
    before = torch_tpu.compile_stats()
    start = time.perf_counter()
    out = generate("tpu")
    cold = time.perf_counter() - start
    after = torch_tpu.compile_stats()
    warm, same = float("inf"), True
    for _ in range(3):
        start = time.perf_counter()
        same &= torch.equal(generate("tpu"), expected)
        warm = min(warm, time.perf_counter() - start)
    again = torch_tpu.compile_stats()
    reasons = [e["reason"] for e in torch_tpu.recompile_log() if e["kind"] == "fused"][2: 2 + a.reasons]
    print(json.dumps(dict(split=torch_tpu.fusion_stats().get("split_traces", 0), cold=cold, warm=warm,
                          same=bool(torch.equal(out, expected)) and same,
                          xla=after["xla_compiles"] - before["xla_compiles"],
                          fused=after["fused_compiles"] - before["fused_compiles"],
                          fused_again=again["fused_compiles"] - after["fused_compiles"],
                          bounded=after.get("bounded_compiles", 0) - before.get("bounded_compiles", 0),
                          reasons=reasons)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--models", default="llama,gpt2")
    ap.add_argument("--caches", default="dynamic,static")
    ap.add_argument("--modes", default="strict,fused,fusedsplit")
    ap.add_argument("--reasons", type=int, default=6)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--json", help="write the rows here (benchmarks/issue14.py reads them)")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--model")
    ap.add_argument("--cache")
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    ok = True
    rows = []
    print(f"cold greedy generate, {a.tokens} new tokens, prompt 8 (fresh process, empty compile cache)")
    print(f"{'model':6s} {'cache':8s} {'mode':10s} {'cold s':>8s} {'warm s':>7s} {'XLA':>5s} {'fused':>6s} "
          f"{'fused 2nd':>9s} {'split':>5s}  tokens")
    for model in a.models.split(","):
        for cache in a.caches.split(","):
            strict_cold = None
            for mode in a.modes.split(","):
                env = dict(os.environ, TORCH_TPU_CACHE_DIR=tempfile.mkdtemp(prefix="fused_generate_"))
                env.pop("TPU_DEFER_AND_FUSE", None)
                if mode.startswith("fused"):
                    env["TPU_DEFER_AND_FUSE"] = "1"
                env.pop("TPU_FUSE_BUCKET", None)
                env.pop("TPU_FUSE_SPLIT", None)
                if mode in ("fusedsplit", "fused0"):  # no automatic buckets (auto_bucket.py)
                    env["TPU_FUSE_BUCKET"] = "0"
                if mode == "fused0":  # as before splitting too
                    env["TPU_FUSE_SPLIT"] = "0"
                cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--model", model, "--cache", cache,
                       "--tokens", str(a.tokens), "--reasons", str(a.reasons)]
                try:
                    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
                    line = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
                    if not line:
                        print(f"{model:6s} {cache:8s} {mode:6s} FAILED\n{p.stderr[-2000:]}")
                        ok = False
                        continue
                    r = json.loads(line[-1])
                except subprocess.TimeoutExpired:
                    print(f"{model:6s} {cache:8s} {mode:6s} timed out after {a.timeout} s")
                    ok = False
                    continue
                ok &= r["same"]
                ratio = ""
                if mode == "strict":
                    strict_cold = r["cold"]
                elif strict_cold:
                    ratio = f"  ({r['cold'] / strict_cold:.2f}x Strict cold)"
                    r["vs_strict"] = r["cold"] / strict_cold
                rows.append(dict(r, model=model, cache=cache, mode=mode, tokens=a.tokens))
                print(f"{model:6s} {cache:8s} {mode:10s} {r['cold']:8.2f} {r['warm']:7.2f} {r['xla']:5d} "
                      f"{r['fused']:6d} {r['fused_again']:9d} {r['split']:5d}  {'= CPU' if r['same'] else 'DIFFERENT'}{ratio}",
                      flush=True)
                for reason in r["reasons"]:
                    print(f"    fused recompile: {reason[:200]}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(rows=rows, load=os.getloadavg()[0]), f)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
