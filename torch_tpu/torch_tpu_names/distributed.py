"""`torch.tpu.distributed`, the reference backend's module of launch helpers
(torch.tpu's `__path__` is this folder; torch_tpu/device_module.py).
`python -m torch.tpu.distributed` prints the variables
`set_tpu_launch_env` sets (torch_tpu/distributed/launch_env.py)."""

import sys

from torch_tpu.distributed.launch_env import main, set_tpu_launch_env  # noqa: F401
from torch_tpu.distributed.mesh import topology_aware_mesh  # noqa: F401
from torch_tpu.distributed.spmd_safe import spmd_safe  # noqa: F401

if __name__ == "__main__":
    sys.exit(main())
