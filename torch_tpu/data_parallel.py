"""`nn.DataParallel` (and `nn.parallel.data_parallel`) on tpu.

DataParallel is written for any accelerator: it finds tpu through the
PrivateUse1 device module (`torch._utils._get_available_device_type()`),
moves the module to `tpu:0` and scatters each batch to the devices. The
scatter and gather themselves call `torch._C._scatter` / `_gather`, which
torch compiles only into its CUDA builds: on a CPU build every DataParallel
forward on tpu failed with "module 'torch._C' has no attribute '_scatter'",
and a CUDA build would run CUDA's comm code on tpu tensors. Scripts written
for one GPU wrap their model in DataParallel unconditionally, so this
module gives `torch.nn.parallel.comm.scatter` / `gather` a tpu branch (the
functions DataParallel's autograd functions look up at each call; torch
has no registration hook for them) and leaves every other device type to
torch's own. The branch does what torch's C++ does: chunks along `dim`
(`chunk_sizes` or equal chunks), each copied to its device; gather
concatenates on the destination (an index is a tpu device, -1 or "cpu" the
host, None the current device).
"""

import torch
from torch._utils import _get_available_device_type, _get_device_index
from torch.nn.parallel import comm

_torch_scatter = comm.scatter
_torch_gather = comm.gather


def _tpu_job(tensors) -> bool:
    """Device indices mean tpu when tpu is the accelerator DataParallel
    found, or when a tensor involved already lives there."""
    if any(isinstance(t, torch.Tensor) and t.device.type == "tpu" for t in tensors):
        return True
    return _get_available_device_type() == "tpu"


def _tpu(index) -> torch.device:
    if isinstance(index, torch.device):
        return index
    return torch.device("tpu", _get_device_index(index, optional=True))


def scatter(tensor, devices=None, chunk_sizes=None, dim=0, streams=None, *, out=None):
    targets = list(out) if out is not None else []
    if not _tpu_job([tensor, *targets]):
        return _torch_scatter(tensor, devices, chunk_sizes, dim, streams, out=out)
    tensor = comm._handle_complex(tensor)
    if out is not None:
        if devices is not None or chunk_sizes is not None:
            raise RuntimeError("scatter: 'devices' and 'chunk_sizes' must not be given with 'out'")
        targets = [comm._handle_complex(o) for o in targets]
        for o, chunk in zip(targets, tensor.split([o.size(dim) for o in targets], dim), strict=True):
            o.copy_(chunk, non_blocking=True)
        return tuple(out)
    devices = [_tpu(d) for d in devices]
    chunks = tensor.split(list(chunk_sizes), dim) if chunk_sizes is not None else tensor.chunk(len(devices), dim)
    if len(chunks) != len(devices):
        raise RuntimeError(f"scatter: {tensor.size(dim)} elements along dim {dim} give {len(chunks)} chunks "
                           f"for {len(devices)} devices")
    return tuple(c.to(d, non_blocking=True) for c, d in zip(chunks, devices, strict=True))


def gather(tensors, dim=0, destination=None, *, out=None):
    tensors = list(tensors)
    if not _tpu_job([*tensors, out]):
        return _torch_gather(tensors, dim, destination, out=out)
    tensors = [comm._handle_complex(t) for t in tensors]
    if out is not None:
        if destination is not None:
            raise RuntimeError("gather: 'destination' must not be specified when 'out' is specified, "
                               f"but got destination={destination}")
        target = comm._handle_complex(out)
        target.copy_(torch.cat([t.to(target.device) for t in tensors], dim))
        return out
    if destination == -1 or destination == "cpu" or (isinstance(destination, torch.device)
                                                      and destination.type == "cpu"):
        device = torch.device("cpu")
    else:
        device = _tpu(destination)
    return torch.cat([t.to(device) for t in tensors], dim)


def install() -> None:
    comm.scatter = scatter
    comm.gather = gather
