"""Checks on data made on the device (lowering/index_check.h,
runtime/deferred_checks.h): an out-of-range index or an integer division by
zero raises CPU's exception type, naming the op, at the next
synchronisation (.item(), .cpu(), torch.tpu.synchronize()); Debug Eager
raises at the op. Valid calls give CPU's results, including negative
indices where CPU wraps them. Every case runs twice, so the second call
hits the cached program and must still check."""

import pytest
import torch
import torch_tpu

from utils import assert_close

x5 = torch.arange(5.0)
bad = torch.tensor([1, 7])


def _cases():
    return {
        # name: (fn(device) -> tensor, op name in the tpu message)
        "index_select": (lambda d: torch.index_select(x5.to(d), 0, bad.to(d)), "index_select"),
        "index_select_neg": (lambda d: torch.index_select(x5.to(d), 0, torch.tensor([-1], device=d)), "index_select"),
        "embedding": (lambda d: torch.nn.functional.embedding(bad.to(d), x5.view(5, 1).to(d)), "index_select"),
        "embedding_neg": (lambda d: torch.nn.functional.embedding(torch.tensor([-1], device=d), x5.view(5, 1).to(d)),
                          "index_select"),
        "gather": (lambda d: torch.gather(x5.to(d), 0, bad.to(d)), "gather"),
        "gather_neg": (lambda d: torch.gather(x5.to(d), 0, torch.tensor([-1], device=d)), "gather"),
        "index": (lambda d: x5.to(d)[bad.to(d)], "index"),
        "index_neg": (lambda d: x5.to(d)[torch.tensor([-6], device=d)], "index"),
        "index_2d": (lambda d: torch.zeros(3, 4, device=d)[:, torch.tensor([4], device=d)], "index"),
        "index_put": (lambda d: x5.to(d).clone().index_put_((bad.to(d),), torch.tensor(1.0, device=d)), "index_put"),
        "index_put_acc": (lambda d: x5.to(d).clone().index_put_((bad.to(d),), torch.tensor(1.0, device=d), accumulate=True),
                          "index_put"),
        "take": (lambda d: torch.take(x5.to(d), bad.to(d)), "take"),
        "take_neg": (lambda d: torch.take(x5.to(d), torch.tensor([-6], device=d)), "take"),
        "put": (lambda d: x5.to(d).clone().put_(bad.to(d), x5[:2].to(d)), "put"),
        "scatter": (lambda d: x5.to(d).clone().scatter_(0, bad.to(d), 1.0), "scatter"),
        "scatter_neg": (lambda d: x5.to(d).clone().scatter_(0, torch.tensor([-1], device=d), 1.0), "scatter"),
        "scatter_add": (lambda d: x5.to(d).clone().scatter_add_(0, bad.to(d), x5[:2].to(d)), "scatter_add"),
        "scatter_reduce": (lambda d: x5.to(d).clone().scatter_reduce_(0, bad.to(d), x5[:2].to(d), "amax"), "scatter_reduce"),
        "index_add": (lambda d: x5.to(d).clone().index_add_(0, bad.to(d), x5[:2].to(d)), "index_add"),
        "index_add_neg": (lambda d: x5.to(d).clone().index_add_(0, torch.tensor([-1], device=d), x5[:1].to(d)), "index_add"),
        "index_copy": (lambda d: x5.to(d).clone().index_copy_(0, bad.to(d), x5[:2].to(d)), "index_copy"),
        "index_fill": (lambda d: x5.to(d).clone().index_fill_(0, bad.to(d), 1.0), "index_fill"),
        "nll_loss": (lambda d: torch.nn.functional.nll_loss(torch.randn(2, 3).to(d), torch.tensor([0, 5], device=d)),
                     "nll_loss_forward"),
        "embedding_bag": (lambda d: torch.nn.functional.embedding_bag(bad.to(d), x5.view(5, 1).to(d),
                                                                      torch.tensor([0], device=d)),
                          "_embedding_bag_forward_only"),
        "floor_divide_scalar": (lambda d: torch.tensor([1, 2], device=d) // 0, "floor_divide"),
        "floor_divide_tensor": (lambda d: torch.tensor([1, 2], device=d) // torch.tensor([1, 0], device=d),
                                "floor_divide"),
        "div_trunc": (lambda d: torch.div(torch.tensor([1, 2], device=d), torch.tensor([1, 0], device=d),
                                          rounding_mode="trunc"), "div"),
        "remainder": (lambda d: torch.remainder(torch.tensor([1, 2], device=d), torch.tensor([1, 0], device=d)),
                      "remainder"),
        "fmod_scalar": (lambda d: torch.fmod(torch.tensor([1, 2], device=d), 0), "fmod"),
    }


CASES = _cases()


@pytest.mark.parametrize("name", list(CASES))
def test_raises_like_cpu(name):
    fn, op = CASES[name]
    with pytest.raises(Exception) as cpu_err:
        fn("cpu")
    for _ in range(2):  # the second call runs the cached program
        with pytest.raises(type(cpu_err.value)) as tpu_err:
            fn("tpu").cpu()
        assert f"{op}()" in str(tpu_err.value)
    assert torch_tpu._C._pending_checks(0) == 0


def test_message_names_index_dim_and_size():
    with pytest.raises(IndexError, match=r"index_select\(\): index 7 is out of range for dimension 0 with size 5"):
        torch.index_select(torch.arange(5.0, device="tpu"), 0, torch.tensor([1, 7], device="tpu")).cpu()
    with pytest.raises(RuntimeError, match=r"gather\(\): index -2 is out of bounds for dimension 1 with size 3"):
        torch.gather(torch.zeros(2, 3, device="tpu"), 1, torch.tensor([[0], [-2]], device="tpu")).cpu()


def test_surfaces_at_item_and_synchronize():
    x = torch.arange(5.0, device="tpu")
    y = torch.index_select(x, 0, torch.tensor([9], device="tpu"))  # no error yet: nothing waited
    with pytest.raises(IndexError, match="index_select"):
        torch.tpu.synchronize()
    del y
    z = torch.index_select(x, 0, torch.tensor([9], device="tpu"))
    with pytest.raises(IndexError, match="index_select"):
        x.sum().item()  # an unrelated read still reports it (CUDA's model)
    assert torch_tpu._C._pending_checks(0) == 0
    # once reported, the device is usable again
    assert x.sum().item() == 10.0
    del z


@pytest.mark.parametrize("count,bad_at", [(3, 1), (3, None), (20, 17), (70, 66), (70, None)])
def test_many_flags_read_at_once(count, bad_at):
    # Several pending flags are reduced on the device and read once
    # (fusing_runtime.cpp, first_failed): the first failure raises with its
    # own index, whatever its position (past a 64-flag chunk too).
    x = torch.arange(5.0, device="tpu")
    outs = []
    for i in range(count):
        idx = [11 + i] if i == bad_at else [i % 5]
        outs.append(torch.index_select(x, 0, torch.tensor(idx, device="tpu")))
    if bad_at is not None:
        outs.append(torch.gather(x, 0, torch.tensor([40], device="tpu")))  # a later failure: not the one raised
        with pytest.raises(IndexError, match=f"index_select.*index {11 + bad_at} is out of range"):
            torch.tpu.synchronize()
    else:
        torch.tpu.synchronize()
    assert torch_tpu._C._pending_checks(0) == 0
    good = [i for i in range(count) if i != bad_at]
    assert [outs[i].item() for i in good] == [float(i % 5) for i in good]


def test_debug_eager_raises_at_the_op():
    x = torch.arange(5.0, device="tpu")
    idx = torch.tensor([9], device="tpu")
    with torch_tpu.eager_mode("debug"):
        with pytest.raises(IndexError, match="index_select") as e:
            torch.index_select(x, 0, idx)
        assert "next synchronisation" not in str(e.value)
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            torch.tensor([3], device="tpu") // 0
    assert torch_tpu._C._pending_checks(0) == 0


def test_fused_flag_is_kept_when_result_is_dropped():
    x = torch.arange(5.0, device="tpu")
    with torch_tpu.eager_mode("fused"):
        y = torch.gather(x, 0, torch.tensor([1, 7], device="tpu")) * 2
        del y  # the gathered value is a dead intermediate; its flag is not
        with pytest.raises(RuntimeError, match="gather"):
            torch.tpu.synchronize()


VALID = {
    "index_select": lambda d: torch.index_select(torch.arange(12.0).view(3, 4).to(d), 1, torch.tensor([3, 0, 3], device=d)),
    "embedding_pad": lambda d: torch.nn.functional.embedding(torch.tensor([[4, 0], [2, 4]], device=d),
                                                             torch.arange(10.0).view(5, 2).to(d), padding_idx=-1),
    "gather": lambda d: torch.gather(torch.arange(12.0).view(3, 4).to(d), 1, torch.tensor([[3], [0], [2]], device=d)),
    "index_neg": lambda d: torch.arange(5.0).to(d)[torch.tensor([-5, -1, 4], device=d)],
    "index_put_neg": lambda d: torch.zeros(5).to(d).index_put_((torch.tensor([-5, 2], device=d),),
                                                               torch.tensor(1.0, device=d)),
    "take_neg": lambda d: torch.take(torch.arange(6.0).view(2, 3).to(d), torch.tensor([-6, 5], device=d)),
    "put_neg": lambda d: torch.zeros(5).to(d).put_(torch.tensor([-5, 1], device=d), torch.ones(2).to(d)),
    "index_fill_neg": lambda d: torch.zeros(5).to(d).index_fill_(0, torch.tensor([-1], device=d), 2.0),
    "scatter": lambda d: torch.zeros(5).to(d).scatter_(0, torch.tensor([4, 0], device=d), 1.0),
    "index_add": lambda d: torch.zeros(5).to(d).index_add_(0, torch.tensor([4, 4], device=d), torch.ones(2).to(d)),
    "nll_ignore": lambda d: torch.nn.functional.nll_loss(torch.arange(6.0).view(2, 3).to(d),
                                                         torch.tensor([2, -100], device=d)),
    "floor_divide": lambda d: torch.tensor([7, -7], device=d) // torch.tensor([2, 3], device=d),
    "float_div_zero": lambda d: torch.tensor([1.0, -1.0], device=d) // 0,
    "remainder_float_zero": lambda d: torch.remainder(torch.tensor([1.0], device=d), 0.0),
}


@pytest.mark.parametrize("name", list(VALID))
def test_valid_calls_match_cpu(name):
    fn = VALID[name]
    for _ in range(2):
        assert_close(fn("tpu"), fn("cpu"))
    torch.tpu.synchronize()
    assert torch_tpu._C._pending_checks(0) == 0


def test_compiled_graph_replay_still_checks(fresh_dynamo):
    table = torch.arange(10.0).view(5, 2)

    def f(t, i):
        return torch.nn.functional.embedding(i, t) * 2

    cf = torch.compile(f, backend="tpu")
    t = table.to("tpu")
    good = torch.tensor([0, 4], device="tpu")
    for _ in range(3):  # capture, then replays
        assert_close(cf(t, good), f(table, good.cpu()))
    with pytest.raises(IndexError, match="index_select"):
        cf(t, torch.tensor([0, 5], device="tpu")).cpu()
    for _ in range(2):
        with pytest.raises(IndexError, match="index_select"):
            cf(t, torch.tensor([9, 1], device="tpu")).cpu()
    assert_close(cf(t, good), f(table, good.cpu()))


# ---- scalar checks that ran only when a program was first built ---------------


def _pow_neg(d):
    return torch.pow(torch.arange(3, device=d), -1)


def _random_from_to(d):
    return torch.empty(3, device=d).random_(5, 2)


def _u8(d):
    return torch.zeros(3, dtype=torch.uint8, device=d)


SCALAR_CASES = {
    "random_": (_random_from_to, lambda d: torch.empty(3, device=d).random_(0, 5)),
    "pow_int_negative": (_pow_neg, lambda d: torch.pow(torch.arange(3, device=d), 2)),
    # The fill value is a runtime operand: CPU's overflow check (never made
    # on tpu before, not even on the first call) is in exec/arg_checks.
    "fill_overflow": (lambda d: _u8(d).fill_(300), lambda d: _u8(d).fill_(3)),
    "full_overflow": (lambda d: torch.full((2,), 300, dtype=torch.uint8, device=d),
                      lambda d: torch.full((2,), 3, dtype=torch.uint8, device=d)),
    "masked_fill_overflow": (lambda d: _u8(d).masked_fill(_u8(d) == 0, 300),
                             lambda d: _u8(d).masked_fill(_u8(d) == 0, 3)),
    "index_fill_overflow": (lambda d: _u8(d).index_fill(0, torch.tensor([0], device=d), 300),
                            lambda d: _u8(d).index_fill(0, torch.tensor([0], device=d), 3)),
    "half_fill_overflow": (lambda d: torch.zeros(2, dtype=torch.half, device=d).fill_(1e6),
                           lambda d: torch.zeros(2, dtype=torch.half, device=d).fill_(1e3)),
    # Scalar checks of C++ meta functions: the engine runs the meta kernel
    # once per program (aten/structured_direct.cpp), so exec/arg_checks
    # makes them on every call.
    "renorm_p": (lambda d: torch.renorm(torch.ones(2, 3, device=d), -1.0, 0, 1.0),
                 lambda d: torch.renorm(torch.ones(2, 3, device=d), 2.0, 0, 1.0)),
    "renorm_maxnorm": (lambda d: torch.renorm(torch.ones(2, 3, device=d), 2.0, 0, -1.0),
                       lambda d: torch.renorm(torch.ones(2, 3, device=d), 2.0, 0, 0.5)),
    "leaky_relu_backward_in_place": (
        lambda d: torch.ops.aten.leaky_relu_backward(torch.ones(3, device=d), torch.ones(3, device=d), -0.1, True),
        lambda d: torch.ops.aten.leaky_relu_backward(torch.ones(3, device=d), torch.ones(3, device=d), 0.1, True)),
    "elu_backward_in_place": (
        lambda d: torch.ops.aten.elu_backward(torch.ones(3, device=d), -1.0, 1.0, 1.0, True, torch.ones(3, device=d)),
        lambda d: torch.ops.aten.elu_backward(torch.ones(3, device=d), 1.0, 1.0, 1.0, True, torch.ones(3, device=d))),
}


@pytest.mark.parametrize("name", list(SCALAR_CASES))
def test_scalar_checks_every_call(name):
    bad_fn, good_fn = SCALAR_CASES[name]
    with pytest.raises(Exception) as cpu_err:
        bad_fn("cpu")
    good_fn("tpu").cpu()  # compiles (and caches) the program
    for _ in range(2):
        with pytest.raises(type(cpu_err.value)) as tpu_err:
            bad_fn("tpu").cpu()
        assert str(cpu_err.value).split(",")[0][:40] in str(tpu_err.value)
    if name != "random_":  # random numbers differ from CPU's
        assert_close(good_fn("tpu"), good_fn("cpu"))


# ---- torch._assert_async: a check on the device ----------------------------------


def test_assert_async_raises_its_message_at_the_next_sync():
    """torch._assert_async(cond[, msg]) (Dynamo's `assert` on tensor data,
    Dbrx's and LongcatFlash's routers) checks on the device: a false cond
    raises CPU's RuntimeError with its message at the next sync, a true
    one nothing; the cached program checks again."""
    for _ in range(2):
        x = torch.arange(3.0, device="tpu")
        torch._assert_async((x >= 0).all(), "x must be non-negative")
        torch._assert_async(x.sum())
        torch.tpu.synchronize()
        torch._assert_async((x > 0).all(), "x must be positive")
        with pytest.raises(RuntimeError, match="x must be positive"):
            torch.tpu.synchronize()
        torch._assert_async(x[0])
        with pytest.raises(RuntimeError, match="Expected Tensor with single nonzero value, but got zero"):
            x.sum().item()
        assert torch_tpu._C._pending_checks(0) == 0
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        torch._assert_async(torch.ones(2, device="tpu"))


def test_assert_async_in_a_compiled_graph(fresh_dynamo):
    def f(x):
        torch._assert_async((x < 10).all(), "x too large")
        return x * 2

    cf = torch.compile(f, backend="tpu")
    for _ in range(3):  # capture, then replays
        assert_close(cf(torch.arange(4.0, device="tpu")), torch.arange(4.0) * 2)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="x too large"):
            cf(torch.arange(4.0, device="tpu") * 10).cpu()


