"""How the processes of a job leave it together.

With jax's recoverable tasks (so that a dead peer fails collectives instead
of aborting every process), jax no longer holds the ranks at a shutdown
barrier, and a rank whose coordinator (rank 0's process) has gone is
aborted. So at exit every rank waits for the others (up to
TORCH_TPU_EXIT_TIMEOUT s, default 300), the others disconnect, and rank 0,
which hosts the coordinator, leaves last. A process that saw a collective
fail (a peer is dead or stuck), or that is ending on an uncaught exception
(its peers may be waiting for it in a collective: the sooner it leaves,
the sooner theirs fail, and torchrun, seeing it exit non-zero, stops the
job), waits only TORCH_TPU_EXIT_TIMEOUT_AFTER_ERROR s (default 10) for the
others."""

import os
import sys
import time

from .. import _C


_raised = False  # an exception reached sys.excepthook: the script is ending on it


def install():
    """At exit, leave the job with the others (registered after jax's own
    atexit hook, so that it runs before it); notes uncaught exceptions."""
    import atexit

    previous = sys.excepthook

    def excepthook(kind, value, traceback):
        global _raised
        _raised = True
        previous(kind, value, traceback)

    sys.excepthook = excepthook
    atexit.register(leave_job)


def leave_job():
    from jax._src import distributed as jd

    state = jd.global_state
    client = state.client
    if client is None:
        return
    timeout_s = int(os.environ.get("TORCH_TPU_EXIT_TIMEOUT", "300"))
    if _C._distributed.job_failed() or _raised:
        timeout_s = int(os.environ.get("TORCH_TPU_EXIT_TIMEOUT_AFTER_ERROR", "10"))
    try:
        client.wait_at_barrier("torch_tpu_exit", timeout_s * 1000)
    except Exception as e:  # noqa: BLE001  (a peer died or is stuck: leave anyway)
        print(f"torch_tpu: rank {state.process_id}: not every rank reached the end of the job: {e}", file=sys.stderr)
        return
    if state.process_id != 0:
        jd.shutdown()  # disconnect while the coordinator still runs
        return
    everyone = list(range(state.num_processes))  # the request must name the asking task too
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if len(client.get_live_nodes(everyone)) <= 1:
                break
        except Exception:  # noqa: BLE001
            break
        time.sleep(0.02)
