"""A Diffusers pipeline on tpu, eager and compiled, against CPU (issue 16, item 3).

DiTPipeline built from configs with random weights (a DiT denoiser, the
DPM-Solver++ scheduler, an AutoencoderKL whose decoder turns the latents into
the image), saved and loaded back, then `pipe.to("tpu")`. Runs the pipeline
on CPU, on tpu eager and on tpu with the denoiser under
`torch.compile(backend="tpu")`; reports the largest difference to CPU's image
and the time per denoising step (whole pipeline time / steps, best of
--rounds warm runs). No assertions on time; exits 1 if an image differs
from CPU's by more than 1e-4.

Usage: python benchmarks/hf_diffusers.py [--steps 20] [--size 32] [--layers 4] [--rounds 3]
"""

import argparse
import tempfile
import time

import torch

import torch_tpu
from diffusers import AutoencoderKL, DiTPipeline, DiTTransformer2DModel, DPMSolverMultistepScheduler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--size", type=int, default=32, help="image side (latents are size/2)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()

    torch.manual_seed(0)
    latent = a.size // 2
    denoiser = DiTTransformer2DModel(num_attention_heads=4, attention_head_dim=32, in_channels=4, out_channels=8,
                                     num_layers=a.layers, sample_size=latent, patch_size=2,
                                     num_embeds_ada_norm=1000, norm_num_groups=8)
    vae = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                        up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(32, 64), latent_channels=4,
                        norm_num_groups=8, sample_size=a.size)
    path = tempfile.mkdtemp(prefix="hf_diffusers_")
    DiTPipeline(transformer=denoiser, vae=vae, scheduler=DPMSolverMultistepScheduler()).save_pretrained(path)
    cpu = DiTPipeline.from_pretrained(path)
    tpu = DiTPipeline.from_pretrained(path).to("tpu")

    def run(pipe):
        return pipe(class_labels=[1], generator=torch.Generator("cpu").manual_seed(0), num_inference_steps=a.steps,
                    output_type="pt").images.cpu()

    def timed(pipe):
        run(pipe)  # warm-up: compiles
        best = float("inf")
        for _ in range(a.rounds):
            start = time.perf_counter()
            image = run(pipe)
            best = min(best, time.perf_counter() - start)
        return image, best / a.steps

    print(f"DiT {a.layers} layers + DPM-Solver++ + AutoencoderKL decode; {a.size}x{a.size} image, {a.steps} steps")
    expected, cpu_step = timed(cpu)
    eager, eager_step = timed(tpu)
    tpu.transformer = torch.compile(tpu.transformer, backend="tpu")
    before = torch_tpu.compile_stats()
    compiled, compiled_step = timed(tpu)
    graphs = torch_tpu.compile_stats()["graphs"] - before["graphs"]
    ok = True
    for what, image in (("tpu eager", eager), ("tpu compiled", compiled)):
        diff = (image - expected).abs().max().item()
        ok &= diff <= 1e-4
        print(f"  {what:14s} max |image - CPU image| = {diff:.2e}")
    print(f"time per step (best of {a.rounds}, whole pipeline / steps):")
    print(f"  CPU (PyTorch eager)   {cpu_step * 1e3:8.2f} ms")
    print(f"  tpu eager             {eager_step * 1e3:8.2f} ms")
    print(f"  tpu compiled          {compiled_step * 1e3:8.2f} ms   ({eager_step / compiled_step:.2f}x faster than eager;"
          f" {graphs} graph(s) compiled)")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
