"""Lets safetensors load onto tpu: `load_file(path, device="tpu")`.

safetensors parses `device` itself (in Rust) against a fixed list of names
(cpu, cuda, mps, npu, xpu, ...), so "tpu" fails before torch sees it. A
device index is accepted and means the current accelerator, which is tpu. So
`safe_open` (which safetensors.torch's load_file and load_model call) is
wrapped to turn a tpu device into its index; every other device passes
through unchanged.

The wrapper replaces `safetensors.safe_open`, so a later `from safetensors
import safe_open` (safetensors.torch, transformers) gets it. safetensors may
be imported before or after torch_tpu (safetensors.torch imports torch,
which loads this package halfway through), hence the import hook.
"""

from __future__ import annotations

import functools

import torch

from . import _import_hooks
from ._import_hooks import is_marked, mark


def _tpu_index(device):
    """The device index for a tpu device ("tpu", "tpu:1", torch.device), else `device`."""
    if isinstance(device, str) and (device == "tpu" or device.startswith("tpu:")):
        device = torch.device(device)
    if isinstance(device, torch.device) and device.type == "tpu":
        return torch.tpu.current_device() if device.index is None else device.index
    return device


def _wrap(original):
    if is_marked(original):
        return original

    @functools.wraps(original)
    def safe_open(filename, framework, *args, **kwargs):
        if args:
            args = (_tpu_index(args[0]),) + tuple(args[1:])
        if "device" in kwargs:
            kwargs["device"] = _tpu_index(kwargs["device"])
        return original(filename, framework, *args, **kwargs)

    mark(safe_open)
    return safe_open


def _patch(module) -> None:
    if hasattr(module, "safe_open"):
        module.safe_open = _wrap(module.safe_open)


def install() -> None:
    # safetensors.torch is patched too: imported before torch_tpu without
    # autoloading, it holds the original.
    _import_hooks.install({"safetensors": _patch, "safetensors.torch": _patch})
