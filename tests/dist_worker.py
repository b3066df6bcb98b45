"""One rank of the distributed tests (test_distributed.py runs it as a job
through dist_utils.run_job). `python dist_worker.py SCENARIO`: exits 0 when
every check passed, prints FAIL lines and exits 1 otherwise."""

import datetime
import io
import os
import sys
import time
import warnings

import torch
import torch.distributed as dist

import torch_tpu  # noqa: F401

FAILS = []
W = int(os.environ["WORLD_SIZE"])
RANK = int(os.environ["RANK"])
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.bool]
# The 4-rank job runs every collective on one float, one integer type (with
# the bitwise reductions) and bool: the 2-rank job covers every dtype, and
# what 4 ranks add (group size, subgroups of non-adjacent ranks, uneven
# all-to-all over 4 peers) does not depend on the element type. Each dtype
# costs the 4 processes on 2 cores about 25 collective compiles each.
DTYPES_4 = [torch.float32, torch.int32, torch.bool]


def data(rank, dtype, shape=(3, 5), seed=0):
    """The same rank's data on every rank (so any rank can compute the answer)."""
    g = torch.Generator().manual_seed(1000 * seed + rank)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(-20, 20, shape, generator=g).to(dtype)


def check(name, want, got):
    got = got.cpu()
    ok = want.dtype == got.dtype and want.shape == got.shape and torch.equal(want, got)
    if not ok and (want.dtype.is_floating_point or want.dtype.is_complex) and want.shape == got.shape \
            and want.dtype == got.dtype and W > 2:
        # more than 2 ranks: XLA and the reference may sum in different orders
        ok = torch.allclose(want, got, atol=1e-2, rtol=1e-2) if want.dtype.is_complex else \
            torch.allclose(want.float(), got.float(), atol=1e-2, rtol=1e-2)
    if not ok:
        FAILS.append(f"{name}: want {want.dtype} {tuple(want.shape)} {want.flatten()[:6].tolist()} "
                     f"got {got.dtype} {tuple(got.shape)} {got.flatten()[:6].tolist()}")


def gloo_ok(dtype):
    return dtype != torch.bool


def reduce_all(op, dtype, shape=(3, 5), seed=0):
    """The reduction of every rank's data, computed here."""
    xs = torch.stack([data(r, dtype, shape, seed) for r in range(W)])
    if dtype == torch.bool:
        return {dist.ReduceOp.SUM: xs.any(0), dist.ReduceOp.MAX: xs.any(0), dist.ReduceOp.MIN: xs.all(0),
                dist.ReduceOp.PRODUCT: xs.all(0)}[op]
    if op == dist.ReduceOp.AVG:
        return (xs.double().sum(0) / W).to(dtype)
    raise AssertionError(op)


