"""Hugging Face libraries on tpu without being told (docs/design.md, "Hugging Face").

Transformers 5 knows a `tpu` accelerator (`is_torch_tpu_available` probes
`torch.accelerator`; `TrainingArguments.device`, generate's auto-compile and
`_default_compile_config` use it), and everything that takes a device works
with "tpu" as given. Nine places choose a device, a compiler or a feature
from a fixed list that has no entry for tpu and offer no hook to add one;
each is adjusted here, right after its module is imported, only to fill that
gap:

- accelerate `PartialState.default_device` (what Trainer and `Accelerator`
  train on): cpu there becomes tpu when tpu is the current accelerator.
  `cpu=True` / `use_cpu=True` and `ACCELERATE_TORCH_DEVICE` still win, as on
  CUDA (setting that variable by default instead would override `cpu=True`).
- accelerate `PartialState._prepare_backend` and `set_device`: a job of
  several processes (torchrun) on tpu is MULTI_GPU over torch's tpu
  backend, each process on tpu:0, as a CUDA job is over NCCL; before, every
  rank got DistributedType.NO and trained alone on the whole dataset.
- accelerate `get_max_memory` (what `device_map="auto"` divides): the tpu
  devices' free memory joins cpu's, under the integer keys that accelerate
  uses for accelerators (an integer device means the current accelerator).
- Transformers `Pipeline.__init__`: no `device` means the first accelerator,
  which its list takes to be cpu when there is no CUDA/XPU/MPS...: here tpu.
- accelerate `DynamoBackend` accepts "tpu" (its enum lists only the backends
  it ships), so `torch_compile_backend="tpu"` reaches `torch.compile`.
- Transformers `TrainingArguments`: `torch_compile=True` with no backend
  picks "tpu" on tpu, as it picks "hpu_backend" / "neuron" for those
  (Inductor refuses tpu graphs, docs/REFERENCE.md).
- Transformers `is_torch_flex_attn_available`: False whenever the host
  accelerator is tpu, because torch's flex_attention refused tpu tensors;
  torch_tpu/flex_attention.py makes it take them, so it is True here.
- Transformers `Trainer._save_rng_state` / `_load_rng_state` and accelerate
  `save_accelerator_state` / `load_accelerator_state`: a checkpoint keeps
  the random state of each device module on their lists; tpu's joins it,
  so a resumed run draws the dropout masks the uninterrupted one drew.

Each adjustment steps aside where the library already gives an answer for
tpu, and everything else passes through unchanged.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys

import torch

from . import _import_hooks


def _tpu_is_accelerator() -> bool:
    """tpu is torch.accelerator's current accelerator (and CUDA is absent)."""
    try:
        acc = torch.accelerator.current_accelerator()
    except RuntimeError:
        return False
    return acc is not None and acc.type == "tpu" and torch.accelerator.is_available() \
        and not torch.cuda.is_available()


# ---------------------------------------------------------------- accelerate.state


def _patch_state(module) -> None:
    cls = module.PartialState
    original = cls.__dict__.get("default_device")
    if not isinstance(original, property) or _import_hooks.is_marked(original.fget):
        return

    @functools.wraps(original.fget)
    def default_device(self):
        device = original.fget(self)
        if device.type == "cpu" and _tpu_is_accelerator():
            return torch.device("tpu")
        return device

    cls.default_device = property(_import_hooks.mark(default_device), doc=original.__doc__)
    _patch_distributed_state(module)


def _patch_distributed_state(module) -> None:
    """A multi-process job (torchrun, torch_tpu.distributed.launch) on tpu is
    distributed as accelerate distributes one over CUDA: MULTI_GPU, the
    type accelerate gives one-process-per-accelerator jobs (DDP in
    prepare(), sharded dataloaders, device-side gathers and broadcasts,
    barriers), over torch's tpu backend, each process on its own tpu:0.
    Without this, `_prepare_backend` (which knows no tpu backend) gave every
    rank DistributedType.NO: each believed itself the only process and
    trained alone on the whole dataset."""
    cls = module.PartialState
    prepare_backend, set_device = cls._prepare_backend, cls.set_device
    if _import_hooks.is_marked(prepare_backend):
        return
    multi = module.DistributedType.MULTI_GPU

    @functools.wraps(prepare_backend)
    def _prepare_backend(self, cpu=False, sagemaker_dp=False, backend=None):
        found, distributed_type = prepare_backend(self, cpu, sagemaker_dp, backend)
        if (distributed_type == module.DistributedType.NO and not cpu and not sagemaker_dp
                and int(os.environ.get("LOCAL_RANK", -1)) != -1 and _tpu_is_accelerator()
                and (found is None or "tpu_dist" in found)):
            from .distributed import DEFAULT_BACKEND

            # torch's default for tpu: tpu tensors to tpu_dist, cpu ones
            # (object collectives) to Gloo; a tpu_dist backend the user named stays
            return found or DEFAULT_BACKEND, multi
        return found, distributed_type

    @functools.wraps(set_device)
    def _set_device(self):
        # accelerate takes MULTI_GPU's device to be cuda:<local rank>; in a
        # tpu job each process owns one device, tpu:0 (docs/design.md,
        # "Distributed").
        if self.device is None and self.distributed_type == multi and _tpu_is_accelerator():
            index = self.local_process_index % torch.tpu.device_count()
            self.device = torch.device("tpu", index)
            torch.tpu.set_device(index)
            return None
        return set_device(self)

    cls._prepare_backend = _import_hooks.mark(_prepare_backend)
    cls.set_device = _import_hooks.mark(_set_device)


