"""Transformers `generate` on tpu against CPU (issue 16, item 2).

A random-weight Llama built from a config and saved with `save_pretrained`
(nothing downloaded), loaded on CPU and with `device_map="tpu"`. Checks that
greedy (dynamic and static cache), beam search and the compiled static-cache
decode give CPU's tokens and that seeded sampling repeats itself, then times
greedy decoding: CPU, tpu eager (static cache, `disable_compile=True`), tpu
eager with the default dynamic cache, and tpu compiled (`cache_implementation
="static"`: Transformers compiles the decode step itself with backend "tpu",
modeling_utils._default_compile_config). Reports tokens/s (best of --rounds
warm runs) and how many graphs the compiled decode built. No assertions on
time; exits 1 if tokens differ.

Usage: python benchmarks/hf_generate.py [--hidden 256] [--layers 4] [--tokens 32] [--rounds 3]
"""

import argparse
import tempfile
import time

import torch

import torch_tpu
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=2 * a.hidden,
                         num_hidden_layers=a.layers, num_attention_heads=max(1, a.hidden // 32),
                         num_key_value_heads=max(1, a.hidden // 64), max_position_embeddings=256,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2)
    path = tempfile.mkdtemp(prefix="hf_generate_")
    LlamaForCausalLM(config).save_pretrained(path)
    cpu = LlamaForCausalLM.from_pretrained(path).eval()
    tpu = LlamaForCausalLM.from_pretrained(path, device_map="tpu").eval()
    ids = torch.randint(3, a.vocab, (1, a.prompt), generator=torch.Generator().manual_seed(1))

    def generate(model, **kw):
        dev = model.device
        kw.setdefault("do_sample", False)
        with torch.no_grad():
            return model.generate(ids.to(dev), attention_mask=torch.ones_like(ids).to(dev), max_new_tokens=a.tokens,
                                  min_new_tokens=a.tokens, **kw).cpu()

    def timed(model, **kw):
        generate(model, **kw)  # warm-up: compiles
        best = float("inf")
        for _ in range(a.rounds):
            start = time.perf_counter()
            out = generate(model, **kw)
            best = min(best, time.perf_counter() - start)
        return out, a.tokens / best

    ok = True

    def check(what, same):
        nonlocal ok
        ok &= bool(same)
        print(f"  {what:44s} {'same tokens as CPU' if same else 'DIFFERENT from CPU'}")

    print(f"Llama {a.layers} layers, hidden {a.hidden}, vocab {a.vocab}; prompt {a.prompt}, {a.tokens} new tokens")
    expected, cpu_rate = timed(cpu)
    check("greedy, dynamic cache", torch.equal(generate(tpu), expected))
    check("greedy, static cache (eager)", torch.equal(
        generate(tpu, cache_implementation="static", disable_compile=True), expected))
    check("beam search (3 beams)", torch.equal(generate(tpu, num_beams=3), generate(cpu, num_beams=3)))

    def sample(seed):
        torch.manual_seed(seed)
        return generate(tpu, do_sample=True, top_k=50)

    same = torch.equal(sample(5), sample(5))
    ok &= same
    print(f"  {'seeded sampling, twice':44s} {'same tokens both runs' if same else 'DIFFERENT between runs'}")

    _, dyn_rate = timed(tpu)
    _, eager_rate = timed(tpu, cache_implementation="static", disable_compile=True)
    before = torch_tpu.compile_stats()
    compiled, compiled_rate = timed(tpu, cache_implementation="static")
    after = torch_tpu.compile_stats()
    check("greedy, static cache, compiled decode", torch.equal(compiled, expected))
    graphs = after["graphs"] - before["graphs"]
    calls = after["graph_calls"] - before["graph_calls"]
    print(f"\ntokens/s (best of {a.rounds}):")
    print(f"  CPU (PyTorch eager)              {cpu_rate:8.1f}")
    print(f"  tpu eager, dynamic cache         {dyn_rate:8.1f}")
    print(f"  tpu eager, static cache          {eager_rate:8.1f}")
    print(f"  tpu compiled, static cache       {compiled_rate:8.1f}   ({compiled_rate / eager_rate:.2f}x eager static)")
    print(f"compiled decode: {graphs} graph(s) built for {calls} calls over {a.rounds + 1} generate runs")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
