import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import torch  # noqa: E402  (autoloads torch_tpu)
import torch_tpu  # noqa: E402,F401  (explicit where the entry point is not installed)
