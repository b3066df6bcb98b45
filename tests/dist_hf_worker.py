"""One rank of a 2-process job run by plain torchrun (test_distributed.py):
accelerate's Accelerator and Transformers' Trainer (DDP, then FSDP2), as a
CUDA script uses them, with nothing tpu-specific in the script. Each must
see a distributed job (MULTI_GPU over torch's tpu backend, this process on
tpu:0), wrap the model in DDP (or shard it), shard the data between the
ranks and end with the weights of one process trained on the global
batches on CPU (1e-5). Prints FAIL lines and exits 1 on any mismatch."""

import os
import sys

import torch
import torch.nn as nn

from dist_worker import FAILS, RANK, report_and_exit
from dist_worker import W as WORLD


def expect(what, got, want):
    if got != want:
        FAILS.append(f"{what}: {got!r}, expected {want!r}")


def close(what, net, ref):
    for (name, p), q in zip(net.named_parameters(), ref.parameters()):
        diff = (p.detach().cpu() - q.detach()).abs().max().item()
        if diff > 1e-5:
            FAILS.append(f"{what} {name}: max diff {diff:.2e} from one process on CPU")


def data(n=32, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 8, generator=g), torch.randn(n, 4, generator=g)


def accelerate_job():
    """Accelerator.prepare(model, optimizer, dataloader), 4 batches per rank
    of 4 samples, gradients accumulated over 2 (one optimizer step per 2):
    together the 2 steps of 16 samples of one process."""
    from accelerate import Accelerator, PartialState
    from accelerate.utils import DistributedType, broadcast_object_list

    state = PartialState()
    expect("distributed_type", state.distributed_type, DistributedType.MULTI_GPU)
    expect("num_processes", state.num_processes, WORLD)
    expect("process_index", state.process_index, RANK)
    expect("device", state.device, torch.device("tpu", 0))
    expect("is_main_process", state.is_main_process, RANK == 0)

    acc = Accelerator(gradient_accumulation_steps=2)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    ref = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    ref.load_state_dict(model.state_dict())
    x, y = data()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt, loader = acc.prepare(model, opt, loader)
    expect("prepared model", type(model).__name__, "DistributedDataParallel")
    expect("batches per rank", len(loader), len(x) // 4 // WORLD)
    for xb, yb in loader:
        expect("batch device", xb.device.type, "tpu")
        with acc.accumulate(model):
            acc.backward(nn.functional.mse_loss(model(xb), yb))
            opt.step()
            opt.zero_grad()
    acc.wait_for_everyone()

    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    step = 4 * WORLD
    for i in range(0, len(x), 2 * step):
        ref_opt.zero_grad()
        for j in (i, i + step):
            (nn.functional.mse_loss(ref(x[j:j + step]), y[j:j + step]) / 2).backward()
        ref_opt.step()
    close("Accelerator", acc.unwrap_model(model), ref)

    gathered = acc.gather(torch.tensor([float(RANK)], device=acc.device))
    expect("gather", gathered.cpu().tolist(), [float(r) for r in range(WORLD)])
    objects = [f"from rank {RANK}"]
    broadcast_object_list(objects)
    expect("broadcast_object_list", objects, ["from rank 0"])
    # destroys the process group: the Trainer below makes it again in the
    # same torchrun store (Gloo's keys of the first one must not be read)
    acc.end_training()


class _Regression(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 4)

    def forward(self, x, labels=None):
        out = self.linear(x)
        return {"loss": None if labels is None else nn.functional.mse_loss(out, labels), "logits": out}


class _Pairs(torch.utils.data.Dataset):
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i]}


