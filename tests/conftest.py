import atexit
import os
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(__file__))

# The suite never writes into the user's real compilation cache: every run
# gets a fresh, empty cache directory (removed at exit), so results do not
# depend on what an earlier run left behind. TORCH_TPU_TEST_CACHE_DIR names a
# directory to keep instead (CI may reuse one across runs for speed). This
# must happen before the runtime starts, i.e. before any tpu tensor exists.
if os.environ.get("TORCH_TPU_TEST_CACHE_DIR"):
    os.environ["TORCH_TPU_CACHE_DIR"] = os.environ["TORCH_TPU_TEST_CACHE_DIR"]
else:
    _cache_dir = tempfile.mkdtemp(prefix="torch_tpu_test_cache_")
    os.environ["TORCH_TPU_CACHE_DIR"] = _cache_dir
    atexit.register(shutil.rmtree, _cache_dir, ignore_errors=True)

import torch  # noqa: E402  (autoloads torch_tpu)
import torch_tpu  # noqa: E402  (explicit where the entry point is not installed)


def pytest_collection_modifyitems(config, items):
    """`make test` runs the suite twice, once per eager mode. A test marked
    mode_independent checks something the mode cannot change (a launcher's
    environment, a dead peer's timeout): the Fused pass skips it, saying so,
    rather than spending minutes proving the same thing twice."""
    if torch_tpu.get_eager_mode() != "fused":
        return
    skip = pytest.mark.skip(reason="mode_independent: checked in the Strict Eager pass")
    for item in items:
        if "mode_independent" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches emptied and the eager mode restored around a test
    (the torch.compile tests use it through `pytestmark`)."""
    torch._dynamo.reset()
    prev = torch_tpu.get_eager_mode()
    yield
    torch._dynamo.reset()
    torch_tpu.eager_mode(prev)