# ---- checks on an op's data that CPU makes on the host (check_data) --------------
# Without them the op computed on invalid data: a sample from an invalid
# distribution, a loss of NaN, an unpooled value written into another
# channel's plane.

F = torch.nn.functional


def _t(v, d, **kw):
    return torch.tensor(v, device=d, **kw)


# name: (invalid call, valid call, whether the valid call is deterministic)
DATA_CASES = {
    "multinomial_negative": (lambda d: torch.multinomial(_t([0.5, -0.1], d), 1),
                             lambda d: torch.multinomial(_t([0.0, 1.0], d), 1), True),
    "multinomial_inf": (lambda d: torch.multinomial(_t([0.5, float("inf")], d), 1),
                        lambda d: torch.multinomial(_t([0.5, 0.5], d), 1), False),
    "multinomial_nan": (lambda d: torch.multinomial(_t([[1.0, 1.0], [0.5, float("nan")]], d), 1, True),
                        lambda d: torch.multinomial(_t([[1.0, 0.0], [0.0, 2.0]], d), 1, True), True),
    "multinomial_zero_row": (lambda d: torch.multinomial(_t([[0.0, 0.0], [1.0, 1.0]], d), 1),
                             lambda d: torch.multinomial(_t([[0.0, 3.0], [1.0, 0.0]], d), 1), True),
    "multinomial_replacement_negative": (lambda d: torch.multinomial(_t([0.5, -1.0], d), 4, True),
                                         lambda d: torch.multinomial(_t([0.0, 1.0], d), 4, True), True),
    "multinomial_replacement_nan": (lambda d: torch.multinomial(_t([0.5, float("nan")], d), 4, True),
                                    lambda d: torch.multinomial(_t([0.0, 1.0], d), 4, True), True),
    "multinomial_replacement_zero": (lambda d: torch.multinomial(_t([0.0, 0.0], d), 4, True),
                                     lambda d: torch.multinomial(_t([2.0, 0.0], d), 4, True), True),
    "bernoulli_p_above_one": (lambda d: torch.bernoulli(_t([0.5, 1.5], d)),
                              lambda d: torch.bernoulli(_t([0.0, 1.0], d)), True),
    "bernoulli_p_tensor_negative": (lambda d: torch.empty(2, device=d).bernoulli_(_t([0.5, -0.5], d)),
                                    lambda d: torch.empty(2, device=d).bernoulli_(_t([1.0, 0.0], d)), True),
    "bernoulli_p_nan": (lambda d: torch.bernoulli(_t([float("nan")], d)),
                        lambda d: torch.bernoulli(_t([1.0], d)), True),
    # a factor with a zero diagonal element gave NaN (CPU and CUDA: LinAlgError naming the first one)
    "cholesky_inverse_singular": (lambda d: torch.cholesky_inverse(_t([[1.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 1.0, 0.0]], d)),
                                  lambda d: torch.cholesky_inverse(_t([[1.0, 0.0, 0.0], [2.0, 3.0, 0.0], [0.0, 1.0, 2.0]], d)),
                                  True, "The diagonal element 2 is zero"),
    "cholesky_inverse_upper_batched": (
        lambda d: torch.cholesky_inverse(_t([[[2.0, 1.0], [0.0, 1.0]], [[0.0, 1.0], [0.0, 1.0]]], d), upper=True),
        lambda d: torch.cholesky_inverse(_t([[[2.0, 1.0], [0.0, 1.0]], [[3.0, 1.0], [0.0, 1.0]]], d), upper=True),
        True, "The diagonal element 1 is zero"),
    "normal_std_negative": (lambda d: torch.normal(_t([0.0, 0.0], d), _t([1.0, -1.0], d)),
                            lambda d: torch.normal(_t([2.0, 3.0], d), _t([0.0, 0.0], d)), True),
    "normal_float_mean_std_negative": (lambda d: torch.normal(1.0, _t([-1.0], d)),
                                       lambda d: torch.normal(1.0, _t([0.0], d)), True),
    "binary_cross_entropy_above_one": (lambda d: F.binary_cross_entropy(_t([0.5, 1.5], d), _t([0.0, 1.0], d)),
                                       lambda d: F.binary_cross_entropy(_t([0.5, 1.0], d), _t([0.0, 1.0], d)), True),
    "binary_cross_entropy_nan": (lambda d: F.binary_cross_entropy(_t([float("nan")], d), _t([1.0], d)),
                                 lambda d: F.binary_cross_entropy(_t([0.0], d), _t([1.0], d)), True),
    "max_unpool1d": (lambda d: F.max_unpool1d(torch.ones(1, 1, 2, device=d), _t([[[0, 9]]], d), 2),
                     lambda d: F.max_unpool1d(torch.ones(1, 1, 2, device=d), _t([[[0, 3]]], d), 2), True),
    "max_unpool2d_negative": (lambda d: F.max_unpool2d(torch.ones(1, 2, 1, 2, device=d), _t([[[[0, 1]], [[-1, 2]]]], d), 2),
                              lambda d: F.max_unpool2d(torch.ones(1, 2, 1, 2, device=d), _t([[[[0, 1]], [[7, 2]]]], d), 2),
                              True),
    "max_unpool3d": (lambda d: F.max_unpool3d(torch.ones(1, 1, 1, 1, 2, device=d), _t([[[[[0, 99]]]]], d), 2),
                     lambda d: F.max_unpool3d(torch.ones(1, 1, 1, 1, 2, device=d), _t([[[[[0, 15]]]]], d), 2), True),
    "multi_margin_loss": (lambda d: F.multi_margin_loss(torch.arange(6.0, device=d).view(2, 3), _t([0, 3], d)),
                          lambda d: F.multi_margin_loss(torch.arange(6.0, device=d).view(2, 3), _t([0, 2], d)), True),
    "multilabel_margin_loss": (
        lambda d: F.multilabel_margin_loss(torch.arange(6.0, device=d).view(2, 3), _t([[0, 3, -1], [1, -1, 0]], d)),
        lambda d: F.multilabel_margin_loss(torch.arange(6.0, device=d).view(2, 3), _t([[0, 2, -1], [1, -1, 0]], d)),
        True),
    "repeat_interleave_output_size": (lambda d: torch.repeat_interleave(_t([1, 2], d), output_size=5),
                                      lambda d: torch.repeat_interleave(_t([1, 2], d), output_size=3), True),
    # a short source repeated its last element (the gather clamped)
    "masked_scatter_short_source": (
        lambda d: torch.zeros(4, device=d).masked_scatter_(_t([True, True, True, False], d), _t([1.0, 2.0], d)),
        lambda d: torch.zeros(4, device=d).masked_scatter_(_t([True, True, True, False], d), _t([1.0, 2.0, 3.0], d)),
        True),
    "embedding_bag_first_offset": (
        lambda d: F.embedding_bag(_t([0, 1, 2], d), torch.arange(8.0, device=d).view(4, 2), _t([1, 2], d)),
        lambda d: F.embedding_bag(_t([0, 1, 2], d), torch.arange(8.0, device=d).view(4, 2), _t([0, 2], d)), True),
    "embedding_bag_offset_past_input": (
        lambda d: F.embedding_bag(_t([0, 1, 2], d), torch.arange(8.0, device=d).view(4, 2), _t([0, 1, 5], d),
                                  include_last_offset=True),
        lambda d: F.embedding_bag(_t([0, 1, 2], d), torch.arange(8.0, device=d).view(4, 2), _t([0, 1, 3], d),
                                  include_last_offset=True), True),
    # the data's range (min == max == 0) with inf or NaN in it counted nothing
    "histc_nan": (lambda d: torch.histc(_t([1.0, float("nan")], d), bins=4),
                  lambda d: torch.histc(_t([1.0, 3.0], d), bins=4), True, "torch.histc: range of"),
    "histc_inf": (lambda d: torch.histc(_t([1.0, float("inf")], d), bins=4),
                  lambda d: torch.histc(_t([1.0, float("inf")], d), bins=4, min=0, max=2), True, "torch.histc: range of"),
    "histogram_nan": (lambda d: torch.histogram(_t([1.0, float("nan")], d), bins=4)[0],
                      lambda d: torch.histogram(_t([1.0, 2.0], d), bins=4)[0], True, "dimension 0's range"),
    "segment_reduce_negative_length": (
        lambda d: torch.segment_reduce(_t([1.0, 2.0, 3.0], d), "sum", lengths=_t([4, -1], d)),
        lambda d: torch.segment_reduce(_t([1.0, 2.0, 3.0], d), "sum", lengths=_t([2, 1], d)), True),
    "segment_reduce_lengths_sum": (
        lambda d: torch.segment_reduce(_t([1.0, 2.0, 3.0], d), "sum", lengths=_t([1, 1], d)),
        lambda d: torch.segment_reduce(_t([1.0, 2.0, 3.0], d), "sum", lengths=_t([1, 2], d)), True,
        "Expected all rows of lengths"),
}


