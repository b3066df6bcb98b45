"""Training with checkpoints on device "tpu": save every N steps, resume exactly.

    python examples/train_checkpoint.py --steps 200 --save-every 50
    python examples/train_checkpoint.py --steps 400 --resume          # goes on from the last checkpoint

A small MLP (with dropout) learns a synthetic classification task with
AdamW and a warmup + cosine learning-rate schedule. A checkpoint holds
everything the next step depends on: model weights and optimizer state (tpu
tensors, saved with torch.save as they are), the scheduler, the step, and the
CPU and tpu RNG states (dropout masks). Resuming therefore gives the same
parameters as never stopping. Batches are made from (seed, step), so no data
loader state is needed.
"""

from __future__ import annotations

import argparse
import glob
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

FEATURES, CLASSES = 16, 4


def make_model(hidden: int, dropout: float) -> nn.Module:
    return nn.Sequential(
        nn.Linear(FEATURES, hidden), nn.GELU(), nn.Dropout(dropout),
        nn.Linear(hidden, hidden), nn.GELU(), nn.Dropout(dropout),
        nn.Linear(hidden, CLASSES),
    )


def batch(seed: int, step: int, size: int):
    """Batch number `step`: inputs and the labels a fixed random teacher gives them."""
    teacher = torch.Generator().manual_seed(seed)
    w = torch.randn(FEATURES, CLASSES, generator=teacher)
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    x = torch.randn(size, FEATURES, generator=g)
    return x, (x @ w).argmax(dim=1)


def make_training(args, device):
    torch.manual_seed(args.seed)
    model = make_model(args.hidden, args.dropout).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = max(1, args.steps // 10)
    sched = torch.optim.lr_scheduler.SequentialLR(
        opt,
        [torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=warmup),
         torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, args.steps - warmup))],
        milestones=[warmup],
    )
    return model, opt, sched


def rng_states(device: torch.device) -> dict:
    states = {"cpu": torch.get_rng_state()}
    if device.type != "cpu":
        states[device.type] = torch.get_device_module(device.type).get_rng_state(device)
    return states


def set_rng_states(states: dict, device: torch.device) -> None:
    # RNG states are host byte tensors; map_location moved them to `device`.
    torch.set_rng_state(states["cpu"].cpu())
    if device.type != "cpu":
        torch.get_device_module(device.type).set_rng_state(states[device.type].cpu(), device)


def checkpoint_path(ckpt_dir: str, step: int) -> str:
    return os.path.join(ckpt_dir, f"step_{step:06d}.pt")


def save_checkpoint(path: str, step: int, model, opt, sched, device) -> None:
    state = {
        "step": step,
        "model": model.state_dict(),  # tpu tensors: torch.save copies them to the host
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(),
        "rng": rng_states(device),
    }
    tmp = path + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)  # a crash while saving never leaves a half-written checkpoint


def latest_checkpoint(ckpt_dir: str) -> str | None:
    found = sorted(glob.glob(os.path.join(ckpt_dir, "step_*.pt")))
    return found[-1] if found else None


def load_checkpoint(path: str, model, opt, sched, device) -> int:
    state = torch.load(path, map_location=device, weights_only=False)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    sched.load_state_dict(state["scheduler"])
    set_rng_states(state["rng"], device)
    return state["step"]


def train(args) -> nn.Module:
    device = torch.device(args.device)
    model, opt, sched = make_training(args, device)
    step = 0
    if args.resume is not None:
        path = args.resume or latest_checkpoint(args.ckpt_dir)
        if path is None:
            raise SystemExit(f"--resume: no checkpoint in {args.ckpt_dir}")
        step = load_checkpoint(path, model, opt, sched, device)
        print(f"resumed from {path} at step {step}", flush=True)
    if args.save_every:
        os.makedirs(args.ckpt_dir, exist_ok=True)
    start = time.perf_counter()
    model.train()
    while step < args.steps:
        x, y = batch(args.seed, step, args.batch)
        loss = F.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        step += 1
        if step % args.log_every == 0 or step == args.steps:
            rate = step / max(time.perf_counter() - start, 1e-9)
            print(f"step {step:5d}/{args.steps}  loss {loss.item():.4f}  "
                  f"lr {sched.get_last_lr()[0]:.2e}  ({rate:.1f} steps/s)", flush=True)
        if args.save_every and step % args.save_every == 0:
            path = checkpoint_path(args.ckpt_dir, step)
            save_checkpoint(path, step, model, opt, sched, device)
            print(f"saved {path}", flush=True)
    if args.dump:
        torch.save({k: v.cpu() for k, v in model.state_dict().items()}, args.dump)
    return model


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200, help="train until this step")
    p.add_argument("--save-every", type=int, default=50, help="checkpoint period in steps (0: never)")
    p.add_argument("--ckpt-dir", default="checkpoints")
    p.add_argument("--resume", nargs="?", const="", default=None,
                   help="continue from this checkpoint (no value: the latest in --ckpt-dir)")
    p.add_argument("--device", default="tpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--dump", help="write the final parameters (on the host) to this file")
    args = p.parse_args(argv)
    if args.steps < 0 or args.save_every < 0 or args.log_every <= 0:
        p.error("--steps and --save-every must be >= 0, --log-every > 0")
    if not (math.isfinite(args.lr) and args.lr > 0):
        p.error("--lr must be a positive number")
    return args


if __name__ == "__main__":
    train(parse_args())
