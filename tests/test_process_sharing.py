"""tpu tensors sent between processes (torch_tpu/process_sharing.py): they
travel as copies, land on the same tpu device index, and a tensor that
requires grad is refused with a clear error where it arrives, instead of
the sending feeder thread printing an error while the receiver waits
forever (a DataLoader with spawned workers that returned tpu tensors hung)."""

import pickle
import subprocess
import sys

import pytest
import torch
from multiprocessing.reduction import ForkingPickler

from utils import assert_close


def _through_pickler(t):
    return pickle.loads(ForkingPickler.dumps(t))


def test_a_tpu_tensor_arrives_as_a_copy_on_tpu():
    t = torch.arange(12.0, device="tpu").view(3, 4)[:, 1:]  # a view: its values, not its storage
    got = _through_pickler(t)
    assert got.device == t.device and got.shape == t.shape and got.dtype == t.dtype
    assert_close(got.cpu(), t.cpu(), atol=0, rtol=0)
    got.add_(1)  # a copy: the original is untouched
    assert t.cpu()[0, 0] == 1.0


def test_cpu_tensors_keep_torchs_reducer():
    t = torch.arange(4.0)
    assert torch.equal(_through_pickler(t), t)


@pytest.mark.parametrize("make", [lambda: torch.nn.Parameter(torch.ones(2, device="tpu")),
                                  lambda: torch.ones(2, device="tpu", requires_grad=True)])
def test_tensors_that_require_grad_are_refused_where_they_arrive(make):
    data = ForkingPickler.dumps(make())  # sending works: the error must reach the receiver
    with pytest.raises(RuntimeError, match="cannot be shared with another process"):
        pickle.loads(data)


SCRIPT = r"""
import torch, torch_tpu
from torch.utils.data import DataLoader, Dataset
class D(Dataset):
    def __len__(self): return 8
    def __getitem__(self, i): return torch.full((2,), float(i), device="tpu"), i
if __name__ == "__main__":
    got = []
    # (pin_memory=True refuses batches already on the device, as with CUDA's)
    for x, i in DataLoader(D(), batch_size=4, num_workers=2, multiprocessing_context="spawn", timeout=120):
        assert x.device.type == "tpu", x.device
        got.append((x.cpu(), i))
    ref = [(torch.arange(4.0 * k, 4.0 * k + 4).repeat_interleave(2).view(4, 2), torch.arange(4 * k, 4 * k + 4))
           for k in (0, 1)]
    assert len(got) == 2 and all(torch.equal(a, b) and torch.equal(i, j) for (a, i), (b, j) in zip(got, ref)), got
    print("OK")
"""


@pytest.mark.mode_independent
def test_dataloader_with_spawned_workers_returning_tpu_tensors(tmp_path):
    script = tmp_path / "loader.py"
    script.write_text(SCRIPT)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-3000:]