@pytest.mark.parametrize("name", list(DATA_CASES))
def test_data_checks_raise_like_cpu(name):
    bad_fn, good_fn, deterministic, *words = DATA_CASES[name]
    with pytest.raises(Exception) as cpu_err:
        bad_fn("cpu")
    expected = words[0] if words else str(cpu_err.value).split("(")[0].split(",")[0].strip()[:30]
    assert expected in str(cpu_err.value)
    for _ in range(2):  # the second call runs the cached program
        with pytest.raises(type(cpu_err.value)) as tpu_err:
            bad_fn("tpu").cpu()
        assert expected in str(tpu_err.value)
    assert torch_tpu._C._pending_checks(0) == 0
    for _ in range(2):
        got = good_fn("tpu").cpu()  # a valid call does not raise
        if deterministic:
            assert_close(got, good_fn("cpu"))


def test_max_unpool_index_of_another_plane_is_reported_not_written():
    # index 5 of a 4-element plane of channel 0 used to land in channel 1's
    # plane: a silent wrong value there
    x, idx = torch.ones(1, 2, 2), torch.tensor([[[0, 5], [1, 2]]])
    with pytest.raises(RuntimeError, match="invalid max index: 5"):
        F.max_unpool1d(x.to("tpu"), idx.to("tpu"), 2).cpu()


