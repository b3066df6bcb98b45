"""CI slice of PyTorch's ModuleInfo suite (tools/opinfo_report.py --modules
runs all of module_db): a fixed list of module_db entries, the first few
samples of each, modules built on CPU and deep-copied to tpu, float32
forward and backward (parameter and input gradients) against CPU, in
training and (where the entry says they differ) eval mode, eval also under
no_grad (PyTorch's inference fast paths)."""

import pytest

from opinfo import module_harness

ENTRIES = {
    # entry: samples (the first N of the entry's module_inputs_func)
    "nn.LSTM": 6,          # bias, batch_first, bidirectional, proj_size vary across samples
    "nn.GRU": 6,           # incl. packed sequences
    "nn.RNN": 4,
    "nn.LSTMCell": 2,
    "nn.GRUCell": 2,
    "nn.LazyConv2d": 2,
    "nn.FractionalMaxPool3d": 4,
    "nn.TransformerEncoderLayer": 3,
    "nn.Linear": 2,
    "nn.BatchNorm2d": 2,
}

_TABLE = module_harness.all_entries()


@pytest.mark.parametrize("name", list(ENTRIES))
def test_entry(name):
    assert name in _TABLE, f"{name} is not a module_db entry in this PyTorch"
    result = module_harness.run_entry(_TABLE[name], name, dtypes=("float32",), max_samples=ENTRIES[name])
    r = result["float32"]
    failures = {k: v["detail"] for k, v in r.items() if v["status"] == "fail"}
    assert not failures, failures
    assert r["forward"]["status"] == "pass", r
