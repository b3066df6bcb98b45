"""tpu_dist: jobs of 2 (and 4) processes, each owning one virtual device.
Collectives are checked against Gloo on CPU tensors with the same data (or
against the answer computed on CPU where Gloo has no such op). Every job is
bounded by a timeout and its processes are killed on the way out
(dist_utils); a hang fails the test instead of stalling the suite.

The 2-rank collectives job (which then re-initialises its group) and the
CUDA-style training job run in both eager modes (a collective flushes a
pending Fused Eager trace); the 4-rank job, the dead-peer cases and the
launchers are mode_independent (they check process management and
timeouts); the dead-peer and launcher jobs run at once. Jobs share the session's compilation cache directory
(conftest.py sets TORCH_TPU_CACHE_DIR before they inherit the environment)."""

import os
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
import torch.distributed as dist

import torch_tpu  # noqa: F401

from dist_utils import HERE, _job_port, check_job, run_job

WORKER = os.path.join(HERE, "dist_worker.py")


def test_collectives_match_gloo_then_destroy_and_init_again():
    # Every collective against Gloo, point-to-point (send/recv, isend/irecv
    # exchanges, batch_isend_irecv around the ring, transfers that do not
    # pair up), then destroy_process_group() and a new init_process_group in
    # the same processes, twice (the worker checks).
    check_job(run_job([WORKER, "collectives_then_reinit"], nproc=2, timeout=300))


@pytest.mark.mode_independent
def test_4_ranks_collectives_2d_mesh_then_dcp_reshard_to_2(tmp_path):
    # One 4-rank job: every collective (subgroups of non-adjacent ranks,
    # uneven all-to-all over 4 peers), then FSDP2 x tensor parallel on a
    # (2, 2) mesh trained against one process, saved by DCP. Then a 2-rank
    # job loads that checkpoint into FSDP2- and TP-sharded models and
    # compares them with the unsharded original (the workers check).
    ckpt = str(tmp_path / "ckpt")
    check_job(run_job([WORKER, "collectives_mesh", ckpt], nproc=4, timeout=300))
    assert os.path.exists(os.path.join(ckpt, "reference.pt"))
    check_job(run_job([WORKER, "dcp_reshard_load", ckpt], nproc=2, timeout=120))


def _launch(args, timeout):
    """Runs `python -m torch_tpu.distributed.launch --nproc-per-node 2 args`
    in a session of its own, killed whole on the way out; (rc, output)."""
    import sys

    from dist_utils import ROOT, run_session

    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TORCH_TPU_NUM_DEVICES", None)
    if "--print-env" in args:
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    return run_session([sys.executable, "-m", "torch_tpu.distributed.launch", "--nproc-per-node", "2", *args],
                       env, timeout)