# ------------------------------------------------------- accelerate.utils.modeling


def _tpu_memory() -> dict:
    return {i: torch.tpu.mem_get_info(i)[0] for i in range(torch.tpu.device_count())}


def _wrap_max_memory(original):
    if _import_hooks.is_marked(original):
        return original

    @functools.wraps(original)
    def get_max_memory(max_memory=None):
        # accelerate counts integer keys against torch.cuda.device_count(),
        # which is 0 here, so the integer (tpu) keys are handled on this side.
        if not _tpu_is_accelerator():
            return original(max_memory)
        if max_memory is None:
            found = original(None)
            if any(isinstance(k, int) for k in found):
                return found
            return {**_tpu_memory(), **found}
        from accelerate.utils import convert_file_size_to_int

        devices = {k: (convert_file_size_to_int(v) if isinstance(v, str) else v)
                   for k, v in max_memory.items() if isinstance(k, int)}
        count = torch.tpu.device_count()
        for k in devices:
            if not 0 <= k < count:
                raise ValueError(f"get_max_memory: tpu device {k} does not exist (devices 0..{count - 1})")
        rest = original({k: v for k, v in max_memory.items() if not isinstance(k, int)})
        return {**dict(sorted(devices.items())), **rest}

    return _import_hooks.mark(get_max_memory)


def _patch_modeling(module) -> None:
    module.get_max_memory = _wrap_max_memory(module.get_max_memory)
    # Modules that had already taken the name (imported before torch_tpu).
    for name, attr in (("accelerate.utils", "get_max_memory"),
                       ("transformers.integrations.accelerate", "accelerate_max_memory")):
        other = sys.modules.get(name)
        if other is not None and hasattr(other, attr):
            setattr(other, attr, module.get_max_memory)


# ---------------------------------------------------- accelerate.utils.dataclasses


def _patch_dataclasses(module) -> None:
    enum_cls = module.DynamoBackend
    if "TPU" in enum_cls._value2member_map_:
        return
    original = enum_cls.__dict__.get("_missing_")

    def _missing_(cls, value):
        if isinstance(value, str) and value.upper() == "TPU":
            member = cls._value2member_map_.get("TPU")
            if member is None:
                # A member outside the listed ones (like Flag's pseudo
                # members): torch.compile gets its value, "tpu", lowered.
                member = str.__new__(cls, "TPU")
                member._name_ = "TPU"
                member._value_ = "TPU"
                cls._value2member_map_["TPU"] = member
            return member
        return original.__func__(cls, value) if original is not None else None

    enum_cls._missing_ = classmethod(_import_hooks.mark(_missing_))


# ----------------------------------------------------- transformers.training_args


def _patch_training_args(module) -> None:
    cls = module.TrainingArguments
    original = cls.__post_init__
    if _import_hooks.is_marked(original):
        return

    @functools.wraps(original)
    def __post_init__(self):
        wants_compile = self.torch_compile or self.torch_compile_mode is not None
        if wants_compile and self.torch_compile_backend is None and not self.use_cpu and _tpu_is_accelerator():
            self.torch_compile_backend = "tpu"
        original(self)

    cls.__post_init__ = _import_hooks.mark(__post_init__)


# --------------------------------------------------- transformers.pipelines.base


def _patch_pipelines(module) -> None:
    cls = module.Pipeline
    original = cls.__init__
    if _import_hooks.is_marked(original):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        bound = signature.bind_partial(self, *args, **kwargs)
        if (bound.arguments.get("device") is None and _tpu_is_accelerator()
                and getattr(bound.arguments.get("model"), "hf_device_map", None) is None):
            bound.arguments["device"] = torch.device("tpu", torch.tpu.current_device())
            return original(*bound.args, **bound.kwargs)
        return original(self, *args, **kwargs)

    cls.__init__ = _import_hooks.mark(__init__)


# ------------------------------------------------- transformers.utils.import_utils


