"""First look at torch_tpu on whatever XLA platform this machine has (a GPU
through jax's PJRT plugin, a TPU, or XLA:CPU): which device the runtime took,
a handful of results against PyTorch on CPU (and against PyTorch's own CUDA
path where there is one), a short training run in each eager mode and under
torch.compile, and the per-op cost. Prints one line per check; exits 1 if a
result differs. tools/device_check.sh runs it on a lent accelerator machine.
"""

import sys
import time

import torch
import torch.nn as nn

import torch_tpu

failures = []


def check(name, got, want, atol, rtol=0.0):
    got = got.detach().cpu().double()
    want = want.detach().cpu().double()
    err = (got - want).abs().max().item() if got.numel() else 0.0
    bound = atol + rtol * want.abs().max().item()
    ok = got.shape == want.shape and err <= bound
    print(f"{'ok  ' if ok else 'FAIL'} {name}: max|d| {err:.3g} (bound {bound:.3g})")
    if not ok:
        failures.append(name)


def timed(fn, n):
    fn()
    torch.tpu.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.tpu.synchronize()
    return (time.perf_counter() - t) / n


def main():
    x = torch.randn(4, device="tpu")
    print(f"platform {torch.tpu.platform()}, device {torch.tpu.get_device_name()}, "
          f"{torch.tpu.device_count()} device(s), memory {torch.tpu.get_device_properties().total_memory / 2**30:.1f} GiB")
    print(f"torch {torch.__version__}, eager mode {torch_tpu.get_eager_mode()}")
    del x

    g = torch.Generator().manual_seed(0)
    a = torch.randn(512, 768, generator=g)
    b = torch.randn(768, 1024, generator=g)
    # torch's default float32 matmul precision is "highest": full fp32
    # products, not TF32 (which a GPU's XLA would pick by default).
    check("matmul f32 512x768x1024", (a.to("tpu") @ b.to("tpu")), a @ b, 0, 1e-5)
    check("matmul bf16", (a.bfloat16().to("tpu") @ b.bfloat16().to("tpu")).float(), a.bfloat16().float() @ b.bfloat16().float(), 0, 2e-2)
    check("softmax", torch.softmax(a.to("tpu"), -1), torch.softmax(a, -1), 1e-6)
    check("sum", a.to("tpu").sum(0), a.sum(0), 1e-4)
    check("cumsum", a.to("tpu").cumsum(1), a.cumsum(1), 1e-3)
    check("sort", a.to("tpu").sort(1).values, a.sort(1).values, 0)
    check("int64 arithmetic", (torch.arange(10**6, device="tpu") * 3 // 7), torch.arange(10**6) * 3 // 7, 0)
    check("float64", a.double().to("tpu").exp().sum(), a.double().exp().sum(), 1e-9)
    conv = nn.Conv2d(3, 8, 3, padding=1)
    img = torch.randn(2, 3, 32, 32, generator=g)
    check("conv2d", conv.to("tpu")(img.to("tpu")), conv.cpu()(img), 1e-4)
    idx = torch.randint(0, 512, (100,), generator=g)
    check("index/gather", a.to("tpu")[idx.to("tpu")], a[idx], 0)
    if torch.cuda.is_available():
        check("matmul f32 vs PyTorch CUDA", (a.to("tpu") @ b.to("tpu")), (a.cuda() @ b.cuda()), 0, 1e-5)

    # A small GPT-like MLP trained a few steps in each mode: the losses must
    # follow CPU's.
    def train(device, mode=None, compiled=False, steps=5):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        data = torch.randn(32, 64, generator=torch.Generator().manual_seed(1)).to(device)
        fn = torch.compile(model, backend="tpu") if compiled else model
        losses = []
        with torch_tpu.eager_mode(mode or torch_tpu.get_eager_mode()):
            for _ in range(steps):
                opt.zero_grad()
                loss = (fn(data) - data).pow(2).mean()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        return torch.tensor(losses)

    ref = train("cpu")
    check("training, Strict Eager", train("tpu", "strict"), ref, 1e-5, 1e-4)
    check("training, Fused Eager", train("tpu", "fused"), ref, 1e-5, 1e-4)
    check("training, torch.compile", train("tpu", compiled=True), ref, 1e-5, 1e-4)

    a1, b1 = torch.randn(1000, device="tpu"), torch.randn(1000, device="tpu")
    m1 = torch.randn(64, 64, device="tpu")
    print(f"per op: add {timed(lambda: a1 + b1, 2000) * 1e6:.1f} us, 64x64 matmul {timed(lambda: m1 @ m1, 2000) * 1e6:.1f} us, "
          f"add+sync {timed(lambda: (a1 + b1, torch.tpu.synchronize()), 500) * 1e6:.1f} us")
    print(f"compile stats {torch_tpu.compile_stats()}")
    print("all checks passed" if not failures else f"{len(failures)} check(s) FAILED: {', '.join(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
