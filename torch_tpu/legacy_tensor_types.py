"""`torch.tpu.FloatTensor` and the other legacy tensor type classes, as
`torch.cuda.FloatTensor` and its siblings.

torch's own classes are C++ `torch.tensortype` objects that PyTorch makes
only for its built-in backends, so these are Python classes with a small
metaclass that gives them the same behaviour:

- `isinstance(x, torch.tpu.FloatTensor)` is true exactly for a strided
  float32 tensor on a tpu device (any torch.Tensor subclass, as torch's
  check);
- calling the class is torch's legacy constructor for that dtype on the
  current tpu device: `FloatTensor(2, 3)` (uninitialised), `FloatTensor([1.,
  2.])`, `FloatTensor(torch.Size([2]))`, `FloatTensor()`,
  `FloatTensor(other_tpu_float_tensor)`; it is `Tensor.new` of an empty tpu
  tensor of that dtype, which PyTorch accepts for a PrivateUse1 device;
- the class reads like torch's: `dtype`, `layout`, `is_sparse`,
  `is_sparse_csr`, `is_cuda` (False), `is_xpu` (False), and `is_tpu` (True).

`x.type(torch.tpu.FloatTensor)` works because Tensor.type reads a type
object's C-level name (`tp_name`), which is the full "torch.tpu.FloatTensor"
here, as for torch's C++ classes; `__name__` still reads "FloatTensor".
Nothing here starts the device until a class is called.
"""

from __future__ import annotations

import torch

__all__ = [
    "BFloat16Tensor", "BoolTensor", "ByteTensor", "CharTensor", "DoubleTensor",
    "FloatTensor", "HalfTensor", "IntTensor", "LongTensor", "ShortTensor",
]


class _LegacyTensorType(type):
    """The metaclass of torch.tpu's legacy tensor type classes."""

    _dtype: torch.dtype

    def __instancecheck__(cls, obj) -> bool:
        return (
            isinstance(obj, torch.Tensor)
            and obj.dtype == cls._dtype
            and obj.layout == torch.strided
            and obj.device.type == "tpu"
        )

    def __call__(cls, *args, **kwargs) -> torch.Tensor:
        return torch.empty(0, dtype=cls._dtype, device="tpu").new(*args, **kwargs)

    # type's own __name__ is the C-level name, "torch.tpu.FloatTensor";
    # torch's classes read "FloatTensor".
    @property
    def __name__(cls) -> str:
        return cls.__qualname__

    @property
    def dtype(cls) -> torch.dtype:
        return cls._dtype

    @property
    def layout(cls) -> torch.layout:
        return torch.strided

    is_sparse = property(lambda cls: False)
    is_sparse_csr = property(lambda cls: False)
    is_cuda = property(lambda cls: False)
    is_xpu = property(lambda cls: False)
    is_tpu = property(lambda cls: True)


def _make(name: str, dtype: torch.dtype) -> _LegacyTensorType:
    doc = f"Legacy constructor and isinstance check for {dtype} tpu tensors, as torch.cuda.{name}."
    # The C-level name is the full dotted one (what Tensor.type reads).
    return _LegacyTensorType(f"torch.tpu.{name}", (), {
        "__module__": "torch.tpu", "__qualname__": name, "__doc__": doc, "_dtype": dtype, "__slots__": (),
    })


BFloat16Tensor = _make("BFloat16Tensor", torch.bfloat16)
BoolTensor = _make("BoolTensor", torch.bool)
ByteTensor = _make("ByteTensor", torch.uint8)
CharTensor = _make("CharTensor", torch.int8)
DoubleTensor = _make("DoubleTensor", torch.float64)
FloatTensor = _make("FloatTensor", torch.float32)
HalfTensor = _make("HalfTensor", torch.float16)
IntTensor = _make("IntTensor", torch.int32)
LongTensor = _make("LongTensor", torch.int64)
ShortTensor = _make("ShortTensor", torch.int16)