def _patch_import_utils(module) -> None:
    original = module.is_torch_flex_attn_available
    if _import_hooks.is_marked(original):
        return

    # Transformers turns flex attention off whenever the host accelerator is
    # tpu, because torch's flex_attention refused tpu tensors; with
    # torch_tpu.flex_attention it takes them, so the models' flex path
    # (attn_implementation="flex_attention", BlockMask masks) is offered.
    @functools.lru_cache
    def is_torch_flex_attn_available() -> bool:
        return original() or (module.is_torch_available() and _tpu_is_accelerator())

    # A trace-time constant for Dynamo, as the original (marked under the cache).
    setattr(is_torch_flex_attn_available.__wrapped__, "_dynamo_marked_constant", True)
    module.is_torch_flex_attn_available = _import_hooks.mark(is_torch_flex_attn_available)


# ------------------------------------------- transformers.trainer, accelerate.checkpointing
# Both save each framework's random state beside a checkpoint, each from its
# fixed list of device modules: tpu's generator was left out, so training
# resumed from a checkpoint drew other dropout masks than the uninterrupted
# run (CUDA's resume is exact). Its state joins the same file, under the
# key the framework would give it, and is restored from there.


def _add_to_saved(path, key, value, loader) -> None:
    states = loader(path)
    states[key] = value
    torch.save(states, path)


def _patch_trainer(module) -> None:
    cls = module.Trainer
    save, load = cls._save_rng_state, cls._load_rng_state
    if _import_hooks.is_marked(save):
        return

    def rng_file(trainer, directory):
        # the names Trainer gives the file
        single = trainer.args.world_size <= 1
        return os.path.join(directory, "rng_state.pth" if single else f"rng_state_{trainer.args.process_index}.pth")

    def read(path):
        with module.safe_globals():
            return torch.load(path, weights_only=True)

    @functools.wraps(save)
    def _save_rng_state(self, output_dir):
        save(self, output_dir)
        if _tpu_is_accelerator():
            _add_to_saved(rng_file(self, output_dir), "tpu", torch.tpu.get_rng_state(), read)

    @functools.wraps(load)
    def _load_rng_state(self, checkpoint):
        load(self, checkpoint)
        if checkpoint is not None and _tpu_is_accelerator():
            path = rng_file(self, checkpoint)
            states = read(path) if os.path.isfile(path) else {}
            if "tpu" in states:
                torch.tpu.set_rng_state(states["tpu"])

    cls._save_rng_state = _import_hooks.mark(_save_rng_state)
    cls._load_rng_state = _import_hooks.mark(_load_rng_state)


_TPU_RNG_KEY = "torch_tpu_manual_seed"  # as accelerate names the others ("torch_cuda_manual_seed")


def _patch_checkpointing(module) -> None:
    save, load = module.save_accelerator_state, module.load_accelerator_state
    if _import_hooks.is_marked(save):
        return
    save_signature, load_signature = inspect.signature(save), inspect.signature(load)

    def rng_file(directory, process_index):
        return os.path.join(str(directory), f"{module.RNG_STATE_NAME}_{process_index}.pkl")

    @functools.wraps(save)
    def save_accelerator_state(*args, **kwargs):
        result = save(*args, **kwargs)
        if _tpu_is_accelerator():
            bound = save_signature.bind(*args, **kwargs)
            _add_to_saved(rng_file(bound.arguments["output_dir"], bound.arguments["process_index"]), _TPU_RNG_KEY,
                          torch.tpu.get_rng_state_all(), module.load)
        return result

    @functools.wraps(load)
    def load_accelerator_state(*args, **kwargs):
        result = load(*args, **kwargs)
        if _tpu_is_accelerator():
            bound = load_signature.bind(*args, **kwargs)
            path = rng_file(bound.arguments["input_dir"], bound.arguments["process_index"])
            states = module.load(path) if os.path.isfile(path) else {}
            if _TPU_RNG_KEY in states:
                torch.tpu.set_rng_state_all(states[_TPU_RNG_KEY])
        return result

    module.save_accelerator_state = _import_hooks.mark(save_accelerator_state)
    module.load_accelerator_state = _import_hooks.mark(load_accelerator_state)
    # Accelerator took the names at its import (imported before torch_tpu).
    other = sys.modules.get("accelerate.accelerator")
    if other is not None:
        other.save_accelerator_state = module.save_accelerator_state
        other.load_accelerator_state = module.load_accelerator_state


_HOOKS = {
    "transformers.utils.import_utils": _patch_import_utils,
    "accelerate.state": _patch_state,
    "accelerate.utils.modeling": _patch_modeling,
    "accelerate.utils.dataclasses": _patch_dataclasses,
    "transformers.training_args": _patch_training_args,
    "transformers.pipelines.base": _patch_pipelines,
    "transformers.trainer": _patch_trainer,
    "accelerate.checkpointing": _patch_checkpointing,
}


def install() -> None:
    _import_hooks.install(_HOOKS)