def trainer_job(output_dir):
    """Trainer with plain TrainingArguments: 2 epochs whose one step per rank
    takes half the data, so every step's global batch is the whole set
    (whatever order the sampler draws), gradients clipped to norm 1; then
    evaluate, predict and save_model."""
    from transformers import Trainer, TrainingArguments
    from transformers.training_args import ParallelMode

    x, y = data(seed=2)
    args = TrainingArguments(output_dir=output_dir, per_device_train_batch_size=len(x) // WORLD, num_train_epochs=2,
                             learning_rate=0.5, lr_scheduler_type="constant", optim="sgd", report_to=[],
                             save_strategy="no", disable_tqdm=True)
    expect("TrainingArguments.device", args.device, torch.device("tpu", 0))
    expect("world_size", args.world_size, WORLD)
    expect("process_index", args.process_index, RANK)
    expect("parallel_mode", args.parallel_mode, ParallelMode.DISTRIBUTED)

    torch.manual_seed(0)
    model = _Regression()
    ref = _Regression()
    ref.load_state_dict(model.state_dict())
    trainer = Trainer(model=model, args=args, train_dataset=_Pairs(x, y))
    result = trainer.train()
    expect("global_step", result.global_step, 2)
    expect("wrapped model", type(trainer.model_wrapped).__name__, "DistributedDataParallel")

    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.5)
    for _ in range(2):
        ref_opt.zero_grad()
        ref(x, y)["loss"].backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
        ref_opt.step()
    close("Trainer", trainer.model, ref)

    # evaluate: each rank scores one batch of 8 (its half), the losses are
    # gathered; predict: 13 rows, so the ranks' last batches are padded to
    # the same size and gather_for_metrics drops the padding
    ex, ey = data(n=16, seed=3)
    metrics = trainer.evaluate(_Pairs(ex, ey))
    with torch.no_grad():
        want = ref(ex, ey)["loss"].item()
    if abs(metrics["eval_loss"] - want) > 1e-5 * max(1.0, abs(want)):
        FAILS.append(f"eval_loss {metrics['eval_loss']} vs {want} on CPU")
    ex, ey = ex[:13], ey[:13]
    predictions = trainer.predict(_Pairs(ex, ey)).predictions
    with torch.no_grad():
        want = ref(ex)["logits"]
    if tuple(predictions.shape) != tuple(want.shape) or not torch.allclose(torch.as_tensor(predictions), want,
                                                                             atol=1e-5):
        FAILS.append(f"predict: shape {tuple(predictions.shape)} (want {tuple(want.shape)}) or values differ")

    # save_model: the main process writes, every rank reads it back
    from safetensors.torch import load_file

    trainer.save_model(output_dir)
    trainer.accelerator.wait_for_everyone()
    saved = load_file(os.path.join(output_dir, "model.safetensors"))
    for name, p in ref.named_parameters():
        if name not in saved or not torch.allclose(saved[name], p.detach(), atol=1e-5):
            FAILS.append(f"save_model: {name} missing or differs from CPU's")


class _TwoLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x, labels=None):
        out = self.second(torch.relu(self.first(x)))
        return {"loss": nn.functional.mse_loss(out, labels), "logits": out}


def fsdp_trainer_job(output_dir):
    """Trainer with `fsdp="full_shard"` and FSDP2 (accelerate's FSDP type,
    each Linear sharded over the ranks as DTensors), 2 full-data steps as in
    trainer_job; last, since it leaves accelerate's FSDP variables set."""
    from torch.distributed.tensor import DTensor
    from transformers import Trainer, TrainingArguments

    x, y = data(seed=4)
    args = TrainingArguments(output_dir=output_dir, per_device_train_batch_size=len(x) // WORLD, num_train_epochs=2,
                             learning_rate=0.5, lr_scheduler_type="constant", optim="sgd", max_grad_norm=0,
                             fsdp="full_shard", fsdp_config={"fsdp_version": 2,
                                                             "transformer_layer_cls_to_wrap": ["Linear"]},
                             report_to=[], save_strategy="no", disable_tqdm=True)
    torch.manual_seed(0)
    model, ref = _TwoLayers(), _TwoLayers()
    ref.load_state_dict(model.state_dict())
    trainer = Trainer(model=model, args=args, train_dataset=_Pairs(x, y))
    trainer.train()
    expect("FSDP distributed_type", str(trainer.accelerator.distributed_type), "DistributedType.FSDP")
    expect("FSDP parameters are DTensors", all(isinstance(p, DTensor) for p in trainer.model.parameters()), True)

    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.5)
    for _ in range(2):
        ref_opt.zero_grad()
        ref(x, y)["loss"].backward()
        ref_opt.step()
    for (name, p), q in zip(trainer.model.named_parameters(), ref.parameters()):
        got = (p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu()
        diff = (got - q.detach()).abs().max().item()
        if diff > 1e-5:
            FAILS.append(f"FSDP Trainer {name}: max diff {diff:.2e} from one process on CPU")


def main():
    accelerate_job()
    trainer_job(sys.argv[1])
    fsdp_trainer_job(sys.argv[1])
    report_and_exit()


if __name__ == "__main__":
    main()
