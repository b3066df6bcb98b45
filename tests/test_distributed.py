"""tpu_dist: jobs of 2 (and 4) processes, each owning one virtual device.
Collectives are checked against Gloo on CPU tensors with the same data (or
against the answer computed on CPU where Gloo has no such op). Every job is
bounded by a timeout and its processes are killed on the way out
(dist_utils); a hang fails the test instead of stalling the suite."""

import os

import pytest

from dist_utils import HERE, check_job, run_job

WORKER = os.path.join(HERE, "dist_worker.py")


def test_collectives_match_gloo():
    check_job(run_job([WORKER, "collectives"], nproc=2, timeout=240))


def test_collectives_match_gloo_4_ranks():
    # 4 ranks: subgroups of non-adjacent ranks, uneven all-to-all over 4 peers
    check_job(run_job([WORKER, "collectives"], nproc=4, timeout=300))


@pytest.mark.parametrize("scenario", ["peer_absent", "peer_dies"])
def test_missing_or_dead_peer_raises(scenario):
    # The group's timeout is 5 s; rank 0 must raise DistBackendError naming
    # the collective and group (the worker checks), then every rank exits 0.
    outs = run_job([WORKER, scenario], nproc=2, timeout=120)
    check_job(outs)
    assert "DistBackendError after" in outs[0][1]
