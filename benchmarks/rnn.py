"""Training step of a 2-layer LSTM: PyTorch on CPU against tpu in Strict
Eager, Fused Eager and torch.compile(backend="tpu"), in one run.

The model is nn.LSTM(input, hidden, num_layers=2) and a linear head on the
last layer's outputs, MSE loss, Adam; a step is zero_grad, forward, loss,
backward, optimizer step. On tpu each LSTM layer is one program whose time
loop is a stablehlo.while, and its backward one reverse loop
(csrc/lowering/rnn.cpp). For reference, "tpu strict, per-step cells" runs
the same recurrence as a Python loop over nn.LSTMCell: one set of programs
per time step, which is what PyTorch's composite aten::lstm does on a
non-CPU device without a fused kernel. Dynamo does not trace nn.LSTM
(torch._dynamo.config.allow_rnn is off by default), so in the compiled
configuration the LSTM runs eagerly between compiled graphs.

Prints steps/s per configuration, ratios to CPU and the final losses (same
seed and data everywhere). No assertions on time.

Usage: python benchmarks/rnn.py [--steps N] [--seq T] [--batch B] [--hidden H]
"""

import argparse
import time

import torch
import torch.nn as nn

import torch_tpu


class Model(nn.Module):
    def __init__(self, inp, hidden, cells=False):
        super().__init__()
        self.lstm = nn.LSTM(inp, hidden, num_layers=2)
        self.head = nn.Linear(hidden, 1)
        self.cells = cells

    def forward(self, x):
        if not self.cells:
            out, _ = self.lstm(x)
        else:
            out = x
            for layer in range(2):
                cell = nn.LSTMCell(out.shape[-1], self.lstm.hidden_size, device=x.device)
                ws = [getattr(self.lstm, f"{n}_l{layer}") for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
                h = torch.zeros(x.shape[1], self.lstm.hidden_size, device=x.device)
                c = torch.zeros_like(h)
                outs = []
                for t in range(x.shape[0]):
                    h, c = torch.func.functional_call(cell, dict(zip(("weight_ih", "weight_hh", "bias_ih",
                                                                       "bias_hh"), ws)), (out[t], (h, c)))
                    outs.append(h)
                out = torch.stack(outs)
        return self.head(out)


def run(device, mode, args, x, y, cells=False, compiled=False):
    torch.manual_seed(0)
    model = Model(args.input, args.hidden, cells).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = x.to(device), y.to(device)
    fwd = torch.compile(model, backend="tpu") if compiled else model

    def step():
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(fwd(x), y)
        loss.backward()
        opt.step()
        return loss

    prev = torch_tpu.get_eager_mode() if device == "tpu" else None
    if device == "tpu":
        torch_tpu.eager_mode(mode)
    try:
        t0 = time.perf_counter()
        loss = step()
        loss.item()
        first = time.perf_counter() - t0
        for _ in range(args.warmup):
            step()
        if device == "tpu":
            torch.tpu.synchronize()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            loss = step()
        final = loss.item()
        if device == "tpu":
            torch.tpu.synchronize()
        dt = (time.perf_counter() - t0) / args.steps
    finally:
        if device == "tpu":
            torch_tpu.eager_mode(prev)
    return 1.0 / dt, first, final


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--input", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--cpu-threads", type=int, default=None,
                    help="torch.set_num_threads for the CPU run (on a busy machine 1 can beat the default)")
    ap.add_argument("--no-cells", action="store_true", help="skip the per-step-cells reference (slow)")
    args = ap.parse_args()
    if args.cpu_threads:
        torch.set_num_threads(args.cpu_threads)
    torch.manual_seed(0)
    x = torch.randn(args.seq, args.batch, args.input)
    y = torch.randn(args.seq, args.batch, 1)
    configs = [
        ("cpu (PyTorch)", dict(device="cpu", mode=None)),
        ("tpu strict", dict(device="tpu", mode="strict")),
        ("tpu fused", dict(device="tpu", mode="fused")),
        ("tpu compiled", dict(device="tpu", mode="strict", compiled=True)),
    ]
    if not args.no_cells:
        configs.append(("tpu strict, per-step cells", dict(device="tpu", mode="strict", cells=True)))
    print(f"2-layer LSTM, input {args.input}, hidden {args.hidden}, seq {args.seq}, batch {args.batch}, "
          f"Adam; {args.steps} timed steps after {args.warmup} warm-up; CPU threads {torch.get_num_threads()}")
    res = {}
    for name, kw in configs:
        res[name] = run(args=args, x=x, y=y, **kw)
        sps, first, loss = res[name]
        print(f"  {name:<28} {sps:8.2f} steps/s   first step {first:6.2f} s   loss {loss:.6f}", flush=True)
    base = res["cpu (PyTorch)"][0]
    print("ratios to PyTorch CPU (steps/s):")
    for name, (sps, _, _) in res.items():
        print(f"  {name:<28} {sps / base:6.2f}x")
    if "tpu strict, per-step cells" in res:
        print(f"  while loop vs per-step cells (strict): "
              f"{res['tpu strict'][0] / res['tpu strict, per-step cells'][0]:.2f}x")


if __name__ == "__main__":
    main()
