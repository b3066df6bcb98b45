"""torch_tpu.jax_op (torch_tpu/jax_op.py, csrc/lowering/jax_call.cpp,
csrc/hlo/embed.cpp): jax.numpy and Pallas functions as torch ops on tpu, in
Strict and Fused Eager and inside torch.compile graphs, with jax.vjp or a
given backward as their autograd."""

import importlib.util
import os

import pytest
import torch

import torch_tpu
from utils import assert_close

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_example():
    spec = importlib.util.spec_from_file_location("pallas_transformer", os.path.join(ROOT, "examples",
                                                                                   "pallas_transformer.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


example = _load_example()


def _scaled_tanh(x, w, scale):
    return jnp.tanh(x @ w) * scale


scaled_tanh = torch_tpu.jax_op("test_scaled_tanh", _scaled_tanh)


def _two_outputs(x):
    return jnp.sin(x), jnp.sum(x * x, axis=-1)


two_outputs = torch_tpu.jax_op("test_two_outputs", _two_outputs)


def test_forward_matches_torch_and_statics_are_keys():
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    got = scaled_tanh(x.to("tpu"), w.to("tpu"), 2.0)
    assert got.device.type == "tpu" and got.shape == (4, 3)
    assert_close(got, torch.tanh(x @ w) * 2.0)
    # Another static value is another program, with its own result.
    assert_close(scaled_tanh(x.to("tpu"), w.to("tpu"), 0.5), torch.tanh(x @ w) * 0.5)


def test_same_shapes_reuse_the_program():
    x, w = torch.randn(4, 8).to("tpu"), torch.randn(8, 3).to("tpu")
    scaled_tanh(x, w, 3.0).cpu()
    _, hits0, misses0 = torch_tpu._C._program_cache_stats()
    scaled_tanh(x * 2, w, 3.0).cpu()
    _, hits1, misses1 = torch_tpu._C._program_cache_stats()
    # The jax op itself hit the cache (the `x * 2` may miss once).
    assert hits1 - hits0 >= 1 and misses1 - misses0 <= 1


def test_views_are_read_through_their_layout():
    # A transposed, offset view: the engine reads the view from the storage
    # buffer before handing it to jax's function.
    base = torch.randn(10, 8)
    xt = base.to("tpu")[2:].t()  # [8, 8], strided
    w = torch.randn(8, 3)
    assert_close(scaled_tanh(xt, w.to("tpu"), 1.0), torch.tanh(base[2:].t() @ w))


def test_several_outputs_give_a_tuple():
    x = torch.randn(3, 5)
    s, q = two_outputs(x.to("tpu"))
    assert_close(s, torch.sin(x))
    assert_close(q, (x * x).sum(-1))


def test_backward_is_jax_vjp():
    x, w = torch.randn(4, 8, requires_grad=True), torch.randn(8, 3, requires_grad=True)
    xt = x.detach().to("tpu").requires_grad_()
    wt = w.detach().to("tpu").requires_grad_()
    (scaled_tanh(xt, wt, 1.5) ** 2).sum().backward()
    (torch.tanh(x @ w) * 1.5).pow(2).sum().backward()
    assert_close(xt.grad, x.grad)
    assert_close(wt.grad, w.grad)


def test_second_derivative_through_vjp_of_vjp():
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    cube = torch_tpu.jax_op("test_cube", lambda v: v ** 3)
    xt = x.detach().to("tpu").requires_grad_()
    (g,) = torch.autograd.grad(cube(xt).sum(), xt, create_graph=True)
    (gg,) = torch.autograd.grad(g.sum(), xt)
    assert_close(g, 3 * x.detach() ** 2)
    assert_close(gg, 6 * x.detach())


def test_integer_outputs_do_not_block_the_backward():
    top = torch_tpu.jax_op("test_max_argmax", lambda x: (jnp.max(x, axis=-1), jnp.argmax(x, axis=-1)))
    x = torch.randn(3, 5, requires_grad=True)
    xt = x.detach().to("tpu").requires_grad_()
    vals, idx = top(xt)
    assert idx.dtype == torch.int64
    vals.sum().backward()
    x.max(-1).values.sum().backward()
    assert_close(idx, x.argmax(-1))
    assert_close(xt.grad, x.grad)


def test_given_backward_is_used():
    # A straight-through estimator: the forward rounds, the backward passes
    # the cotangent through (not the true, zero, derivative).
    st_round = torch_tpu.jax_op("test_st_round", lambda x: jnp.round(x), backward=lambda x, g: g)
    x = torch.tensor([0.2, 1.7, -2.4]).to("tpu").requires_grad_()
    y = st_round(x)
    assert_close(y, torch.tensor([0.0, 2.0, -2.0]))
    (y * torch.tensor([1.0, 2.0, 3.0]).to("tpu")).sum().backward()
    assert_close(x.grad, torch.tensor([1.0, 2.0, 3.0]))


def test_jax_custom_vjp_is_honoured():
    @jax.custom_vjp
    def clip_grad(x):
        return x * 1.0

    clip_grad.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))
    op = torch_tpu.jax_op("test_clip_grad", clip_grad)
    x = torch.randn(4).to("tpu").requires_grad_()
    (op(x) * torch.tensor([0.5, 3.0, -4.0, 1.0]).to("tpu")).sum().backward()
    assert_close(x.grad, torch.tensor([0.5, 1.0, -1.0, 1.0]))


