"""What Dynamo and Inductor are told about the tpu device.

Imported only when Dynamo's device-interface module (or Inductor's code
generator table) loads (dynamo_backend.py registers it there), never at
`import torch`.

- `TpuDeviceInterface`: Dynamo's device interface for `tpu`, on torch.tpu
  (Dynamo's built-in entry for "tpu" describes the reference backend: device
  0 only, no float64).
- `InductorRefusal`: Inductor's scheduling / wrapper code generator for
  `tpu`. Inductor's own tpu path emits Pallas code that imports the reference
  backend's private modules; on our tensors it would fail deep inside with
  "No module named 'torch_tpu._internal'". This one fails at once and says
  what to use instead.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import torch
from torch._dynamo.device_interface import DeviceInterface

from . import device_module as tpu
from . import streams

INDUCTOR_MESSAGE = (
    "torch_tpu: Inductor cannot compile graphs on tpu tensors. Use torch.compile(model, backend=\"tpu\") "
    "(the default when no backend is given and the inputs are on tpu).")


class TpuDeviceInterface(DeviceInterface):
    device = tpu.device
    Event = streams.Event
    Stream = streams.Stream

    class Worker:
        @staticmethod
        def set_device(device: int) -> None:
            tpu.set_device(device)

        @staticmethod
        def current_device() -> int:
            return tpu.current_device()

        @staticmethod
        def get_device_properties(device: torch.types.Device = None) -> Any:
            props = tpu.get_device_properties(device)
            return namedtuple("TpuProperties", ["name", "total_memory", "index", "multi_processor_count"])(
                props.name, props.total_memory, props.index, 1)

    @staticmethod
    def current_device() -> int:
        return tpu.current_device()

    @staticmethod
    def set_device(device: torch.types.Device) -> None:
        tpu.set_device(device)

    @staticmethod
    def exchange_device(device: int) -> int:
        prev = tpu.current_device()
        if device != prev:
            tpu.set_device(device)
        return prev

    maybe_exchange_device = exchange_device

    @staticmethod
    def device_count() -> int:
        return tpu.device_count()

    @staticmethod
    def is_available() -> bool:
        return tpu.is_available()

    @staticmethod
    def stream(stream: torch.Stream) -> Any:
        return tpu.stream(stream)

    @staticmethod
    def current_stream() -> torch.Stream:
        return tpu.current_stream()

    @staticmethod
    def set_stream(stream: torch.Stream) -> None:
        tpu.set_stream(stream)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        pass  # one stream per device (streams.py)

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return 0

    @staticmethod
    def synchronize(device: torch.types.Device = None) -> None:
        tpu.synchronize(device)

    @classmethod
    def get_device_properties(cls, device: torch.types.Device = None) -> Any:
        return cls.Worker.get_device_properties(device)

    @staticmethod
    def get_compute_capability(device: torch.types.Device = None) -> str:
        return ""

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True

    @staticmethod
    def memory_allocated(device: torch.types.Device = None) -> int:
        return tpu.memory_allocated(device)


class _Refuse(type):
    # Inductor first asks the scheduling class for its features
    # (`get_backend_features`, `supports_caching`, ...): any such question
    # raises, so the refusal comes before any lowering work.
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError(INDUCTOR_MESSAGE)


class InductorRefusal(metaclass=_Refuse):
    """Stands for Inductor's tpu scheduling and wrapper code generators:
    asking either anything, or constructing it, raises INDUCTOR_MESSAGE."""

    def __init__(self, *args: Any, **kwargs: Any):
        raise RuntimeError(INDUCTOR_MESSAGE)

    @classmethod
    def create(cls, *args: Any, **kwargs: Any):
        raise RuntimeError(INDUCTOR_MESSAGE)
