"""Runs a script as a small torchrun-style job of local processes, bounded
by a timeout; every child is killed on the way out, whatever happens."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from torch_tpu.distributed.launch import free_port_pair  # noqa: E402,F401  (one copy, the launcher's)

_ports_lock = threading.Lock()
_ports_given = set()  # jobs may run at once (threads): never two on one port pair


def _job_port():
    with _ports_lock:
        for _ in range(20):
            p = free_port_pair()
            if not {p, p + 1} & _ports_given:
                _ports_given.update((p - 1, p, p + 1))
                return p
    raise RuntimeError("dist_utils: no fresh port pair")


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run_job(args, nproc=2, timeout=120, env=None, kill_rank=None):
    """Runs `python args...` as ranks 0..nproc-1; returns [(rc, output)].

    A rank still running at `timeout` is killed (rc None)."""
    port = _job_port()
    procs = []
    try:
        for r in range(nproc):
            e = dict(os.environ)
            e.update(
                RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc),
                MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), PYTHONPATH=ROOT + os.pathsep + e.get("PYTHONPATH", ""),
                TORCH_DEVICE_BACKEND_AUTOLOAD="1",
            )
            e.pop("TORCH_TPU_NUM_DEVICES", None)
            if env:
                e.update(env)
            procs.append(subprocess.Popen([sys.executable, *args], env=e, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True, start_new_session=True))
        deadline = time.monotonic() + timeout
        outs = []
        for p in procs:
            left = max(0.1, deadline - time.monotonic())
            try:
                out, _ = p.communicate(timeout=left)
                outs.append((p.returncode, out))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                out, _ = p.communicate()
                outs.append((None, out))
        return outs
    finally:
        for p in procs:
            # the whole session: rank 0's coordination service runs in a child
            # that outlives a dead rank 0 for a while (_coordinator.py)
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def run_session(cmd, env, timeout, merge_stderr=False):
    """Runs cmd (a launcher and the ranks it starts) in a session of its
    own and kills the whole session on the way out, whatever happens;
    (returncode, stdout, stderr). A timeout leaves stdout empty and stderr
    "timed out"."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                         text=True, env=env, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out, err = "", "timed out"
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
    return p.returncode, out, err or ""


def check_job(outs):
    """Asserts every rank exited 0, showing their output otherwise."""
    bad = [(r, rc, out) for r, (rc, out) in enumerate(outs) if rc != 0]
    assert not bad, "\n".join(f"--- rank {r} rc={rc}\n{out[-6000:]}" for r, rc, out in bad)
