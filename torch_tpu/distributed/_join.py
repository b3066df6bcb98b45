"""How a process joins the job's coordination service (jax's distributed
runtime), called by the runtime before any XLA backend exists.

What ``jax.distributed.initialize`` does for our case (the coordinator's
address, process count and id are given; no cluster detection), with one
difference: rank 0 does not host the service in its own process but starts
it in a child (_coordinator.py). jax's client terminates its process
(SIGABRT) as soon as it loses the service, so with the service inside rank 0
every survivor of a dead rank 0 was aborted without a Python error (jax's
client takes a callback instead, but cannot hand it the error: the binding
has no conversion for it). With the service outliving rank 0, a dead rank 0
is a dead peer like any other: collectives with it fail and tpu_dist raises
DistBackendError.
"""

import atexit
import os
import subprocess
import sys


def join(coordinator_address, num_processes, process_id, initialization_timeout, heartbeat_timeout_seconds,
         local_device_ids=None, shutdown_timeout_seconds=300):
    import jax
    from jax._src import distributed as jd
    from jax._src.lib import _jax

    if local_device_ids:  # a GPU process owns the chip of its local rank (as jax.distributed.initialize does)
        visible = ",".join(str(i) for i in local_device_ids)
        jax.config.update("jax_cuda_visible_devices", visible)
        jax.config.update("jax_rocm_visible_devices", visible)

    state = jd.global_state
    if state.client is not None:
        raise RuntimeError("torch_tpu: this process already joined a jax distributed job")
    state.coordinator_address = coordinator_address
    state.process_id = process_id
    state.num_processes = num_processes
    if process_id == 0:
        _start_coordinator("[::]:" + coordinator_address.rsplit(":", 1)[1], num_processes, heartbeat_timeout_seconds,
                           shutdown_timeout_seconds)
    state.client = _jax.get_distributed_runtime_client(
        coordinator_address, process_id, init_timeout=initialization_timeout, use_compression=True,
        heartbeat_timeout=heartbeat_timeout_seconds)
    state.client.connect()


_coordinator = None


def _start_coordinator(bind, num_processes, heartbeat_s, shutdown_s):
    """Starts the service's process; it lives until this process's end of its
    stdin closes (see _coordinator.py). Same process group as this one, so
    whoever kills the job's processes by group kills it too."""
    global _coordinator
    # after rank 0 died: long enough for the survivors' collectives to time out and their exits to finish
    grace = os.environ.get("TORCH_TPU_COORDINATOR_GRACE", "120")
    _coordinator = subprocess.Popen(
        [sys.executable, "-m", "torch_tpu.distributed._coordinator", bind, str(num_processes), str(heartbeat_s),
         str(shutdown_s), grace], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    atexit.register(stop_coordinator)


def stop_coordinator():
    """A normal exit of rank 0 (the others have left): the service stops a
    moment after this process (jax's own exit hook, which runs after this
    one, still disconnects from it)."""
    global _coordinator
    if _coordinator is None:
        return
    try:
        _coordinator.stdin.write(b"bye")
        _coordinator.stdin.close()
    except OSError:  # it is gone already
        pass
    _coordinator = None
