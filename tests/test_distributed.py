"""tpu_dist: collectives of jobs of 2 processes, each owning one virtual
device, checked against Gloo on CPU tensors with the same data (or against
the answer computed on CPU where Gloo has no such op). Every job is bounded
by a timeout and its processes are killed on the way out (dist_utils)."""

import os

import pytest

from dist_utils import HERE, check_job, run_job

WORKER = os.path.join(HERE, "dist_worker.py")


def test_collectives_match_gloo():
    outs = run_job([WORKER, "collectives"], nproc=2, timeout=240)
    check_job(outs)
