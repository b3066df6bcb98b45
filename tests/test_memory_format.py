"""Result layouts follow CPU's: a channels-last (or otherwise permuted) input
gives the strides CPU gives, so `y.permute(0, 2, 3, 1).view(...)` and
`is_contiguous(memory_format=...)` behave as on CPU. New results take the
meta kernel's strides (exec/op_runner.cpp, dense permutations only); the
convolutions' channels-last choice is CPU's rule (exec/meta_fixups.cpp);
structured ops' functional forms reach the engine directly and keep CPU's
checks and messages (aten/structured_direct.cpp)."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from utils import assert_close

torch.manual_seed(0)
X = torch.randn(2, 4, 5, 6)
W = torch.randn(8, 4, 3, 3)


def strides(t):
    # Size-1 dims have any stride; CPU's and ours may differ there only.
    return tuple(s for s, n in zip(t.stride(), t.shape) if n > 1)


OPS = {
    "conv2d": lambda x, d: F.conv2d(x, W.to(d), padding=1),
    "conv2d_cl_weight_only": lambda x, d: F.conv2d(x.contiguous(), W.to(d).to(memory_format=torch.channels_last)),
    "conv_transpose2d": lambda x, d: F.conv_transpose2d(x, torch.ones(4, 3, 2, 2, device=d)),
    "relu": lambda x, d: F.relu(x),
    "hardswish": lambda x, d: F.hardswish(x),
    "gelu": lambda x, d: F.gelu(x),
    "batch_norm_train": lambda x, d: F.batch_norm(x, None, None, training=True),
    "batch_norm_eval": lambda x, d: F.batch_norm(x, torch.zeros(4, device=d), torch.ones(4, device=d)),
    "group_norm": lambda x, d: F.group_norm(x, 2),
    "dropout_eval": lambda x, d: F.dropout(x, 0.5, training=False),
    "max_pool2d": lambda x, d: F.max_pool2d(x, 2),
    "add": lambda x, d: x + x,
    "mul_scalar": lambda x, d: x * 3,
    "where": lambda x, d: torch.where(x > 0, x, 0.0),
    "softmax_dim1": lambda x, d: x.softmax(1),
}


@pytest.mark.parametrize("name", list(OPS))
def test_channels_last_results_have_cpu_strides(name):
    x = X.to(memory_format=torch.channels_last)
    want = OPS[name](x, "cpu")
    got = OPS[name](x.to("tpu"), "tpu")
    assert strides(got) == strides(want), (got.stride(), want.stride())
    assert_close(got, want)
    # The pattern that raised while results came back NCHW-contiguous.
    if want.permute(0, 2, 3, 1).is_contiguous():
        assert_close(got.permute(0, 2, 3, 1).reshape(-1), want.permute(0, 2, 3, 1).view(-1))
        got.permute(0, 2, 3, 1).view(-1)


def test_channels_last_3d_convolution():
    x = torch.randn(2, 3, 4, 5, 6).to(memory_format=torch.channels_last_3d)
    w = torch.randn(5, 3, 2, 2, 2)
    want = F.conv3d(x, w)
    got = F.conv3d(x.to("tpu"), w.to("tpu"))
    assert got.is_contiguous(memory_format=torch.channels_last_3d)
    assert strides(got) == strides(want)
    assert_close(got, want)


def test_channels_last_training_step_matches_cpu():
    # A conv net in channels_last, as vision training scripts set it up: the
    # gradients of the input (not a leaf layout the engine restrides) and
    # of the weights come back in CPU's layout and values.
    def net():
        torch.manual_seed(1)
        return nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                             nn.Conv2d(8, 4, 3, padding=1))

    cpu, tpu = net().to(memory_format=torch.channels_last), net().to("tpu").to(memory_format=torch.channels_last)
    grads = {}
    for m, d in ((cpu, "cpu"), (tpu, "tpu")):
        x = X.to(d).to(memory_format=torch.channels_last).requires_grad_()
        h = m[0](x)
        h.retain_grad()
        m[1:](h).pow(2).sum().backward()
        grads[d] = (h, h.grad, x.grad, [p.grad for p in m.parameters()])
    (hc, ghc, gxc, gpc), (ht, ght, gxt, gpt) = grads["cpu"], grads["tpu"]
    assert strides(ht) == strides(hc) and strides(ght) == strides(ghc) and strides(gxt) == strides(gxc)
    assert_close(gxt, gxc, atol=1e-4, rtol=1e-4)
    for a, b in zip(gpt, gpc):
        assert strides(a) == strides(b)
        assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_transposed_input_result_keeps_cpu_layout():
    x = torch.randn(6, 5)
    # The last ones are composites of an out= overload (exec/direct_composites.h).
    for f in (F.relu, torch.sigmoid, lambda t: t + 1, lambda t: F.leaky_relu(t, 0.2), torch.abs, torch.isinf,
              torch.logical_not, lambda t: torch.logical_xor(t, t > 0), lambda t: torch.complex(t, t)):
        want, got = f(x.t()), f(x.to("tpu").t())
        assert got.stride() == want.stride()
        assert_close(got, want)


@pytest.mark.parametrize("name", ["batch_norm_3d_transposed", "normal_transposed_mean", "rfft2_transposed"])
def test_results_cpu_gives_contiguous_stay_contiguous(name):
    # Meta kernels keep these inputs' layouts; CPU's kernels do not
    # (exec/meta_fixups.cpp).
    x = torch.randn(5, 6, 4).transpose(1, 2)
    f = {
        "batch_norm_3d_transposed": lambda t: F.batch_norm(t, None, None, training=True),
        "normal_transposed_mean": lambda t: torch.normal(t, 1.0).zero_() + t,
        "rfft2_transposed": lambda t: torch.fft.rfft2(t),
    }[name]
    want, got = f(x), f(x.to("tpu"))
    assert want.is_contiguous() and got.is_contiguous()
    assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_structured_functional_ops_keep_cpu_checks():
    # The functional overloads' meta kernels can be Python ones that check
    # less or word errors otherwise; the engine runs CPU's C++ meta function.
    with pytest.raises(RuntimeError, match="does not support bool input"):
        torch.argmax(torch.ones(3, dtype=torch.bool, device="tpu"))
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of tensor b \(5\)"):
        torch.ones(2, 3, device="tpu") + torch.ones(4, 5, device="tpu")
    with pytest.raises(RuntimeError, match="Boolean alpha only supported"):
        torch.add(torch.ones(2, device="tpu"), torch.ones(2, device="tpu"), alpha=True)
