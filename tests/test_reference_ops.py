"""torch.tpu.ops (torch_tpu/reference_ops/): the reference backend's custom
ops, each checked against PyTorch on CPU, with its backward where it has
one, and its argument errors. `make test` runs this file in Strict and in
Fused Eager (TPU_DEFER_AND_FUSE=1); ragged_dot and optimization_barrier
also run under torch.compile(backend="tpu"). The collectives run in a
1-rank group here and in a 2-rank job (reference_ops_worker.py)."""

import os

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

import torch_tpu  # noqa: F401  (torch.tpu)
import torch.tpu.ops as ops
from utils import assert_close

# The reference's published names for torch.tpu.ops (its public_api.py).
REFERENCE_NAMES = [
    "align_jagged_to_multiple", "all_gather_dim", "max_pool1d", "max_pool1d_backward", "max_pool2d",
    "max_pool2d_backward", "max_pool3d", "max_pool3d_backward", "optimization_barrier", "ragged_all_to_all",
    "ragged_dot", "ragged_dot_weight_grad", "recv", "reduce_scatter_dim", "send", "sparse_dense_matmul",
    "sparse_dense_matmul_activation_unstack", "sparse_dense_matmul_grad_with_adagrad",
    "sparse_dense_matmul_grad_with_adam", "sparse_dense_matmul_grad_with_sgd", "sparse_dense_matmul_gradient_stack",
    "sparse_gather", "sparse_gather_backward", "sparse_iota", "sparse_map_row", "splash_sdpa", "strip_jagged_padding",
]


def test_every_reference_name_is_reachable_both_ways():
    assert sorted(ops.__all__) == sorted(REFERENCE_NAMES)
    for name in REFERENCE_NAMES:
        assert getattr(torch.tpu.ops, name) is getattr(ops, name)  # attribute access without an import too


# ---- optimization_barrier -------------------------------------------------------------------------


def test_optimization_barrier_passes_values_and_gradients_through():
    a, b = torch.randn(3, 4), torch.arange(5)
    at = a.to("tpu").requires_grad_()
    out = ops.optimization_barrier([at * 2, b.to("tpu")])
    assert isinstance(out, list) and len(out) == 2
    assert_close(out[0], a * 2)
    assert out[1].dtype == torch.int64 and torch.equal(out[1].cpu(), b)
    (out[0] * out[0]).sum().backward()
    assert_close(at.grad, 8 * a)
    one = ops.optimization_barrier((a.to("tpu"),))
    assert isinstance(one, list) and len(one) == 1
    assert ops.optimization_barrier([]) == []


def test_optimization_barrier_is_a_stablehlo_barrier():
    from torch_tpu.jax_op import _OPS

    text = _OPS["reference_optimization_barrier"].lower(repr((2, (0, 1), ())), [((3,), "float32"), ((2, 2), "int64")])
    assert "stablehlo.optimization_barrier" in text


def test_optimization_barrier_bad_input():
    with pytest.raises(TypeError, match="optimization_barrier: inputs must be a list"):
        ops.optimization_barrier(torch.ones(2, device="tpu"))
    with pytest.raises(RuntimeError, match=r"optimization_barrier: inputs\[1\].*must be a tpu tensor"):
        ops.optimization_barrier([torch.ones(2, device="tpu"), torch.ones(2)])


# ---- max pooling ----------------------------------------------------------------------------------

POOL_CASES = [
    # nd, input shape, kernel, stride, padding, dilation, ceil_mode
    (1, (2, 3, 11), [3], [2], [1], [1], False),
    (1, (3, 10), [4], [3], [2], [2], True),
    (2, (2, 3, 9, 8), [3, 2], [2, 2], [1, 0], [1, 1], False),
    (2, (3, 7, 10), [3, 3], [2, 3], [1, 1], [2, 1], True),
    (3, (1, 2, 5, 6, 7), [2, 3, 2], [2, 2, 1], [1, 1, 0], [1, 1, 2], False),
    (3, (2, 5, 5, 6), [3, 2, 2], [2, 2, 2], [0, 1, 1], [1, 1, 1], True),
]
TORCH_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}


