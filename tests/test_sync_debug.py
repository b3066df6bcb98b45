"""torch.tpu.set_sync_debug_mode, as torch.cuda's: the host's waits for the
device are reported (warned or raised); work that only queues programs is not."""
import warnings

import pytest
import torch

import torch_tpu  # noqa: F401


@pytest.fixture
def mode():
    yield torch.tpu.set_sync_debug_mode
    torch.tpu.set_sync_debug_mode("default")


def _waits(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught if "synchronizing tpu operation" in str(w.message)]


def test_warn_names_each_wait_and_nothing_else(mode):
    x = torch.arange(6.0, device="tpu")
    mode("warn")
    assert torch.tpu.get_sync_debug_mode() == 1

    def queued():
        y = torch.relu(x * 2 - 3)
        y.add_(1)
        torch.tpu.synchronize()  # asked for: not reported, as on CUDA
    assert _waits(queued) == []
    assert len(_waits(lambda: x.sum().item())) == 1
    assert "copy of a tpu tensor to the host" in _waits(lambda: x.cpu())[0]
    assert _waits(lambda: x.nonzero()) and _waits(lambda: x[x > 2])
    mode("default")
    assert _waits(lambda: x.cpu()) == []


def test_error_raises_before_the_wait_and_loses_nothing(mode):
    x = torch.arange(6.0, device="tpu")
    mode(2)
    with pytest.raises(RuntimeError, match="synchronizing tpu operation"):
        x.cpu()
    with pytest.raises(RuntimeError, match="synchronizing tpu operation"):
        x.max().item()
    mode(0)
    assert x.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_bad_mode_is_refused(mode):
    with pytest.raises(RuntimeError, match="expected one of"):
        mode("loud")
    with pytest.raises(RuntimeError, match="invalid sync debug mode 3"):
        mode(3)
    assert torch.tpu.get_sync_debug_mode() == 0
