"""A script that used tpu and then dies of an uncaught Python exception exits
like a CPU script: status 1, its traceback, and nothing from C++ after it
("terminate called without an active exception" was reported twice: from a
thread outliving the interpreter, and from torch's autograd worker taking
the GIL during finalisation, which the runtime's exit hook now prevents;
XLA's and jax's threads are shut down by jax's own exit hooks). Each
scenario leaves work in
flight at the moment of the exception: a pending Fused Eager trace, queued
programs, non-blocking transfers, a compiled graph."""

import subprocess
import sys

import pytest

PRELUDE = "import torch, torch_tpu\nx = torch.randn(64, 64, device='tpu')\n"

SCENARIOS = {
    "programs_in_flight": "ys = [x @ x for _ in range(50)]\n",
    "fused_trace_pending": "torch_tpu.eager_mode('fused')\ny = (x * 2).relu().sum(0)\n",
    "transfers_in_flight": "hs = [(x + i).to('cpu', non_blocking=True) for i in range(8)]\n",
    "compiled_graph": "f = torch.compile(lambda a: (a @ a).tanh(), backend='tpu')\ny = f(x)\n",
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_uncaught_exception_exits_cleanly(name):
    code = PRELUDE + SCENARIOS[name] + "raise ValueError('the script failed: %s')\n" % name
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert run.returncode == 1, (run.returncode, run.stderr[-3000:])
    tail = run.stderr.rstrip().splitlines()[-1]
    assert tail == "ValueError: the script failed: %s" % name, run.stderr[-3000:]
    assert "terminate called" not in run.stderr and "Aborted" not in run.stderr, run.stderr[-3000:]


def test_autograd_drain_waits_for_the_tpu_worker():
    """The exit hook (python/exit_bindings.cpp) sends a backward through the
    tpu autograd worker: it returns once the worker has served everything
    queued before it, and leaves autograd usable."""
    import torch
    import torch_tpu

    w = torch.randn(8, 8, device="tpu", requires_grad=True)
    (w @ w).sum().backward()
    torch_tpu._C._drain_autograd_threads()
    first = w.grad.clone()
    w.grad = None
    (w @ w).sum().backward()
    torch.testing.assert_close(w.grad.cpu(), first.cpu())