@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: f"{c[0]}d-{len(c[1])}D-ceil{c[6]}")
def test_max_pool_forward_and_backward_match_torch(case):
    nd, shape, k, s, p, d, ceil = case
    x = torch.randn(shape)
    xc = x.clone().requires_grad_()
    want = TORCH_POOL[nd](xc, k, s, p, d, ceil_mode=ceil)
    fwd, bwd = getattr(ops, f"max_pool{nd}d"), getattr(ops, f"max_pool{nd}d_backward")
    got = fwd(x.to("tpu"), k, s, p, d, ceil)
    assert got.device.type == "tpu"
    assert_close(got, want.detach())
    g = torch.randn(want.shape)
    want.backward(g)
    assert_close(bwd(g.to("tpu"), x.to("tpu"), k, s, p, d, ceil), xc.grad)


def test_max_pool_ties_and_bfloat16():
    # Equal values in every window (dilated or not): the whole gradient goes
    # to the element torch picks, the window's first.
    x = torch.zeros(1, 1, 6, 6).requires_grad_()
    for d in (1, 2):
        x.grad = None
        F.max_pool2d(x, [2, 2], [2, 2], [0, 0], [d, d]).backward(torch.ones(1, 1, 3 - d + 1, 3 - d + 1))
        got = ops.max_pool2d_backward(torch.ones(1, 1, 4 - d, 4 - d, device="tpu"), x.detach().to("tpu"), [2, 2],
                                      [2, 2], [0, 0], [d, d], False)
        assert torch.equal(got.cpu(), x.grad), d
    xb = torch.randn(2, 3, 8, dtype=torch.bfloat16)
    got = ops.max_pool1d(xb.to("tpu"), [3], [2], [1], [1], False)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got.cpu(), F.max_pool1d(xb, 3, 2, 1))


def test_max_pool_bad_input_names_the_op():
    x = torch.randn(2, 3, 8, 8, device="tpu")
    with pytest.raises(ValueError, match=r"max_pool2d: input must be 3-D or 4-D, got torch.float32 \[2, 3\]"):
        ops.max_pool2d(torch.randn(2, 3, device="tpu"), [2, 2], [2, 2], [0, 0], [1, 1], False)
    with pytest.raises(ValueError, match="max_pool2d: kernel_size must be a sequence of 2 ints"):
        ops.max_pool2d(x, [2], [2, 2], [0, 0], [1, 1], False)
    with pytest.raises(ValueError, match="max_pool1d: padding .* at most half of kernel_size"):
        ops.max_pool1d(torch.randn(2, 8, device="tpu"), [2], [1], [2], [1], False)
    with pytest.raises(ValueError, match="max_pool3d: input .* gives output size"):
        ops.max_pool3d(torch.randn(1, 1, 2, 2, 2, device="tpu"), [3, 3, 3], [1, 1, 1], [0, 0, 0], [1, 1, 1], False)
    with pytest.raises(ValueError, match=r"max_pool2d_backward: grad_output .*\[2, 3, 4, 4\]"):
        ops.max_pool2d_backward(torch.randn(2, 3, 5, 4, device="tpu"), x, [2, 2], [2, 2], [0, 0], [1, 1], False)
    with pytest.raises(RuntimeError, match="max_pool1d: input .* must be a tpu tensor"):
        ops.max_pool1d(torch.randn(2, 8), [2], [1], [0], [1], False)


# ---- ragged_dot ----------------------------------------------------------------------------------


def ragged_dot_cpu(lhs, rhs, group_sizes):
    """The definition, group by group with torch.mm (differentiable on CPU)."""
    out, start = [], 0
    for i, n in enumerate(group_sizes.tolist()):
        out.append(torch.mm(lhs[start:start + n], rhs[i]))
        start += n
    return torch.cat(out)


@pytest.mark.parametrize("sizes", [[3, 0, 5, 2], [10], [0, 0, 7]], ids=["uneven", "one-group", "leading-empty"])
def test_ragged_dot_forward_and_gradients_match_per_group_mm(sizes):
    g = torch.tensor(sizes)
    lhs, rhs = torch.randn(sum(sizes), 6), torch.randn(len(sizes), 6, 5)
    lc, rc = lhs.clone().requires_grad_(), rhs.clone().requires_grad_()
    lt, rt = lhs.to("tpu").requires_grad_(), rhs.to("tpu").requires_grad_()
    want, got = ragged_dot_cpu(lc, rc, g), ops.ragged_dot(lt, rt, g.to("tpu"))
    assert got.device.type == "tpu" and got.shape == want.shape
    assert_close(got.detach(), want.detach())
    up = torch.randn(want.shape)
    want.backward(up)
    got.backward(up.to("tpu"))
    assert_close(lt.grad, lc.grad)
    assert_close(rt.grad, rc.grad)  # an empty group's weight gradient is zero in both
    assert_close(ops.ragged_dot_weight_grad(lhs.to("tpu"), up.to("tpu"), g.to("tpu")), rc.grad)


