"""tpu tensors sent between processes (`torch.multiprocessing` queues,
DataLoader workers' batches, `mp.spawn` arguments).

torch's reducer shares a CUDA tensor's memory through CUDA IPC and any
other non-CPU tensor through `_share_fd_cpu_`, which refuses it: the error
happened in the sending queue's feeder thread, which only prints it, so a
DataLoader whose (spawned) workers returned tpu tensors waited forever for a
batch that was never sent. XLA gives no memory shared between processes, so
here a tpu tensor travels as a copy: its values go through CPU shared
memory (torch's own reducer) and are moved to the same tpu device index on
arrival. A copy cannot stand in for shared memory where sharing is the
point, a parameter trained by several processes (Hogwild), so a tensor
that requires grad or is a Parameter is refused, by an error raised where
it arrives (raised while sending, it would be lost in the feeder thread
again).
"""

from multiprocessing.reduction import ForkingPickler

import torch
from torch.multiprocessing import reductions

_REFUSED = ("torch_tpu: a tpu tensor that requires grad (a Parameter, say) cannot be shared with another "
            "process: XLA has no memory shared between processes, and a copy would train apart from the "
            "original. Send the data (t.detach().cpu()) and build the model in each process, or use "
            "torch.distributed (DDP) to keep replicas in step.")


def _rebuild_on_tpu(cpu: torch.Tensor, index: int) -> torch.Tensor:
    return cpu.to(torch.device("tpu", index))


def _refuse(message: str):
    raise RuntimeError(message)


def _reduce_tensor(tensor: torch.Tensor):
    if tensor.device.type != "tpu":
        return reductions.reduce_tensor(tensor)
    if tensor.requires_grad or isinstance(tensor, torch.nn.Parameter):
        return (_refuse, (_REFUSED,))
    return (_rebuild_on_tpu, (tensor.detach().cpu(), tensor.device.index))


def install() -> None:
    """Registers the reducer for every tensor class torch registers its own
    for (torch.multiprocessing, imported by torch itself, has already done so)."""
    for cls in {torch.Tensor, torch.nn.Parameter, *torch._tensor_classes}:
        ForkingPickler.register(cls, _reduce_tensor)
