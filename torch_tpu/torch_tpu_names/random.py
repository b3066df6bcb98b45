"""`torch.tpu.random`, as torch.cuda.random: the generator functions that
torch.tpu already has at the top level (torch_tpu/device_module.py), so a
script written for `torch.cuda.random` runs with "cuda" changed to "tpu"
(torch.tpu's `__path__` is this folder)."""

from torch_tpu.device_module import (  # noqa: F401
    get_rng_state, get_rng_state_all, initial_seed, manual_seed, manual_seed_all, seed, seed_all,
    set_rng_state, set_rng_state_all,
)

__all__ = [
    "get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all",
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed",
]
