"""torch.tpu.Stream / Event: PyTorch's generic torch.Stream and torch.Event
on the tpu device.

A tpu device runs its programs in one in-order queue, so there is one stream
per device: every Stream is that queue (stream id 0), waiting on an event or
another stream is already implied by issue order, and recording an event
waits for the work queued before it and notes the time. query, synchronize
and elapsed_time are therefore exact; the price is a wait per record."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["Stream", "Event", "current_stream", "default_stream", "set_stream", "stream", "StreamContext"]


def _device(device: Any = None) -> torch.device:
    from .device_module import _index

    return torch.device("tpu", _index(device))


class Stream(torch.Stream):
    """A tpu stream: the device's in-order queue."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
        if "stream_id" in kwargs:  # torch.Stream's own (stream_id, device_index, device_type) form
            kwargs["device_type"] = torch._C._get_privateuse1_backend_name() and kwargs.get("device_type", 20)
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=_device(device), priority=priority)

    def wait_event(self, event: "Event") -> None:
        event.wait(self)

    def wait_stream(self, stream: torch.Stream) -> None:
        # Programs run in issue order on the device's one queue.
        pass

    def record_event(self, event: "Event | None" = None) -> "Event":
        if event is None:
            event = Event()
        event.record(self)
        return event

    def __repr__(self):
        return f"<torch.tpu.Stream device={self.device} stream_id={self.stream_id}>"


class _EventMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Event) and obj.device.type == "tpu"


class Event(metaclass=_EventMeta):
    """A point in a tpu stream (enable_timing=True for elapsed_time).

    Creates a torch.Event on the tpu device (PyTorch's Event methods accept
    only that exact type): record(stream=None), wait(stream=None), query(),
    synchronize(), elapsed_time(end)."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        if interprocess:
            raise NotImplementedError("torch.tpu.Event: interprocess events are not supported")
        return torch.Event("tpu", enable_timing=enable_timing, blocking=blocking)


def current_stream(device: Any = None) -> Stream:
    return Stream(device)  # the device's one queue


def default_stream(device: Any = None) -> Stream:
    return current_stream(device)


def set_stream(stream: torch.Stream) -> None:
    if stream is not None and stream.device.type != "tpu":
        raise ValueError(f"expected a tpu stream, got one on {stream.device}")


class StreamContext:
    """`with torch.tpu.stream(s):` — work goes to `s` (the device's queue)."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self.prev = None

    def __enter__(self):
        if self.stream is not None:
            from .device_module import device

            self.prev = device(self.stream.device)
            self.prev.__enter__()
        return self.stream

    def __exit__(self, *exc):
        if self.prev is not None:
            self.prev.__exit__(*exc)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    return StreamContext(stream)