def test_pallas_rms_norm_forward_and_backward():
    x = torch.randn(2, 8, 32, requires_grad=True)
    w = (torch.rand(32) + 0.5).requires_grad_()
    xt = x.detach().to("tpu").requires_grad_()
    wt = w.detach().to("tpu").requires_grad_()
    y = example.rms_norm(xt, wt, 1e-6)
    ref = example.torch_rms_norm(x, w, 1e-6)
    assert_close(y, ref, atol=1e-5, rtol=1e-5)
    g = torch.randn(2, 8, 32)
    y.backward(g.to("tpu"))
    ref.backward(g)
    assert_close(xt.grad, x.grad, atol=1e-5, rtol=1e-5)
    assert_close(wt.grad, w.grad, atol=1e-5, rtol=1e-5)


def test_pallas_attention_forward_and_backward():
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 2, 16, 8, requires_grad=True) for _ in range(3))
    qt, kt, vt = (z.detach().to("tpu").requires_grad_() for z in (q, k, v))
    out = example.attention(qt, kt, vt)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_close(out, ref, atol=1e-5, rtol=1e-5)
    g = torch.randn_like(ref)
    out.backward(g.to("tpu"))
    ref.backward(g)
    for a, b in ((qt, q), (kt, k), (vt, v)):
        assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-5)


def _model_grads(model, run, device, idx, tgt):
    loss = example.loss_fn(run, idx.to(device), tgt.to(device))
    loss.backward()
    return loss.detach().cpu(), {n: p.grad.cpu() for n, p in model.named_parameters()}


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_transformer_with_pallas_kernel_matches_pytorch(compiled, fresh_dynamo):
    m, ref = example.make_models()
    torch.manual_seed(3)
    idx, tgt = torch.randint(0, 64, (2, 16)), torch.randint(0, 64, (2, 16))
    m = m.to("tpu")
    run = m
    if compiled:
        run = torch.compile(m, backend="tpu", fullgraph=True)  # fullgraph: the jax op breaks nothing
    loss, grads = _model_grads(m, run, "tpu", idx, tgt)
    ref_loss, ref_grads = _model_grads(ref, ref, "cpu", idx, tgt)
    assert_close(loss, ref_loss, atol=1e-5, rtol=1e-5)
    assert grads.keys() == ref_grads.keys()
    for n in grads:
        assert_close(grads[n], ref_grads[n], atol=2e-5, rtol=1e-4)


def test_fused_eager_composes_the_op_into_one_program():
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    xt, wt = x.to("tpu"), w.to("tpu")
    torch_tpu.mark_step()
    before = torch_tpu.fusion_stats()
    with torch_tpu.eager_mode("fused"):
        y = scaled_tanh(xt + 1, wt, 2.0) * 3
        z = scaled_tanh(xt, wt, 2.0)  # the same jax program twice in one trace
        out = (y + z).cpu()
    after = torch_tpu.fusion_stats()
    assert after["flushes"] - before["flushes"] == 1
    assert after["fused_ops"] - before["fused_ops"] >= 5
    assert_close(out, torch.tanh((x + 1) @ w) * 6 + torch.tanh(x @ w) * 2)


def test_wrong_device_names_the_op():
    with pytest.raises(RuntimeError, match="test_scaled_tanh.*argument 0 is on cpu"):
        scaled_tanh(torch.randn(4, 8), torch.randn(8, 3).to("tpu"), 1.0)