def collectives(destroy=True):
    dist.init_process_group("cpu:gloo,tpu:tpu_dist", timeout=datetime.timedelta(seconds=60))
    assert dist.get_rank() == RANK and dist.get_world_size() == W
    R = dist.ReduceOp
    for dtype in (DTYPES if W <= 2 else DTYPES_4):
        ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
        if not dtype.is_floating_point and dtype != torch.bool:
            ops += [R.BAND, R.BOR, R.BXOR]
        for op in ops:
            x = data(RANK, dtype)
            t = x.to("tpu")
            dist.all_reduce(t, op=op)
            if gloo_ok(dtype):
                c = x.clone()
                dist.all_reduce(c, op=op)
            else:
                c = reduce_all(op, dtype)
            check(f"all_reduce {op} {dtype}", c, t)
        if dtype.is_floating_point:
            t = data(RANK, dtype).to("tpu")
            dist.all_reduce(t, op=R.AVG)
            check(f"all_reduce AVG {dtype}", reduce_all(R.AVG, dtype), t)

        # a non-contiguous view, reduced in place
        x = data(RANK, dtype, (5, 3))
        base = x.to("tpu")
        view = base.t()
        dist.all_reduce(view, op=R.MAX)
        c = x.clone()
        if gloo_ok(dtype):
            dist.all_reduce(c, op=R.MAX)
        else:
            c = reduce_all(R.MAX, dtype, (5, 3))
        check(f"all_reduce non-contiguous {dtype}", c, base)

        # broadcast from the last rank
        src = W - 1
        x = data(RANK, dtype)
        t = x.to("tpu")
        dist.broadcast(t, src=src)
        check(f"broadcast {dtype}", data(src, dtype), t)

        # all_gather (list) and all_gather_into_tensor
        x = data(RANK, dtype)
        outs = [torch.empty_like(x).to("tpu") for _ in range(W)]
        dist.all_gather(outs, x.to("tpu"))
        for r in range(W):
            check(f"all_gather[{r}] {dtype}", data(r, dtype), outs[r])
        big = torch.empty((W * 3, 5), dtype=dtype, device="tpu")
        dist.all_gather_into_tensor(big, x.to("tpu"))
        check(f"all_gather_into_tensor {dtype}", torch.cat([data(r, dtype) for r in range(W)]), big)
        if gloo_ok(dtype):
            cbig = torch.empty((W * 3, 5), dtype=dtype)
            dist.all_gather_into_tensor(cbig, x)
            check(f"all_gather_into_tensor vs gloo {dtype}", cbig, big)

        # reduce_scatter (list) and reduce_scatter_tensor, SUM (and AVG for floats)
        if dtype != torch.bool:
            full = data(RANK, dtype, (W * 2, 5), seed=1)
            t_out = torch.empty((2, 5), dtype=dtype, device="tpu")
            dist.reduce_scatter_tensor(t_out, full.to("tpu"), op=R.SUM)
            c_out = torch.empty((2, 5), dtype=dtype)
            dist.reduce_scatter_tensor(c_out, full, op=R.SUM)
            check(f"reduce_scatter_tensor SUM {dtype}", c_out, t_out)
            t_out2 = torch.empty((2, 5), dtype=dtype, device="tpu")
            dist.reduce_scatter(t_out2, [c.to("tpu") for c in full.chunk(W)], op=R.MAX)
            c_out2 = torch.empty((2, 5), dtype=dtype)
            dist.reduce_scatter(c_out2, list(full.chunk(W)), op=R.MAX)
            check(f"reduce_scatter list MAX {dtype}", c_out2, t_out2)
            if dtype.is_floating_point:
                t_avg = torch.empty((2, 5), dtype=dtype, device="tpu")
                dist.reduce_scatter_tensor(t_avg, full.to("tpu"), op=R.AVG)
                want = reduce_all(R.AVG, dtype, (W * 2, 5), seed=1)[2 * RANK:2 * RANK + 2]
                check(f"reduce_scatter_tensor AVG {dtype}", want, t_avg)

        # reduce to rank 0, gather to rank W-1, scatter from rank 0
        if dtype != torch.bool:
            x = data(RANK, dtype)
            t = x.to("tpu")
            dist.reduce(t, dst=0, op=R.SUM)
            c = x.clone()
            dist.reduce(c, dst=0, op=R.SUM)
            if RANK == 0:
                check(f"reduce {dtype}", c, t)
        x = data(RANK, dtype)
        gl = [torch.empty_like(x).to("tpu") for _ in range(W)] if RANK == W - 1 else None
        dist.gather(x.to("tpu"), gl, dst=W - 1)
        if RANK == W - 1:
            for r in range(W):
                check(f"gather[{r}] {dtype}", data(r, dtype), gl[r])
        sl = [data(r, dtype, seed=2).to("tpu") for r in range(W)] if RANK == 0 else None
        t = torch.empty((3, 5), dtype=dtype, device="tpu")
        dist.scatter(t, sl, src=0)
        check(f"scatter {dtype}", data(RANK, dtype, seed=2), t)

        # all_to_all_single: equal and uneven splits; all_to_all lists
        x = data(RANK, dtype, (W * 2, 3), seed=3)
        t_out = torch.empty((W * 2, 3), dtype=dtype, device="tpu")
        dist.all_to_all_single(t_out, x.to("tpu"))
        want = torch.cat([data(r, dtype, (W * 2, 3), seed=3)[2 * RANK:2 * RANK + 2] for r in range(W)])
        check(f"all_to_all_single {dtype}", want, t_out)
        # rank r sends r + j + 1 rows to rank j
        def rows(r, j):
            return r + j + 1
        def sent(r):
            return data(r, dtype, (sum(rows(r, j) for j in range(W)), 3), seed=4)
        in_splits = [rows(RANK, j) for j in range(W)]
        out_splits = [rows(i, RANK) for i in range(W)]
        t_out = torch.empty((sum(out_splits), 3), dtype=dtype, device="tpu")
        dist.all_to_all_single(t_out, sent(RANK).to("tpu"), out_splits, in_splits)
        want = []
        for i in range(W):
            off = sum(rows(i, j) for j in range(RANK))
            want.append(sent(i)[off:off + rows(i, RANK)])
        check(f"all_to_all_single uneven {dtype}", torch.cat(want), t_out)
        ins = [data(RANK * W + j, dtype, (j + 1, 2), seed=5).to("tpu") for j in range(W)]
        outs = [torch.empty((RANK + 1, 2), dtype=dtype, device="tpu") for _ in range(W)]
        dist.all_to_all(outs, ins)
        for i in range(W):
            check(f"all_to_all[{i}] {dtype}", data(i * W + RANK, dtype, (RANK + 1, 2), seed=5), outs[i])

    # >= 64 KiB: results go into donated buffers (the output's old one, or a
    # recycled one); repeated so that recycled buffers come back, and a
    # copy of an earlier result taken before the next call must keep it
    # (a buffer something else holds is never given away)
    n = 1 << 15
    donated = torch_tpu.fusion_stats()["donated"]
    for k in range(3):
        x = data(RANK, torch.int32, (n,), seed=20 + k).float()  # integers: every summation order is exact
        t = x.to("tpu")
        dist.all_reduce(t)
        c = x.clone()
        dist.all_reduce(c)
        check(f"large all_reduce {k}", c, t)
        t = x.to("tpu")
        dist.all_reduce(t, op=R.AVG)
        check(f"large all_reduce AVG {k}", c / W, t)  # W is 2 or 4: exact
        if k == 0:
            out = torch.empty(W * n, device="tpu")
            rs = torch.empty(n, device="tpu")
        dist.all_gather_into_tensor(out, x.to("tpu"))
        kept = out.clone()
        cout = torch.empty(W * n)
        dist.all_gather_into_tensor(cout, x)
        check(f"large all_gather_into_tensor {k}", cout, out)
        if k:
            check(f"large all_gather_into_tensor {k}: the copy of call {k - 1}", prev_cout, prev_kept)
        prev_kept, prev_cout = kept, cout
        big = data(RANK, torch.int32, (W * n,), seed=30 + k).float()
        dist.reduce_scatter_tensor(rs, big.to("tpu"))
        crs = torch.empty(n)
        dist.reduce_scatter_tensor(crs, big)
        check(f"large reduce_scatter_tensor {k}", crs, rs)
        lst = [torch.empty(n, device="tpu") for _ in range(W)]
        dist.all_gather(lst, x.to("tpu"))
        check(f"large all_gather list {k}", cout, torch.cat([v.cpu() for v in lst]))
        b = x.to("tpu")
        dist.broadcast(b, src=W - 1)
        check(f"large broadcast {k}", data(W - 1, torch.int32, (n,), seed=20 + k).float(), b)
    check("large all_gather_into_tensor: the last copy", prev_cout, prev_kept)
    # 3 rounds of 6 calls; the first of each shape finds nothing to recycle
    if torch_tpu.fusion_stats()["donated"] - donated < 10:
        FAILS.append(f"large collectives donated {torch_tpu.fusion_stats()['donated'] - donated} result buffers")

    point_to_point()

    # async_op: several in flight, then wait
    ts = [data(RANK, torch.float32, seed=7 + k).to("tpu") for k in range(3)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for w in works:
        assert w.wait()
    fut = dist.all_reduce(ts[0], async_op=True).get_future()
    fut.wait()
    for k in range(3):
        want = sum(data(r, torch.float32, seed=7 + k).double() for r in range(W)).float()
        if k == 0:
            want = (want * W)
        check(f"async all_reduce {k}", want, ts[k])

    # a subgroup (ranks 0 and the last), tpu_dist over its own devices
    members = [0, W - 1]
    sub = dist.new_group(members)
    if RANK in members:
        t = data(RANK, torch.float32, seed=8).to("tpu")
        dist.all_reduce(t, group=sub)
        want = sum(data(r, torch.float32, seed=8) for r in members)
        check("subgroup all_reduce", want, t)

    # complex tensors: torch passes them as real views
    z = torch.complex(data(RANK, torch.float32), data(RANK, torch.float32, seed=9)).to("tpu")
    dist.all_reduce(z)
    want = sum(torch.complex(data(r, torch.float32), data(r, torch.float32, seed=9)) for r in range(W))
    check("complex all_reduce", want, z)

    # the reference's spmd_safe decorator (torch_tpu/distributed/spmd_safe.py): same answer
    @torch.tpu.distributed.spmd_safe
    def scaled_all_reduce(x):
        y = x * 5
        dist.all_reduce(y)
        return y + 1

    got = scaled_all_reduce(data(RANK, torch.float32, seed=10).to("tpu"))
    check("spmd_safe all_reduce", sum(data(r, torch.float32, seed=10) * 5 for r in range(W)) + 1, got)

    # bad input: a clear error naming the collective
    try:
        dist.all_gather_into_tensor(torch.empty(W * 3 + 1, device="tpu"), torch.ones(3, device="tpu"))
        FAILS.append("all_gather_into_tensor with a wrong output size did not raise")
    except Exception as e:  # noqa: BLE001
        if "_allgather_base" not in str(e) or "must hold" not in str(e):
            FAILS.append(f"wrong output size raised an unclear error: {e}")

    # ranks that disagree on shapes, dtypes or the reduce op: every rank raises, none runs the collective
    for what, make in [("shape", lambda: torch.ones(4 + RANK, device="tpu")),
                       ("dtype", lambda: torch.ones(4, device="tpu", dtype=torch.float32 if RANK else torch.int32))]:
        t = make()
        try:
            dist.all_reduce(t)
            FAILS.append(f"all_reduce with a different {what} on each rank did not raise")
        except dist.DistBackendError as e:
            other = 1 if RANK == 0 else 0  # the first rank whose program differs from this one's
            if "different tensors" not in str(e) or "allreduce" not in str(e) or \
                    f"rank {other} called another collective than this rank (rank {RANK}: " not in str(e):
                FAILS.append(f"mismatched {what}: unclear error: {e}")
        check(f"mismatched {what} left the tensor alone", make().cpu(), t)
    try:
        dist.all_reduce(torch.ones(3, device="tpu"), op=R.SUM if RANK else R.MAX)
        FAILS.append("all_reduce with a different op on each rank did not raise")
    except dist.DistBackendError:
        pass
    # async_op: the ranks' check is in the collective's program; wait() reports it
    t = torch.ones(4 + RANK, device="tpu")
    work = dist.all_reduce(t, async_op=True)
    try:
        work.wait()
        FAILS.append("async all_reduce with a different shape on each rank: wait() did not raise")
    except dist.DistBackendError as e:
        if "different tensors" not in str(e):
            FAILS.append(f"async mismatched shape: unclear error: {e}")
    check("async mismatched shape left the tensor alone", torch.ones(4 + RANK), t)
    t = torch.full((3,), float(RANK), device="tpu")
    dist.all_reduce(t)  # the group still works
    check("all_reduce after mismatches", torch.full((3,), float(sum(range(W)))), t)

    dist.barrier()
    assert torch.tpu.device_count() == 1 and torch.tensor([1.0], device="tpu").device == torch.device("tpu:0")
    # a CUDA script's tpu:LOCAL_RANK names the process's device, tpu:0 (LOCAL_RANK is RANK here)
    own = torch.device("tpu", RANK)
    torch.tpu.set_device(own)
    made, moved = torch.ones(2, device=own), torch.arange(3).to(own)
    torch.tpu.synchronize(own)
    saved = io.BytesIO()
    torch.save(made, saved)
    saved.seek(0)
    loaded = torch.load(saved, map_location=f"tpu:{RANK}")  # as CUDA scripts resume a snapshot
    on_own = [made.device, moved.device, torch.tpu.Stream(own).device, torch.Generator(own).device, loaded.device]
    if on_own != [torch.device("tpu:0")] * 5 or torch.tpu.current_device() != 0 \
            or moved.cpu().tolist() != [0, 1, 2] or torch.tpu.memory_allocated(own) != torch.tpu.memory_allocated(0):
        FAILS.append(f"tpu:{RANK} (the local rank) is not tpu:0: {on_own}, current {torch.tpu.current_device()}")
    # and a tensor already there is returned, not copied, as CUDA's .to("cuda:<local rank>") returns it
    for to_own in (lambda t: t.to(own), lambda t: t.to(f"tpu:{RANK}"), lambda t: t.to(RANK),
                   lambda t: t.to(device=own, dtype=t.dtype)):
        if to_own(made) is not made:
            FAILS.append(f".to(tpu:{RANK}) of a tensor on tpu:0 copied it")
    if made.to(own, copy=True) is made or made.to(own, dtype=torch.float64).dtype != torch.float64:
        FAILS.append(".to(tpu:<local rank>, copy=True / another dtype) did not copy")
    # any other index: the error says each process owns tpu:0
    try:
        torch.ones(1, device=f"tpu:{W}")
        FAILS.append(f"tpu:{W} did not raise")
    except RuntimeError as e:
        if "each process owns one device, tpu:0" not in str(e):
            FAILS.append(f"tpu:{W}: unclear error: {e}")
    if destroy:
        dist.destroy_process_group()


def point_to_point():
    """send/recv, isend/irecv and batch_isend_irecv as NCCL users write them
    (docs/design.md, "Point-to-point"), between the pairs 2k <-> 2k+1 and
    around the ring; transfers that do not pair up raise on both ranks."""
    peer = RANK ^ 1
    # blocking send / recv in matching order
    x = data(RANK, torch.float32, seed=6)
    t = torch.empty((3, 5), device="tpu")
    if RANK % 2 == 0:
        dist.send(x.to("tpu"), peer)
        dist.recv(t, peer)
    else:
        dist.recv(t, peer)
        dist.send(x.to("tpu"), peer)
    check("send/recv", data(peer, torch.float32, seed=6), t)

    # the exchange both ranks post alike (isend, then irecv, then wait): posted
    # transfers run in one order on every rank; the send carries the tensor
    # as it was when posted
    src = x.to("tpu")
    got = torch.full((3, 5), -1.0, device="tpu")
    sent = dist.isend(src, peer)
    got_work = dist.irecv(got, peer)
    src.add_(100)
    got_work.wait()
    sent.wait()
    check("isend/irecv exchange", data(peer, torch.float32, seed=6), got)
    # posted, then a collective before the wait: the collective runs them first
    got = torch.empty((3, 5), device="tpu")
    works = [dist.irecv(got, peer), dist.isend(x.to("tpu"), peer)]
    s = torch.ones(2, device="tpu")
    dist.all_reduce(s)
    for w in works:
        w.wait()
    check("isend/irecv across a collective", data(peer, torch.float32, seed=6), got)
    check("all_reduce after posted transfers", torch.full((2,), float(W)), s)

    # batch_isend_irecv around the ring (both directions to one peer on 2
    # ranks), two tensors each way and a bool, against the same exchange
    # on Gloo with cpu tensors (Gloo sends no bool: that one against the data)
    nxt, prv = (RANK + 1) % W, (RANK - 1) % W
    a, b, f = data(RANK, torch.float32, seed=10), data(RANK, torch.int64, (4,), seed=11), data(RANK, torch.bool, (7,))
    ins = [torch.empty_like(a), torch.empty_like(b)]
    ops = [dist.P2POp(dist.irecv, ins[0], prv), dist.P2POp(dist.isend, a, nxt), dist.P2POp(dist.isend, b, nxt),
           dist.P2POp(dist.irecv, ins[1], prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    outs = [torch.empty_like(v, device="tpu") for v in (a, b, f)]
    ops = [dist.P2POp(dist.isend, a.to("tpu"), nxt), dist.P2POp(dist.irecv, outs[0], prv),
           dist.P2POp(dist.irecv, outs[1], prv), dist.P2POp(dist.isend, b.to("tpu"), nxt),
           dist.P2POp(dist.isend, f.to("tpu"), nxt), dist.P2POp(dist.irecv, outs[2], prv)]
    works = dist.batch_isend_irecv(ops)
    for w in works:
        w.wait()
    check("batch_isend_irecv ring f32 vs gloo", ins[0], outs[0])
    check("batch_isend_irecv ring i64 vs gloo", ins[1], outs[1])
    check("batch_isend_irecv ring bool", data(prv, torch.bool, (7,)), outs[2])

    # transfers that do not pair up raise DistBackendError on both ranks at
    # once, none runs, the recv tensor keeps its values: a recv of another
    # size than the send, then both ranks sending first
    receives = RANK % 2 == 1
    for what in ("size", "both send first"):
        t = torch.full((5,), 7.0, device="tpu")
        try:
            if what == "size" and receives:
                dist.recv(t, peer)
            else:
                dist.send(torch.ones(4, device="tpu"), peer)
            FAILS.append(f"point-to-point {what}: no error")
        except dist.DistBackendError as e:
            if "do not pair up" not in str(e) or f"rank {peer} ran another transfer than this rank" not in str(e):
                FAILS.append(f"point-to-point {what}: unclear error: {e}")
        check(f"point-to-point {what}: the recv tensor kept its values", torch.full((5,), 7.0), t)


def _expect_dist_error(what, wait_timeout=None):
    """Runs an all_reduce that cannot complete; prints how it failed.
    `wait_timeout` (s): waited for with Work.wait(timeout), which must give
    up by then although XLA's own collective timeout (the group's) is longer;
    on 64 Ki elements, as XLA:CPU runs a program under 1000 flops within
    `execute` (so the call itself would wait for XLA's timeout)."""
    start = time.monotonic()
    try:
        t = torch.ones(4 if wait_timeout is None else 1 << 16, device="tpu")
        if wait_timeout is None:
            dist.all_reduce(t)
        else:
            dist.all_reduce(t, async_op=True).wait(timeout=datetime.timedelta(seconds=wait_timeout))
        t.cpu()
        FAILS.append(f"{what}: all_reduce returned")
    except dist.DistBackendError as e:
        msg = str(e)
        print(f"rank {RANK}: {what}: DistBackendError after {time.monotonic() - start:.1f} s: {msg[:300]}", flush=True)
        if "allreduce" not in msg or "group" not in msg:
            FAILS.append(f"{what}: the error does not name the collective and group: {msg}")
        if wait_timeout is not None and f"within the timeout of {wait_timeout * 1000} ms" not in msg:
            FAILS.append(f"{what}: not the wait's own timeout (XLA's is longer): {msg}")
    except Exception as e:  # noqa: BLE001
        FAILS.append(f"{what}: raised {type(e).__name__}, not DistBackendError: {e}")


def peer_absent():
    """Rank 1 never joins the next all_reduces: rank 0 raises within a wait's
    own timeout (shorter than XLA's collective timeout, the group's 5 s: the
    waiting thread gives up while XLA still waits), then within the group's."""
    dist.init_process_group("tpu_dist", timeout=datetime.timedelta(seconds=5))
    t = torch.ones(4, device="tpu")
    dist.all_reduce(t)
    check("warm-up all_reduce", torch.full((4,), float(W)), t)
    if RANK == 0:
        _expect_dist_error("absent peer, wait(timeout=1 s)", wait_timeout=1)
        _expect_dist_error("absent peer")
    else:
        time.sleep(8)  # past rank 0's timeouts (1 s, then 5 s), then leave the job


def _one_rank_dies(dying, what):
    """Rank `dying` dies after a first all_reduce: the others' next one raises."""
    dist.init_process_group("tpu_dist", timeout=datetime.timedelta(seconds=5))
    t = torch.ones(4, device="tpu")
    dist.all_reduce(t)
    check("warm-up all_reduce", torch.full((4,), float(W)), t)
    if RANK == dying:
        os._exit(0)
    time.sleep(1)
    _expect_dist_error(what)


def peer_raises():
    """Rank 1's script ends on an uncaught exception after a first all_reduce,
    while rank 0 waits for it in the next one (the group's timeout, 60 s, is
    far off): rank 1 leaves the job after TORCH_TPU_EXIT_TIMEOUT_AFTER_ERROR,
    not the 300 s a clean exit waits for its peers, and rank 0's all_reduce
    fails as its peer left (the test checks that the error is not the
    timeout's)."""
    dist.init_process_group("tpu_dist", timeout=datetime.timedelta(seconds=60))
    t = torch.ones(4, device="tpu")
    dist.all_reduce(t)
    check("warm-up all_reduce", torch.full((4,), float(W)), t)
    if RANK == 1:
        raise RuntimeError("rank 1's script fails here")
    _expect_dist_error("peer raised")


def peer_dies():
    """Rank 1 dies after the first all_reduce: rank 0's next one raises."""
    _one_rank_dies(1, "dead peer")


def rank0_dies():
    """Rank 0, which started the job's coordination service, dies after the
    first all_reduce: the others' next one raises (no abort)."""
    _one_rank_dies(0, "dead rank 0")


def train():
    """A training script written for CUDA with the device string changed, run
    by plain torchrun: set_device(local_rank) and tpu:<local_rank> for every
    tensor, init_process_group(backend="nccl", device_id=...) as CUDA scripts
    pass it (read as torch's default for tpu, with a warning), DDP with
    device_ids=[local_rank], object collectives, rank 0 evaluating
    alone between steps (MPMD), and compiled; then FSDP2, tensor parallel and DTensor on a
    DeviceMesh("tpu"), a two-stage pipeline (torch.distributed.pipelining),
    and a distributed checkpoint saved by TP-sharded parameters and loaded
    into FSDP-sharded ones. Every result is compared
    with one process training on the global batch on CPU (1e-5). The test
    loads the checkpoint in one process too (sys.argv[2] is its folder)."""
    import torch.distributed.checkpoint as dcp
    import torch.nn as nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    from torch.nn.parallel import DistributedDataParallel as DDP

    local_rank = int(os.environ["LOCAL_RANK"])
    torch.tpu.set_device(local_rank)  # was torch.cuda.set_device(local_rank)
    device = torch.device("tpu", local_rank)  # was torch.device("cuda", local_rank): tpu:0 here
    # was backend="nccl", device_id=torch.device("cuda", local_rank)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist.init_process_group(backend="nccl", device_id=device, timeout=datetime.timedelta(seconds=120))
    if not any("has no NCCL; backend 'nccl' is read as the default for tpu" in str(w.message) for w in caught):
        FAILS.append(f"backend='nccl': no warning saying what it became: {[str(w.message) for w in caught]}")
    rank, world = dist.get_rank(), dist.get_world_size()

    def model():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 4))

    def compare(what, net, ref, full=lambda p: p):
        for (name, p), q in zip(net.named_parameters(), ref.parameters()):
            got = full(p.detach()).cpu()
            if got.shape != q.shape or not torch.allclose(got, q.detach(), atol=1e-5, rtol=0):
                FAILS.append(f"{what} {name}: {tuple(got.shape)} vs {tuple(q.shape)}, max diff "
                             f"{(got - q.detach()).abs().max().item() if got.shape == q.shape else 'n/a'}")

    def steps(net, ref, n, per_rank=4, seed=123):
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(seed)
        for step in range(n):
            x = torch.randn(world * per_rank, 8, generator=g)
            y = torch.randn(world * per_rank, 4, generator=g)
            mine = slice(rank * per_rank, (rank + 1) * per_rank)
            opt.zero_grad()
            loss = nn.functional.mse_loss(net(x[mine].to(device)), y[mine].to(device))
            loss.backward()
            opt.step()
            ref_opt.zero_grad()
            nn.functional.mse_loss(ref(x), y).backward()
            ref_opt.step()
            yield step, loss

    # DDP, 10 steps; rank 0 evaluates alone every few steps; losses logged through an object collective
    ref = model()
    # device_ids=[local_rank] as CUDA scripts write it: tpu:0 in every process
    net = DDP(model().to(device), device_ids=[local_rank], output_device=local_rank)
    for step, loss in steps(net, ref, 10):
        if rank == 0 and step % 4 == 0:
            with torch.no_grad():
                net.module(torch.ones(2, 8, device=device)).sum().item()
        losses = [None] * world
        dist.all_gather_object(losses, round(loss.item(), 6))
        if len(losses) != world or None in losses:
            FAILS.append(f"all_gather_object: {losses}")
    compare("ddp", net.module, ref)
    try:
        DDP(model().to(device), device_ids=[local_rank + 1])
        FAILS.append("DDP(device_ids=[local_rank + 1]) was accepted")
    except ValueError as e:
        if "does not name this process's device" not in str(e):
            FAILS.append(f"DDP(device_ids=[local_rank + 1]): {e}")
    # torch.compile of a DDP model (Dynamo runs DDP's hooks in eager), 3 steps
    ref = model()
    net = DDP(model().to(device), device_ids=[local_rank])
    for _ in steps(torch.compile(net, backend="tpu"), ref, 3, seed=11):
        pass
    compare("compiled ddp", net.module, ref)

    dist.barrier(device_ids=[local_rank])  # as CUDA scripts (and accelerate) write it
    try:
        dist.barrier(device_ids=[local_rank + 1])
        FAILS.append("barrier(device_ids=[local_rank + 1]) was accepted")
    except ValueError as e:
        if "does not name this process's device" not in str(e):
            FAILS.append(f"barrier(device_ids=[local_rank + 1]): {e}")
    if "tpu_dist_gloo" not in dist.get_backend_config():
        FAILS.append(f"default backend config {dist.get_backend_config()}")

    mesh = init_device_mesh("tpu", (world,))
    # the reference's helper: on XLA:CPU (no chip coordinates) ranks in order; slices as rank blocks
    topo = torch.tpu.topology_aware_mesh((world,), mesh_dim_names=("dp",))
    if topo.mesh.tolist() != list(range(world)) or topo.device_type != "tpu" or topo.mesh_dim_names != ("dp",):
        FAILS.append(f"topology_aware_mesh: {topo}")
    hybrid = torch.tpu.topology_aware_mesh((1,), (world,))
    if hybrid.mesh.tolist() != list(range(world)):
        FAILS.append(f"topology_aware_mesh with dcn_mesh_shape: {hybrid}")
    full = lambda p: p.full_tensor() if isinstance(p, DTensor) else p  # noqa: E731

    # FSDP2: each Linear and the root sharded, 3 steps
    ref = model()
    net = model().to(device)
    for layer in net:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(net, mesh=mesh)
    for _ in steps(net, ref, 3, seed=7):
        pass
    compare("fsdp2", net, ref, full)

    # FSDP (FSDP1) with device_id=local_rank, as CUDA scripts pass it, 3 steps
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    ref = model()
    net = FSDP(model(), device_id=local_rank)
    for _ in steps(net, ref, 3, seed=9):
        pass
    with FSDP.summon_full_params(net):
        if len(list(net.module.parameters())) != len(list(ref.parameters())):
            FAILS.append(f"fsdp1: {len(list(net.module.parameters()))} parameters unsharded")
        compare("fsdp1", net.module, ref)

    # tensor parallel: column-wise then row-wise, forward and backward on the same input
    torch.manual_seed(1)
    ref = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    tp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    tp.load_state_dict(ref.state_dict())
    tp = parallelize_module(tp.to(device), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(2))
    out = tp(x.to(device))
    out.sum().backward()
    want = ref(x)
    want.sum().backward()
    if not torch.allclose(out.cpu(), want.detach(), atol=1e-5):
        FAILS.append(f"tp forward: max diff {(out.cpu() - want.detach()).abs().max().item()}")
    for (name, p), q in zip(tp.named_parameters(), ref.parameters()):
        g = full(p.grad).cpu()
        if not torch.allclose(g, q.grad, atol=1e-5):
            FAILS.append(f"tp grad {name}: max diff {(g - q.grad).abs().max().item()}")
        if not (isinstance(p, DTensor) and p.device_mesh.device_type == "tpu"):
            FAILS.append(f"tp {name} is not a DTensor on the tpu mesh")

    # DTensor: shard rows, redistribute to replicated
    d = distribute_tensor(torch.arange(4.0 * world * 3).reshape(4 * world, 3).to(device), mesh, [Shard(0)])
    check("dtensor local shard", torch.arange(4.0 * world * 3).reshape(4 * world, 3)[4 * rank:4 * rank + 4],
          d.to_local())
    check("dtensor redistribute", torch.arange(4.0 * world * 3).reshape(4 * world, 3),
          d.redistribute(mesh, [Replicate()]).to_local())

    pipeline(rank, world)

    # distributed checkpoint: saved from the TP-sharded model, loaded into an FSDP-sharded one
    path = sys.argv[2]
    dcp.save({"model": tp.state_dict()}, checkpoint_id=path)
    torch.manual_seed(5)
    other = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(device)
    fully_shard(other, mesh=mesh)
    state = {"model": other.state_dict()}
    dcp.load(state, checkpoint_id=path)
    other.load_state_dict(state["model"])
    compare("dcp TP -> FSDP", other, ref, full)
    if rank == 0:
        torch.save(ref.state_dict(), os.path.join(path, "reference.pt"))
    dist.barrier()
    dist.destroy_process_group()


def pipeline(rank, world):
    """torch.distributed.pipelining: a small MLP split into two stages (one
    per rank), 4 micro-batches under GPipe (its sends are plain isends
    waited at the end) and 1F1B (mixed batch_isend_irecv batches); the last
    stage's losses and every stage's gradients match the whole model on one
    CPU process (1e-5)."""
    import copy

    import torch.nn as nn
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    torch.manual_seed(4)
    whole = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4))
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(8, 8, generator=g), torch.randn(8, 4, generator=g)
    ref = copy.deepcopy(whole)
    loss = nn.functional.mse_loss(ref(x), y)  # the mean of the 4 micro-batches' losses
    loss.backward()
    mine = slice(0, 2) if rank == 0 else slice(2, None)
    for schedule in (ScheduleGPipe, Schedule1F1B):
        device = torch.device("tpu", int(os.environ["LOCAL_RANK"]))  # as a CUDA script's cuda:<local rank>
        part = copy.deepcopy(whole[mine]).to(device)
        stage = PipelineStage(part, rank, world, device)
        pipe = schedule(stage, n_microbatches=4, loss_fn=nn.functional.mse_loss)
        losses = []
        if rank == 0:
            pipe.step(x.to(device))
        else:
            pipe.step(target=y.to(device), losses=losses)
            got = torch.stack([v.detach().cpu() for v in losses]).mean()
            if len(losses) != 4 or not torch.allclose(got, loss.detach(), atol=1e-5, rtol=0):
                FAILS.append(f"{schedule.__name__}: losses {[v.item() for v in losses]}, mean vs {loss.item()}")
        for (name, p), q in zip(part.named_parameters(), ref[mine].parameters()):
            if p.grad is None or not torch.allclose(p.grad.cpu(), q.grad, atol=1e-5, rtol=0):
                FAILS.append(f"{schedule.__name__} grad {name}: "
                             f"{'none' if p.grad is None else (p.grad.cpu() - q.grad).abs().max().item()}")