def test_ragged_dot_out_and_int32_group_sizes_and_bfloat16():
    g = torch.tensor([2, 3], dtype=torch.int32)
    lhs, rhs = torch.randn(5, 4), torch.randn(2, 4, 3)
    out = torch.empty(5, 3, device="tpu")
    res = ops.ragged_dot(lhs.to("tpu"), rhs.to("tpu"), g.to("tpu"), out=out)
    assert res is out
    assert_close(out, ragged_dot_cpu(lhs, rhs, g))
    lb, rb = lhs.bfloat16(), rhs.bfloat16()
    got = ops.ragged_dot(lb.to("tpu"), rb.to("tpu"), g.to("tpu"))
    assert got.dtype == torch.bfloat16
    assert_close(got.float(), ragged_dot_cpu(lb.float(), rb.float(), g), atol=5e-2, rtol=5e-2)


def test_ragged_dot_bad_input_names_the_op_and_shapes():
    lhs, rhs = torch.randn(5, 4, device="tpu"), torch.randn(2, 4, 3, device="tpu")
    g = torch.tensor([2, 3], device="tpu")
    with pytest.raises(ValueError, match=r"ragged_dot: lhs must be 2-D, got torch.float32 \[5, 4, 1\]"):
        ops.ragged_dot(lhs.unsqueeze(-1), rhs, g)
    with pytest.raises(ValueError, match=r"ragged_dot: rhs must be 3-D"):
        ops.ragged_dot(lhs, rhs[0], g)
    with pytest.raises(ValueError, match=r"ragged_dot: group_sizes \[2, 4\] must .* sum to the rows of lhs "
                                         r"\(torch.float32 \[5, 4\].*got sum 6"):
        ops.ragged_dot(lhs, rhs, torch.tensor([2, 4], device="tpu"))
    with pytest.raises(ValueError, match=r"ragged_dot: lhs \(torch.float32 \[5, 4\].*rhs \(torch.bfloat16"):
        ops.ragged_dot(lhs, rhs.bfloat16(), g)
    with pytest.raises(ValueError, match=r"ragged_dot: lhs .* lhs.shape\[1\] == rhs.shape\[1\]"):
        ops.ragged_dot(lhs, torch.randn(2, 3, 3, device="tpu"), g)
    with pytest.raises(TypeError, match="ragged_dot: group_sizes must have an integer dtype"):
        ops.ragged_dot(lhs, rhs, g.float())
    with pytest.raises(ValueError, match=r"ragged_dot: group_sizes .* one entry per group of rhs \(2\)"):
        ops.ragged_dot(lhs, rhs, torch.tensor([1, 1, 3], device="tpu"))
    with pytest.raises(ValueError, match="ragged_dot_weight_grad: lhs .* and grad_output .* same dtype and row"):
        ops.ragged_dot_weight_grad(lhs, torch.randn(4, 3, device="tpu"), g)


# ---- torch.compile --------------------------------------------------------------------------------


def test_ragged_dot_and_barrier_under_torch_compile(fresh_dynamo):
    def step(lhs, rhs, g):
        a, b = ops.optimization_barrier([lhs * 2, rhs])
        return torch.tanh(ops.ragged_dot(a, b, g))

    g = torch.tensor([1, 4, 2])
    lhs, rhs = torch.randn(7, 5), torch.randn(3, 5, 4)
    compiled = torch.compile(step, backend="tpu", fullgraph=True)  # the ops break nothing
    lc, rc = lhs.clone().requires_grad_(), rhs.clone().requires_grad_()
    lt, rt = lhs.to("tpu").requires_grad_(), rhs.to("tpu").requires_grad_()
    want = torch.tanh(ragged_dot_cpu(lc * 2, rc, g))
    got = compiled(lt, rt, g.to("tpu"))
    assert_close(got.detach(), want.detach())
    want.sum().backward()
    got.sum().backward()
    assert_close(lt.grad, lc.grad)
    assert_close(rt.grad, rc.grad)


# ---- splash_sdpa --------------------------------------------------------------------------------


