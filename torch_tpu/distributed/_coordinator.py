"""The job's coordination service (jax's distributed runtime service) in a
process of its own, started by rank 0 (_join.py):

    python -m torch_tpu.distributed._coordinator BIND_ADDRESS NUM_PROCESSES HEARTBEAT_S SHUTDOWN_S GRACE_S

Hosted inside rank 0, the service died with it, and every other rank's jax
client then terminated its process (SIGABRT) without a Python error; jax's
client takes no callback that Python can serve. In its own process the
service outlives rank 0: rank 0 is then one dead (recoverable) task like any
other, and the survivors' collectives with it fail with DistBackendError.

It runs until rank 0 closes its end of the pipe on stdin, then a moment
longer if rank 0 wrote "bye" first (a normal exit: the other ranks have
left, rank 0's own exit still disconnects), otherwise (rank 0 died) GRACE_S
seconds, so that the survivors get their errors and leave through it."""

import sys
import time


def main():
    bind, n, heartbeat, shutdown, grace = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), \
        float(sys.argv[5])
    from jax._src.lib import _jax

    service = _jax.get_distributed_runtime_service(bind, n, heartbeat_timeout=heartbeat, shutdown_timeout=shutdown,
                                                   recoverable=True)
    print("ready", flush=True)
    said = sys.stdin.read()  # until rank 0's end closes
    time.sleep(3 if "bye" in said else grace)
    service.shutdown()


if __name__ == "__main__":
    main()