def _mlp(seed, width=16):
    import torch.nn as nn

    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, 8))


def _compare_full(what, net, ref):
    """Every parameter of net (DTensors gathered whole) equals ref's to 1e-5."""
    from torch.distributed.tensor import DTensor

    for (name, p), (_, q) in zip(net.named_parameters(), ref.named_parameters()):
        got = (p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu()
        if got.shape != q.shape or not torch.allclose(got, q.detach(), atol=1e-5, rtol=0):
            FAILS.append(f"{what} {name}: {tuple(got.shape)} vs {tuple(q.shape)}, max diff "
                         f"{(got - q.detach()).abs().max().item() if got.shape == q.shape else 'n/a'}")


def collectives_then_reinit():
    """The 2-rank job: every collective, then destroy_process_group and new
    groups in the same processes (one job instead of two launches)."""
    collectives()
    reinit()


def collectives_mesh():
    """The 4-rank job: every collective (as `collectives`), then a 2-D mesh
    (data parallel x tensor parallel) trained a few steps against one process
    on CPU, whose sharded state is saved with torch.distributed.checkpoint to
    sys.argv[2] for a 2-rank job to load (dcp_reshard_load)."""
    collectives(destroy=False)  # the same group goes on (a new TCP store on the same port would race)
    mesh_2d(sys.argv[2])


def mesh_2d(path):
    """FSDP2 over "dp" of a model tensor-parallel over "tp" (Colwise then
    Rowwise), on init_device_mesh("tpu", (2, 2)): 3 SGD steps on each dp
    rank's half of the global batch (the tp ranks of a dp rank see the same
    half) match one process on CPU training on the whole batch, to 1e-5.
    The trained, 2-D sharded state dict is then saved by DCP (4 ranks)."""
    import torch.distributed.checkpoint as dcp
    import torch.nn as nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    if not dist.is_initialized():
        dist.init_process_group(timeout=datetime.timedelta(seconds=120))
    mesh = init_device_mesh("tpu", (2, 2), mesh_dim_names=("dp", "tp"))
    # the reference's helper lays the same 2x2 grid out on the topology (XLA:CPU: ranks in order)
    topo = torch.tpu.topology_aware_mesh((2, 2), mesh_dim_names=("dp", "tp"))
    if topo.mesh.tolist() != mesh.mesh.tolist() or topo.mesh_dim_names != ("dp", "tp"):
        FAILS.append(f"topology_aware_mesh((2, 2)): {topo} vs init_device_mesh's {mesh}")
    dp, tp = mesh["dp"], mesh["tp"]
    dp_rank = dp.get_local_rank()

    ref = _mlp(11)
    net = parallelize_module(_mlp(11).to("tpu"), tp, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    for layer in (net[0], net[2]):
        fully_shard(layer, mesh=dp)
    fully_shard(net, mesh=dp)
    w = net[0].weight
    if not (isinstance(w, DTensor) and w.device_mesh.ndim == 2 and w.device_mesh.device_type == "tpu"
            and isinstance(w.placements[1], Shard)):
        FAILS.append(f"2-D weight: {type(w).__name__} {getattr(w, 'placements', None)}")
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(3)
    per_rank = 4
    for _ in range(3):
        x = torch.randn(2 * per_rank, 8, generator=g)
        y = torch.randn(2 * per_rank, 8, generator=g)
        mine = slice(dp_rank * per_rank, (dp_rank + 1) * per_rank)
        opt.zero_grad()
        nn.functional.mse_loss(net(x[mine].to("tpu")), y[mine].to("tpu")).backward()
        opt.step()
        ref_opt.zero_grad()
        nn.functional.mse_loss(ref(x), y).backward()
        ref_opt.step()
    _compare_full("2-D mesh (dp x tp)", net, ref)

    dcp.save({"model": net.state_dict()}, checkpoint_id=path)
    if RANK == 0:
        torch.save(ref.state_dict(), os.path.join(path, "reference.pt"))
    dist.barrier()
    dist.destroy_process_group()


def dcp_reshard_load():
    """A 2-rank job loading the checkpoint 4 ranks saved (sys.argv[2],
    sharded over a 2x2 mesh: FSDP2 x TP) into an FSDP2-sharded model on 2
    ranks, initialised otherwise on each rank: it equals the unsharded
    original (resharding from 4 shards of a 2-D layout to 2 of a 1-D one)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    path = sys.argv[2]
    dist.init_process_group(timeout=datetime.timedelta(seconds=120))
    mesh = init_device_mesh("tpu", (W,))
    ref = _mlp(0)
    ref.load_state_dict(torch.load(os.path.join(path, "reference.pt")))
    net = _mlp(5 + RANK).to("tpu")  # other values on every rank: the load must set them all
    for layer in (net[0], net[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(net, mesh=mesh)
    state = {"model": net.state_dict()}
    dcp.load(state, checkpoint_id=path)
    net.load_state_dict(state["model"])
    _compare_full("4 -> 2 ranks, FSDP2", net, ref)
    dist.barrier()
    dist.destroy_process_group()


def reinit():
    """destroy_process_group, then a new init_process_group in the same process."""
    import tempfile

    for k in range(2):
        # A file store per group: re-creating the TCP store on one port races
        # (a fast rank can reach the old store before it is gone), with any backend.
        path = os.path.join(tempfile.gettempdir(), f"torch_tpu_reinit_{os.environ['MASTER_PORT']}_{k}")
        dist.init_process_group("cpu:gloo,tpu:tpu_dist", init_method=f"file://{path}", rank=RANK, world_size=W,
                                timeout=datetime.timedelta(seconds=60))
        t = torch.full((3,), float(RANK + k), device="tpu")
        dist.all_reduce(t)
        check(f"all_reduce in group {k}", torch.full((3,), float(sum(r + k for r in range(W)))), t)
        dist.destroy_process_group()


def launched():
    """Run by `python -m torch_tpu.distributed.launch`: one all_reduce."""
    dist.init_process_group()
    t = torch.full((2,), float(RANK + 1), device="tpu")
    dist.all_reduce(t)
    check("launched all_reduce", torch.full((2,), float(W * (W + 1) // 2)), t)
    print(f"rank {RANK}: topology {os.environ.get('TORCH_TPU_TOPOLOGY')}", flush=True)
    dist.destroy_process_group()


def report_and_exit():
    """Prints this rank's FAIL lines and count; exits 1 if any."""
    for f in FAILS:
        print(f"FAIL rank {RANK}: {f}", flush=True)
    print(f"rank {RANK}: {len(FAILS)} failure(s)", flush=True)
    sys.exit(1 if FAILS else 0)


def main():
    globals()[sys.argv[1]]()
    report_and_exit()


if __name__ == "__main__":
    main()