def attention_cpu(q, k, v, allowed, scale=None):
    """Attention written out (softmax of masked scores), heads repeated for GQA."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = (q @ k.transpose(-1, -2)) * (scale if scale is not None else q.shape[-1] ** -0.5)
    return torch.softmax(s.masked_fill(~allowed, float("-inf")), -1) @ v


def _mask(n, kind, window=None):
    i, j = torch.arange(n).unsqueeze(1), torch.arange(n).unsqueeze(0)
    if kind == "window":
        return (j <= i) & (j >= i - window)
    return j <= i if kind == "causal" else torch.ones(n, n, dtype=torch.bool)


@pytest.mark.parametrize("kv_heads,kw,kind", [
    (4, {}, "causal"),
    (4, {"is_causal": False, "scale": 0.3}, "full"),
    (2, {"enable_gqa": True, "local_window_size": 2}, "window"),
    (1, {"enable_gqa": True, "block_q": 128, "q_layout": "SEQ_MINOR", "use_fused_bwd_kernel": False}, "causal"),
], ids=["causal", "full-scaled", "gqa-window", "mqa-tuning-options"])
def test_splash_sdpa_matches_attention_and_its_gradients(kv_heads, kw, kind):
    q, k, v = torch.randn(2, 4, 6, 8), torch.randn(2, kv_heads, 6, 8), torch.randn(2, kv_heads, 6, 8)
    cpu = [t.clone().requires_grad_() for t in (q, k, v)]
    tpu = [t.to("tpu").requires_grad_() for t in (q, k, v)]
    want = attention_cpu(*cpu, _mask(6, kind, kw.get("local_window_size")), kw.get("scale"))
    got = ops.splash_sdpa(*tpu, **kw)
    assert got.shape == want.shape and got.dtype == q.dtype
    assert_close(got.detach(), want.detach(), atol=1e-5, rtol=1e-4)
    up = torch.randn(want.shape)
    want.backward(up)
    got.backward(up.to("tpu"))
    for c, t in zip(cpu, tpu):
        assert_close(t.grad, c.grad, atol=1e-5, rtol=1e-4)


def test_splash_sdpa_bad_input():
    q, k = torch.randn(1, 4, 6, 8, device="tpu"), torch.randn(1, 2, 6, 8, device="tpu")
    with pytest.raises(ValueError, match="splash_sdpa: enable_gqa .False. does not match inputs: n_heads=4, "
                                         "n_kv_heads=2"):
        ops.splash_sdpa(q, k, k)
    with pytest.raises(ValueError, match="splash_sdpa: q must be 4-D"):
        ops.splash_sdpa(q[0], k[0], k[0])
    with pytest.raises(ValueError, match="splash_sdpa: k_layout 'ROW' is not one of"):
        ops.splash_sdpa(q, q, q, k_layout="ROW")
    with pytest.raises(ValueError, match="splash_sdpa: q .* must share dtype"):
        ops.splash_sdpa(q, q.bfloat16(), q)


# ---- jagged -------------------------------------------------------------------------------------


def test_align_and_strip_jagged_padding():
    parts = [torch.randn(3, 4), torch.randn(6, 4), torch.randn(1, 4)]
    nt = torch.nested.nested_tensor([p.to("tpu") for p in parts], layout=torch.jagged)
    padded = ops.align_jagged_to_multiple(nt, 8, padding_value=-1.0)
    assert padded.is_nested and padded.values().shape == (16, 4)
    assert torch.equal(padded.offsets().cpu(), nt.offsets().cpu())
    assert_close(padded.values()[:10], torch.cat(parts))
    assert (padded.values()[10:].cpu() == -1).all()
    assert ops.align_jagged_to_multiple(padded, 8) is padded  # aligned already
    for stripped in (ops.strip_jagged_padding(padded), ops.strip_jagged_padding(padded, valid_tokens=10)):
        assert stripped.values().shape == (10, 4)
        for a, b in zip(stripped.unbind(), parts):
            assert_close(a, b)
    assert ops.strip_jagged_padding(nt) is nt


def test_jagged_bad_input():
    with pytest.raises(TypeError, match="align_jagged_to_multiple: nt must be a torch.jagged NestedTensor"):
        ops.align_jagged_to_multiple(torch.randn(3, 4, device="tpu"))
    nt = torch.nested.nested_tensor([torch.randn(3, 4, device="tpu")], layout=torch.jagged)
    with pytest.raises(ValueError, match="align_jagged_to_multiple: multiple must be a positive int"):
        ops.align_jagged_to_multiple(nt, 0)
    with pytest.raises(ValueError, match=r"strip_jagged_padding: valid_tokens 7 must be an int in \[0, 3\]"):
        ops.strip_jagged_padding(nt, 7)


# ---- SparseCore ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in REFERENCE_NAMES if n.startswith("sparse_")])
def test_sparsecore_ops_raise_naming_the_op(name):
    import inspect

    fn = getattr(ops, name)
    args = [torch.zeros(1, device="tpu")] * len(inspect.signature(fn).parameters)
    with pytest.raises(NotImplementedError, match=f"torch.tpu.ops.{name} is not implemented .*SparseCore"):
        fn(*args)


# ---- collectives in a 1-rank group ------------------------------------------------------------


@pytest.fixture(scope="module")
def one_rank_group():
    assert not dist.is_initialized()
    dist.init_process_group(backend="tpu_dist", rank=0, world_size=1, store=dist.HashStore())
    yield dist.group.WORLD
    dist.destroy_process_group()


def test_all_gather_and_reduce_scatter_dim_one_rank(one_rank_group):
    x = torch.randn(4, 6, 2)
    for dim in (0, 1, -1):
        assert_close(ops.all_gather_dim(x.to("tpu"), dim), x)
        for op in ("sum", "max", "avg"):
            assert_close(ops.reduce_scatter_dim(x.to("tpu"), dim, one_rank_group, op), x)
    i = torch.randint(0, 100, (4, 6))
    assert torch.equal(ops.reduce_scatter_dim(i.to("tpu"), 1, reduce_op="bxor").cpu(), i)


def test_all_gather_dim_under_torch_compile(one_rank_group, fresh_dynamo):
    step = torch.compile(lambda x: ops.reduce_scatter_dim(ops.all_gather_dim(x * 2, 1), 0) + 1, backend="tpu",
                         fullgraph=True)  # functional collectives trace into the graph
    x = torch.randn(2, 3)
    assert_close(step(x.to("tpu")), x * 2 + 1)


def test_collectives_bad_input(one_rank_group):
    x = torch.randn(4, 6, device="tpu")
    with pytest.raises(ValueError, match=r"all_gather_dim: dim 2 is out of range for input torch.float32 \[4, 6\]"):
        ops.all_gather_dim(x, 2)
    with pytest.raises(ValueError, match="reduce_scatter_dim: reduce_op 'mean' is not one of"):
        ops.reduce_scatter_dim(x, 0, reduce_op="mean")
    with pytest.raises(TypeError, match="reduce_scatter_dim: reduce_op 'band' needs an integer input"):
        ops.reduce_scatter_dim(x, 0, reduce_op="band")
    with pytest.raises(ValueError, match="send: rank 3 is not in the default group of 1 ranks"):
        ops.send([x], 3, 0)
    with pytest.raises(ValueError, match="ragged_all_to_all: input_offsets .* one entry per rank .1."):
        ops.ragged_all_to_all(x, x, *[torch.zeros(2, dtype=torch.int64)] * 4, one_rank_group.group_name)


def test_ragged_all_to_all_one_rank(one_rank_group):
    # Rows 1..3 of operand land at row 2 of output; the rest of output stays.
    operand, output = torch.randn(5, 3), torch.randn(6, 3)
    idx = [torch.tensor([v]) for v in (1, 3, 2, 3)]  # input_offsets, send_sizes, output_offsets, recv_sizes
    ot, outt = operand.to("tpu").requires_grad_(), output.to("tpu").requires_grad_()
    got = ops.ragged_all_to_all(ot, outt, *[t.to("tpu") for t in idx], one_rank_group.group_name)
    want = output.clone()
    want[2:5] = operand[1:4]
    assert_close(got.detach(), want)
    up = torch.randn(6, 3)
    got.backward(up.to("tpu"))
    g_op = torch.zeros(5, 3)
    g_op[1:4] = up[2:5]
    g_out = up.clone()
    g_out[2:5] = 0
    assert_close(ot.grad, g_op)
    assert_close(outt.grad, g_out)
    out = torch.zeros(6, 3, device="tpu")
    assert ops.ragged_all_to_all(operand.to("tpu"), output.to("tpu"), *idx, one_rank_group.group_name, out=out) is out
    assert_close(out, want)
    with pytest.raises(ValueError, match="ragged_all_to_all: input_offsets .3. \\+ send_sizes .3. run past"):
        ops.ragged_all_to_all(ot, outt, torch.tensor([3]), *idx[1:], one_rank_group.group_name)


def test_collectives_and_send_recv_in_a_2_rank_job():
    from dist_utils import HERE, check_job, run_job

    check_job(run_job([os.path.join(HERE, "reference_ops_worker.py")], nproc=2, timeout=120))