def test_data_check_in_a_compiled_graph(fresh_dynamo):
    f = torch.compile(lambda p, t: F.binary_cross_entropy(torch.sigmoid(p) * 2, t), backend="tpu")
    t = torch.tensor([0.0, 1.0], device="tpu")
    assert_close(f(torch.tensor([-9.0, -8.0], device="tpu"), t),
                 F.binary_cross_entropy(torch.sigmoid(torch.tensor([-9.0, -8.0])) * 2, t.cpu()))
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        f(torch.tensor([0.0, 3.0], device="tpu"), t).cpu()


@pytest.mark.parametrize("fn", [
    lambda d: torch.zeros(0, device=d).gather(0, _t([0], d)),
    lambda d: torch.zeros(0, 2, device=d).index_select(0, _t([0], d)),
    lambda d: F.embedding(_t([0], d), torch.zeros(0, 2, device=d)),
    lambda d: torch.zeros(0, device=d)[_t([0], d)],
])
def test_index_into_an_empty_dim_raises_like_cpu(fn):
    # any index is out of range there: XLA could not compile the gather
    with pytest.raises(Exception) as cpu_err:
        fn("cpu")
    with pytest.raises(type(cpu_err.value), match="out of bounds for dimension|dimension 0"):
        fn("tpu").cpu()