@pytest.mark.mode_independent
def test_dead_peers_and_launchers():
    # Six jobs at once, each bounded: they mostly wait (the dead-peer jobs
    # on their 5 s group timeout), so one after another they cost their
    # waits and launches in turn.
    # Dead peers: a survivor must raise DistBackendError naming the
    # collective and group (the worker checks), then every rank exits 0.
    # rank0_dies: rank 0 hosted the job's coordinator. A rank that saw a
    # collective fail waits 3 s, not 10, for its dead peer at exit, as does
    # a rank ending on an uncaught exception (peer_raises).
    # Launchers: `--print-env` prints each rank's variables; a job run by
    # the launcher sees its topology and runs a collective.
    scenarios = ["peer_absent", "peer_dies", "rank0_dies"]
    with ThreadPoolExecutor(len(scenarios) + 2) as pool:
        jobs = [pool.submit(run_job, [WORKER, s], 2, 120, {"TORCH_TPU_EXIT_TIMEOUT_AFTER_ERROR": "3"})
                for s in scenarios]
        # a port pair that none of the jobs here takes (dist_utils hands them out)
        launched = pool.submit(_launch, ["--master-port", str(_job_port()), WORKER, "launched"], 240)
        printed = pool.submit(_launch, ["--print-env"], 120)
        raised = pool.submit(run_job, [WORKER, "peer_raises"], 2, 120, {"TORCH_TPU_EXIT_TIMEOUT_AFTER_ERROR": "3"})
        results = [j.result() for j in jobs]
        raised = raised.result()
        launched, printed = launched.result(), printed.result()
    for scenario, outs in zip(scenarios, results):
        check_job(outs)
        survivor = 1 if scenario == "rank0_dies" else 0
        assert "DistBackendError after" in outs[survivor][1], (scenario, outs[survivor][1][-3000:])

    # peer_raises: rank 1 ends on an uncaught exception (exit 1); rank 0's
    # all_reduce fails because its peer left, not at the group's 60 s timeout
    # (before, the raising rank waited 300 s at exit for the others)
    (rc0, out0), (rc1, out1) = raised
    assert rc1 == 1 and "rank 1's script fails here" in out1, out1[-3000:]
    assert rc0 == 0 and "rank 0: 0 failure(s)" in out0 and "DistBackendError after" in out0, out0[-3000:]
    assert "Timed out" not in out0, out0[-3000:]

    rc, out, err = printed
    assert rc == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 2
    assert "RANK=1" in lines[1] and "WORLD_SIZE=2" in lines[1] and "TORCH_TPU_TOPOLOGY=2x1x1" in lines[1]
    assert "TORCH_TPU_COORDINATOR_ADDRESS=127.0.0.1:29501" in lines[0]

    rc, out, err = launched
    out += err
    assert rc == 0, out[-6000:]
    assert "rank 0: 0 failure(s)" in out and "rank 1: 0 failure(s)" in out
    assert "topology 2x1x1" in out


def _torchrun_2_ranks(args):
    """Runs `torchrun --nproc-per-node 2 args...` (autoloading torch_tpu, in a
    session killed on the way out, 300 s at most); asserts both ranks
    reported no failure."""
    import sys

    from dist_utils import ROOT, free_port_pair, run_session

    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TORCH_DEVICE_BACKEND_AUTOLOAD="1")
    env.pop("TORCH_TPU_NUM_DEVICES", None)
    rc, out, err = run_session([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                                str(free_port_pair()), *args], env, 300, merge_stderr=True)
    assert rc == 0, (out + err)[-8000:]
    assert "rank 0: 0 failure(s)" in out and "rank 1: 0 failure(s)" in out, out[-8000:]


def test_cuda_style_script_under_torchrun(tmp_path):
    # A CUDA training script with "cuda" changed to "tpu", run by plain
    # torchrun: init_process_group() with no backend, DDP (10 steps), FSDP2,
    # tensor parallel, DTensor, a 2-stage pipeline (GPipe and 1F1B), DCP
    # (the worker compares each with one process on CPU to 1e-5); then the
    # checkpoint is loaded here, by one
    # process, into unsharded tpu tensors.
    import torch
    import torch.distributed.checkpoint as dcp

    ckpt = str(tmp_path / "ckpt")
    _torchrun_2_ranks([WORKER, "train", ckpt])

    ref = torch.load(os.path.join(ckpt, "reference.pt"))
    state = {"model": {k: torch.zeros_like(v).to("tpu") for k, v in ref.items()}}
    dcp.load(state, checkpoint_id=ckpt, no_dist=True)
    for k, v in ref.items():
        got = state["model"][k]
        assert got.device.type == "tpu"
        torch.testing.assert_close(got.cpu(), v, atol=1e-6, rtol=0)


@pytest.mark.mode_independent
def test_accelerate_and_trainer_under_torchrun(tmp_path):
    # accelerate's Accelerator and Transformers' Trainer in a CUDA-style
    # script run by plain torchrun: both see a 2-process job on tpu (before,
    # every rank took itself for the only process and trained alone on the
    # whole dataset), wrap the model in DDP, shard the batches and end at one
    # CPU process's weights; the Trainer's evaluate, predict (padded last
    # batches) and save_model agree with CPU; a Trainer with FSDP2
    # (fsdp="full_shard") too (the worker checks; mode_independent: the
    # training itself is covered in both modes by the test above).
    _torchrun_2_ranks([os.path.join(HERE, "dist_hf_worker.py"), str(tmp_path)])


