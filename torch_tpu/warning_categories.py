"""The reference backend's warning categories: every torch_tpu warning,
from Python or C++, starts with its category's path, so that one filter
text selects it anywhere Python takes one:

    warnings.filterwarnings("ignore", message="<TorchTpu/Performance/")
    PYTHONWARNINGS="error:<TorchTpu/"      pytest -W "ignore:<TorchTpu/"

"<TorchTpu/Performance/" selects Performance and its subcategories,
"<TorchTpu/Performance/>" Performance alone. The prefixes are defined once,
in C++ (csrc/device/warning_prefix.h)."""

from __future__ import annotations

import warnings

from . import _C

__all__ = ["TORCH_TPU", "PERFORMANCE", "UNOPTIMIZED_BUILD", "TCMALLOC", "CORRECTNESS", "API_STAGE",
           "INTERNAL_API", "EXPERIMENTAL_API", "DEPRECATED_API", "get_prefix", "warn"]

_PREFIXES: dict[str, str] = _C._warning_prefixes()
# A category is its name; get_prefix gives its message prefix.
TORCH_TPU, PERFORMANCE, UNOPTIMIZED_BUILD, TCMALLOC, CORRECTNESS = (
    "TORCH_TPU", "PERFORMANCE", "UNOPTIMIZED_BUILD", "TCMALLOC", "CORRECTNESS")
API_STAGE, INTERNAL_API, EXPERIMENTAL_API, DEPRECATED_API = (
    "API_STAGE", "INTERNAL_API", "EXPERIMENTAL_API", "DEPRECATED_API")


def get_prefix(category: str) -> str:
    """The prefix of `category`'s messages ("<TorchTpu/Performance/> ")."""
    try:
        return _PREFIXES[category]
    except KeyError:
        raise ValueError(f"torch_tpu: no warning category {category!r}; one of {sorted(_PREFIXES)}") from None


def warn(message: str, category: str = TORCH_TPU, stacklevel: int = 1) -> bool:
    """`warnings.warn(message)` with `category`'s prefix, as a
    DeprecationWarning for DEPRECATED_API and a UserWarning otherwise.
    `stacklevel` counts from the caller, as warnings.warn's does. Returns
    True (the reference's `warn` returns whether it warned)."""
    kind = DeprecationWarning if category == DEPRECATED_API else UserWarning
    warnings.warn(get_prefix(category) + message, kind, stacklevel=stacklevel + 1)
    return True