def test_wrong_rank_or_dtype_raises_naming_the_op():
    x = torch.randn(4, 8).to("tpu")
    with pytest.raises(RuntimeError, match=r"test_scaled_tanh.*float32\[4, 8\], float32\[3\]"):
        scaled_tanh(x, torch.randn(3).to("tpu"), 1.0)
    floats_only = torch_tpu.jax_op("test_floats_only", lambda a: jax.lax.rsqrt(a))
    with pytest.raises(RuntimeError, match=r"test_floats_only.*int64\[8, 3\].*TypeError"):
        floats_only(torch.ones(8, 3, dtype=torch.int64).to("tpu"))


def test_jax_exception_is_a_python_error():
    def bad(x):
        raise ValueError("kernel refuses these inputs")

    op = torch_tpu.jax_op("test_raises", bad)
    with pytest.raises(RuntimeError, match="test_raises.*ValueError: kernel refuses these inputs"):
        op(torch.randn(3).to("tpu"))
    # The process goes on.
    assert_close(scaled_tanh(torch.ones(1, 8).to("tpu"), torch.ones(8, 1).to("tpu"), 1.0),
                 torch.tanh(torch.full((1, 1), 8.0)))


def test_bad_registrations():
    with pytest.raises(RuntimeError, match="built-in"):
        torch_tpu.jax_op("add", lambda x: x)
    with pytest.raises(ValueError, match="already registered"):
        torch_tpu.jax_op("test_scaled_tanh", _scaled_tanh)
    with pytest.raises(TypeError, match="Python literals"):
        scaled_tanh(torch.ones(1, 8).to("tpu"), torch.ones(8, 1).to("tpu"), object())


def test_reference_name():
    assert torch.tpu.pallas.jax_op is torch_tpu.jax_op


# ---- the reference's spellings (torch.tpu.pallas) ------------------------------------


def _scale_add(x, y, alpha: float = 2.0, *, beta: float = 1.0):
    return x * alpha + y * beta


def test_reference_decorator_namespace_keywords_and_donation():
    # `@jax_op("ns::op", donate_argnums=..., mesh=...)` as the reference's
    # scripts write it; keyword and default arguments are static like
    # positional ones.
    from torch.tpu.pallas import get_pallas_mesh, jax_op

    mesh = get_pallas_mesh("x")
    assert mesh.devices.shape == (1,) and mesh.axis_names == ("x",)
    op = jax_op("testlib::scale_add", donate_argnums=(0,), mesh=mesh, input_partition_specs=((None,), (None,)),
                output_partition_specs=((None,),))(_scale_add)
    assert str(op.op) == "tpu_jax.testlib__scale_add.default"
    a, b = torch.randn(6), torch.randn(6)
    for kwargs, want in [({}, a * 2 + b), ({"alpha": 3.0}, a * 3 + b), ({"beta": 0.5}, a * 2 + b * 0.5),
                         ({"alpha": 3.0, "beta": 0.5}, a * 3 + b * 0.5)]:
        x = a.to("tpu")
        assert_close(op(x, b.to("tpu"), **kwargs), want)
        assert_close(x, a)  # a donated input stays valid here
    assert_close(op(a.to("tpu"), y=b.to("tpu")), a * 2 + b)
    x = a.to("tpu").requires_grad_()
    op(x, b.to("tpu"), beta=0.5).sum().backward()
    assert_close(x.grad, torch.full((6,), 2.0))
    f = torch.compile(lambda u, v: op(u, v, alpha=3.0, beta=0.5) + 1, backend="tpu", fullgraph=True)
    assert_close(f(a.to("tpu"), b.to("tpu")), a * 3 + b * 0.5 + 1)


def test_reference_bad_arguments():
    from torch.tpu.pallas import jax_op

    with pytest.raises(ValueError, match="namespace::op"):
        jax_op("a::b::c", lambda x: x)
    with pytest.raises(ValueError, match="donate_argnums"):
        jax_op("testlib::donate_bad", lambda x: x, donate_argnums=(2,))
    with pytest.raises(TypeError, match="Mesh"):
        jax_op("testlib::mesh_bad", lambda x: x, mesh="x")
    op = jax_op("testlib::kw_bad", _scale_add)
    with pytest.raises(TypeError, match="unexpected keyword"):
        op(torch.ones(2, device="tpu"), torch.ones(2, device="tpu"), gamma=1.0)
    with pytest.raises(TypeError, match="'beta' is a tensor"):
        op(torch.ones(2, device="tpu"), torch.ones(2, device="tpu"), beta=torch.ones(2, device="tpu"))
    with pytest.raises(ValueError, match="mesh_shape"):
        torch.tpu.pallas.get_pallas_mesh(("x", "y"))