@pytest.mark.skipif(dist.is_nccl_available(), reason="a torch with NCCL keeps the name")
@pytest.mark.filterwarnings("ignore:<TorchTpu/> torch_tpu. this torch has no NCCL")
def test_nccl_names_read_as_tpu_backends():
    """A CUDA script's backend names in a process whose accelerator is tpu
    (torch_tpu/distributed/group_args.py); the launch itself is checked by
    test_cuda_style_script_under_torchrun."""
    from torch_tpu.distributed.group_args import own_device, tpu_backend

    with pytest.warns(UserWarning, match="has no NCCL"):
        assert tpu_backend("nccl") is None
    assert tpu_backend("cpu:gloo,tpu:nccl") == "cpu:gloo,tpu:tpu_dist"
    assert tpu_backend("NCCL") is None
    for kept in (None, "gloo", "tpu_dist", "cpu:gloo,tpu:tpu_dist"):
        assert tpu_backend(kept) == kept
    # outside a job no index but 0 is an alias: torch's own range check speaks
    assert own_device(torch.device("tpu", 0)) == torch.device("tpu", 0)
    assert own_device(0) == torch.device("tpu", 0)
    assert own_device(torch.device("cpu")) == torch.device("cpu")


@pytest.mark.mode_independent
@pytest.mark.parametrize("how", ["env", "tcp", "reference"])
def test_cuda_style_script_under_spawn(how):
    # torch.multiprocessing.spawn, as pytorch/examples' DDP tutorial starts
    # its workers: no torchrun variables; set_device(rank) comes before
    # init_process_group(rank=..., world_size=...) tells the runtime its job
    # (before, rank 1's set_device raised "invalid device index 1", and
    # without it the group refused to form: "this process runs alone").
    # mode_independent: a launch path; the training is the same DDP as above.
    import sys

    from dist_utils import ROOT, run_session

    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TORCH_DEVICE_BACKEND_AUTOLOAD="1")
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCH_TPU_NUM_DEVICES"):
        env.pop(name, None)
    rc, out, err = run_session([sys.executable, os.path.join(HERE, "dist_spawn_worker.py"), str(_job_port()), how],
                               env, 240, merge_stderr=True)
    assert rc == 0 and "spawned job ok" in out, (out + err)[-8000:]


def test_reference_launch_env():
    """torch.tpu.distributed.set_tpu_launch_env's variables (the reference's
    names; its spawn use is in test_cuda_style_script_under_spawn), and
    `python -m torch.tpu.distributed` printing them."""
    import subprocess
    import sys

    from torch_tpu.distributed.launch_env import launch_env

    env = launch_env(2, 4, environ={"MASTER_ADDR": "10.0.0.1"})
    assert env == {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4",
                   "TORCH_TPU_COORDINATOR_ADDRESS": "10.0.0.1:29501", "TORCH_TPU_TOPOLOGY": "8x1x1"}
    one = launch_env(1, 2, environ={})
    assert one["WORLD_SIZE"] == "2" and int(one["MASTER_PORT"]) > 0
    with pytest.raises(ValueError, match="nproc_per_node=0"):
        launch_env(1, 0)
    run_env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}
    out = subprocess.run([sys.executable, "-m", "torch.tpu.distributed", "--nproc-per-node", "2"], env=dict(
        run_env, TORCH_DEVICE_BACKEND_AUTOLOAD="1"), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    printed = dict(line.split("=", 1) for line in out.stdout.split())
    assert printed["WORLD_SIZE"] == "2" and printed["TORCH_TPU_TOPOLOGY"] == "2x1x1"
