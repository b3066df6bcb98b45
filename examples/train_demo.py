"""The main job: train a small model on device "tpu" and report.

Data is generated here (nothing is downloaded): points in 2-D drawn from
interleaved spirals, one class per arm. An MLP learns to tell the arms apart
on `tpu`, with a progress bar, then is evaluated on held-out points.

Then a Transformers causal LM: a tiny random-weight Llama and a word-level
tokenizer, both created and saved here (`save_pretrained`), loaded back with
`device_map="tpu"`, generate text on tpu in eager and compiled (static
cache: Transformers compiles the decode step with backend "tpu"), with
tokens/s and the number of graphs the compiled decode built. The weights are
random, so the words are too; the point is that both runs give CPU's tokens.
"""

import math
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm import tqdm

import torch_tpu


def spirals(n_per_class: int, classes: int, noise: float, generator: torch.Generator):
    xs, ys = [], []
    for c in range(classes):
        r = torch.linspace(0.1, 1.0, n_per_class)
        theta = r * 4.0 + c * 2 * math.pi / classes
        theta = theta + torch.randn(n_per_class, generator=generator) * noise
        xs.append(torch.stack([r * torch.sin(theta), r * torch.cos(theta)], dim=1))
        ys.append(torch.full((n_per_class,), c, dtype=torch.long))
    x, y = torch.cat(xs), torch.cat(ys)
    perm = torch.randperm(len(x), generator=generator)
    return x[perm], y[perm]


class SpiralNet(nn.Module):
    def __init__(self, classes: int, hidden: int = 128):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(2, hidden), nn.GELU(),
            nn.Linear(hidden, hidden), nn.GELU(),
            nn.LayerNorm(hidden),
            nn.Linear(hidden, classes),
        )

    def forward(self, x):
        return self.net(x)


def main():
    device = torch.device("tpu")
    print(f"torch {torch.__version__}; device {device}: {torch.tpu.get_device_name()} "
          f"(XLA platform '{torch.tpu.platform()}', {torch.tpu.device_count()} device(s))")
    g = torch.Generator().manual_seed(0)
    classes = 3
    x_train, y_train = spirals(1000, classes, 0.15, g)
    x_test, y_test = spirals(300, classes, 0.15, g)

    torch.manual_seed(0)
    model = SpiralNet(classes).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    x_train, y_train = x_train.to(device), y_train.to(device)

    epochs, batch = 30, 200
    steps = epochs * (len(x_train) // batch)
    start = time.perf_counter()
    bar = tqdm(total=steps, desc="training on tpu", unit="step")
    first = None
    for epoch in range(epochs):
        perm = torch.randperm(len(x_train), generator=g).to(device)
        for i in range(0, len(x_train), batch):
            idx = perm[i:i + batch]
            loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            bar.update(1)
        value = loss.item()
        first = value if first is None else first
        bar.set_postfix(epoch=epoch + 1, loss=f"{value:.4f}")
        if (epoch + 1) % 5 == 0:
            tqdm.write(f"epoch {epoch + 1:3d}  loss {value:.4f}")
    bar.close()
    elapsed = time.perf_counter() - start

    model.eval()
    with torch.no_grad():
        pred = model(x_test.to(device)).argmax(dim=1).cpu()
    accuracy = (pred == y_test).float().mean().item()
    print(f"loss {first:.4f} -> {value:.4f} in {steps} steps ({elapsed:.1f} s, {steps / elapsed:.1f} steps/s)")
    print(f"held-out accuracy: {accuracy * 100:.1f}% on {len(y_test)} points ({classes} spiral arms)")
    print(f"device memory in use: {torch.tpu.memory_allocated() / 2**20:.2f} MiB")


WORDS = ("the a tpu runs every op as stablehlo through xla and torch compile fuses graphs into one program "
         "while eager mode lowers each aten op to its own cached executable so models from hugging face load "
         "with device map tpu generate tokens train with trainer and match the cpu results").split()


def causal_lm_demo(new_tokens: int = 24):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    print("\nTransformers causal LM (tiny random-weight Llama, created and saved here)")
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, **{w: i + 3 for i, w in enumerate(dict.fromkeys(WORDS))}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", bos_token="<s>",
                                        eos_token="</s>", unk_token="<pad>")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2)
    path = tempfile.mkdtemp(prefix="demo_llama_")
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)

    tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
    cpu = LlamaForCausalLM.from_pretrained(path).eval()
    model = LlamaForCausalLM.from_pretrained(path, device_map="tpu").eval()
    prompt = "models from hugging face"
    inputs = tokenizer(prompt, return_tensors="pt")

    def generate(m, **kw):
        with torch.no_grad():
            out = m.generate(**{k: v.to(m.device) for k, v in inputs.items()}, max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, do_sample=False, **kw)
        return out.cpu()

    expected = generate(cpu)
    print(f"model on {model.device}, {sum(p.numel() for p in model.parameters()) / 1e3:.0f}k parameters; "
          f"prompt: {prompt!r}")
    runs = (("eager", dict(cache_implementation="static", disable_compile=True)),
            ("compiled", dict(cache_implementation="static")))
    for name, kw in runs:
        before = torch_tpu.compile_stats()
        generate(model, **kw)  # first run compiles
        start = time.perf_counter()
        out = generate(model, **kw)
        rate = new_tokens / (time.perf_counter() - start)
        after = torch_tpu.compile_stats()
        text = tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
        extra = f", {after['graphs'] - before['graphs']} graph(s) compiled for the decode step" \
            if name == "compiled" else ""
        print(f"  {name:8s} {rate:7.1f} tokens/s{extra}; same tokens as CPU: {torch.equal(out, expected)}")
        print(f"           -> {text}")


if __name__ == "__main__":
    main()
    causal_lm_demo()
