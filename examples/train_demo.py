"""The main job: train a small model on device "tpu" and report.

Data is generated here (nothing is downloaded): points in 2-D drawn from
interleaved spirals, one class per arm. An MLP learns to tell the arms apart
on `tpu`, with a progress bar, then is evaluated on held-out points.
"""

import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm import tqdm


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


if __name__ == "__main__":
    main()
