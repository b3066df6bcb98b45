"""Module-level behaviour the ModuleInfo suite found: Module.to("tpu") moves
parameters in place (lazy modules initialise on tpu, tied weights stay
tied), PyTorch's transformer inference fast paths (TransformerEncoder's
nested-tensor sparsity path included), FractionalMaxPool's
unbatched samples. Each against CPU."""

import copy

import pytest
import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile


def _ops(fn):
    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn()
    return {e.key for e in p.key_averages()}


@pytest.mark.parametrize("cls,shape", [(nn.LazyConv1d, (2, 3, 9)), (nn.LazyConv2d, (2, 3, 7, 7)),
                                       (nn.LazyConvTranspose3d, (1, 2, 3, 4, 4)), (nn.LazyLinear, (4, 6))])
def test_lazy_modules_initialise_on_tpu(cls, shape):
    torch.manual_seed(0)
    m = cls(5) if cls is nn.LazyLinear else cls(5, 3)
    m = m.to("tpu")
    assert isinstance(m.weight, nn.parameter.UninitializedParameter)
    x = torch.randn(shape)
    y = m(x.to("tpu"))
    assert type(m.weight) is nn.Parameter and m.weight.device.type == "tpu"
    # The CPU module with the weights tpu drew gives the same output.
    ref = cls(5) if cls is nn.LazyLinear else cls(5, 3)
    ref(x)
    ref.load_state_dict({k: v.cpu() for k, v in m.state_dict().items()})
    torch.testing.assert_close(y.cpu(), ref(x), atol=1e-5, rtol=1e-5)
    y.sum().backward()
    assert m.weight.grad.device.type == "tpu"


def test_to_keeps_parameters_and_ties():
    emb = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    model = nn.Sequential(emb, head)
    w = emb.weight
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.to("tpu")
    assert emb.weight is w and head.weight is emb.weight and w.device.type == "tpu"
    # An optimizer made before the move still holds the model's parameters.
    model(torch.tensor([1, 2], device="tpu")).sum().backward()
    opt.step()
    assert w.device.type == "tpu" and torch.isfinite(w.cpu()).all()
    # .data assignment between CPU and tpu, as between CPU and CUDA.
    t = torch.zeros(3)
    t.data = torch.ones(3, device="tpu")
    assert t.device.type == "tpu" and t.cpu().tolist() == [1, 1, 1]


def _pair(m):
    torch.manual_seed(0)
    return m.eval(), copy.deepcopy(m).to("tpu").eval()


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_encoder_layer_fast_path(norm_first, activation):
    torch.manual_seed(0)
    cpu, tpu = _pair(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, activation=activation,
                                                batch_first=True, norm_first=norm_first))
    x = torch.randn(3, 5, 8)
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
    with torch.no_grad():
        for kw in ({}, {"src_key_padding_mask": mask}):
            ref = cpu(x, **kw)
            tkw = {k: v.to("tpu") for k, v in kw.items()}
            ops = _ops(lambda: tpu(x.to("tpu"), **tkw))
            assert "aten::_transformer_encoder_layer_fwd" in ops  # the fast path ran
            torch.testing.assert_close(tpu(x.to("tpu"), **tkw).cpu(), ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_fast_path(need_weights):
    cpu, tpu = _pair(nn.MultiheadAttention(8, 2, batch_first=True))
    q = torch.randn(2, 6, 8)  # self-attention (query is key is value): the fast path's condition
    mask = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    with torch.no_grad():
        ref = cpu(q, q, q, key_padding_mask=mask, need_weights=need_weights)
        qt = q.to("tpu")
        args = (qt, qt, qt)
        ops = _ops(lambda: tpu(*args, key_padding_mask=mask.to("tpu"), need_weights=need_weights))
        assert "aten::_native_multi_head_attention" in ops
        got = tpu(*args, key_padding_mask=mask.to("tpu"), need_weights=need_weights)
    torch.testing.assert_close(got[0].cpu(), ref[0], atol=1e-5, rtol=1e-5)
    if need_weights:
        torch.testing.assert_close(got[1].cpu(), ref[1], atol=1e-5, rtol=1e-5)


def test_multihead_attention_fast_path_bf16():
    """bfloat16 self-attention fast path: _masked_softmax returns the input's
    dtype (CPU's), so the bmm after it sees matching dtypes."""
    x = torch.randn(2, 2, 3, 3, dtype=torch.bfloat16)
    mask = torch.tensor([[False, False, True], [False, True, True]])
    for mask_type, m in ((1, mask), (2, mask.view(2, 1, 1, 3).expand(2, 2, 3, 3))):
        ref = torch._masked_softmax(x, m, 3, mask_type)
        got = torch._masked_softmax(x.to("tpu"), m.to("tpu"), 3, mask_type)
        assert got.dtype == ref.dtype == torch.bfloat16
        torch.testing.assert_close(got.cpu(), ref, atol=1e-2, rtol=1e-2)
    torch.manual_seed(0)
    cpu, tpu = _pair(nn.MultiheadAttention(8, 2, batch_first=True).to(torch.bfloat16))
    q = torch.randn(2, 3, 8, dtype=torch.bfloat16)
    with torch.no_grad():
        ref = cpu(q, q, q, key_padding_mask=mask)[0]
        qt = q.to("tpu")
        got = tpu(qt, qt, qt, key_padding_mask=mask.to("tpu"))[0]
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.cpu(), ref, atol=2e-2, rtol=2e-2)


_MASKS = {  # True = padded, as src_key_padding_mask
    "left_aligned": [[False] * 3 + [True] * 2, [False] * 4 + [True], [False] * 2 + [True] * 3],  # max length < 5
    "one_full_row": [[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]],
    "not_left_aligned": [[False, True, False, False, True], [False] * 5, [False] * 4 + [True]],
}


@pytest.mark.parametrize("mask_kind", list(_MASKS))
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("layers,final_norm", [(1, False), (2, True)])
def test_transformer_encoder_sparsity_fast_path(mask_kind, batch_first, layers, final_norm):
    """CPU's TransformerEncoder turns a padded batch with a left-aligned
    src_key_padding_mask into a nested tensor, runs the layers on it and pads
    back with zeros (so the final norm writes its bias there); tpu takes the
    same path, so every output element, padded ones included, is CPU's. A
    mask that is not left-aligned takes the padded path on both, and
    batch_first=False the layers' Python path."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=batch_first)
    norm = nn.LayerNorm(8) if final_norm else None
    cpu, tpu = _pair(nn.TransformerEncoder(layer, layers, norm=norm))
    if final_norm:
        with torch.no_grad():
            cpu.norm.bias.uniform_(-1, 1)  # make the padded positions' value (the bias) visible
        tpu.norm.bias.data.copy_(cpu.norm.bias.to("tpu"))
    mask = torch.tensor(_MASKS[mask_kind])
    x = torch.randn(3, 5, 8) if batch_first else torch.randn(5, 3, 8)
    with torch.no_grad():
        ref = cpu(x, src_key_padding_mask=mask)
        ops = _ops(lambda: tpu(x.to("tpu"), src_key_padding_mask=mask.to("tpu")))
        got = tpu(x.to("tpu"), src_key_padding_mask=mask.to("tpu")).cpu()
    nested = batch_first and mask_kind != "not_left_aligned"
    assert ("aten::_nested_tensor_from_mask" in ops) == nested
    assert ("aten::_transformer_encoder_layer_fwd" in ops) == batch_first  # the layers' own fast path
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)
    if nested:  # CPU's nested path: zeros (or the norm's bias) at padded positions
        pad = got[mask] if batch_first else got.transpose(0, 1)[mask]
        expect = cpu.norm.bias.expand_as(pad) if final_norm else torch.zeros_like(pad)
        torch.testing.assert_close(pad, expect, atol=1e-5, rtol=1e-5)


def test_nested_tensor_from_mask_on_tpu():
    """The nested-tensor pieces of that path, each against CPU: the
    left-aligned check, a padded batch + mask to a nested tensor (its buffer
    on tpu), back to padded (with and without output_size), copies, sizes,
    unbind; ops without a tpu nested kernel raise NotImplementedError."""
    x = torch.randn(3, 5, 4)
    keep = ~torch.tensor(_MASKS["left_aligned"])
    gap = ~torch.tensor(_MASKS["not_left_aligned"])
    xt, kt, gt = x.to("tpu"), keep.to("tpu"), gap.to("tpu")
    assert torch._nested_tensor_from_mask_left_aligned(xt, kt) is True
    assert torch._nested_tensor_from_mask_left_aligned(xt, gt) is False
    assert torch._nested_tensor_from_mask_left_aligned(x, gap) is False  # CPU agrees
    ref = torch._nested_tensor_from_mask(x, keep)
    nt = torch._nested_tensor_from_mask(xt, kt)
    assert nt.is_nested and nt.device.type == "tpu" and "NestedTensorPrivateUse1" in str(torch._C._dispatch_keys(nt))
    assert torch.equal(nt._nested_tensor_size(), ref._nested_tensor_size())
    assert torch.equal(nt._nested_tensor_strides(), ref._nested_tensor_strides())
    assert torch.equal(nt._nested_tensor_storage_offsets(), ref._nested_tensor_storage_offsets())
    assert torch.equal(nt.to_padded_tensor(0.0).cpu(), ref.to_padded_tensor(0.0))
    assert torch.equal(nt.to_padded_tensor(-1.5, (4, 6, 7)).cpu(), ref.to_padded_tensor(-1.5, (4, 6, 7)))
    back = nt.cpu()
    assert back.is_nested and back.device.type == "cpu" and torch.equal(back.to_padded_tensor(0.0),
                                                                        ref.to_padded_tensor(0.0))
    for a, b in zip(nt.unbind(), ref.unbind()):
        assert a.device.type == "tpu" and torch.equal(a.cpu(), b)
    # A CPU nested tensor of other component shapes, moved to tpu and padded.
    ragged = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 1), torch.randn(1, 2)])
    assert torch.equal(ragged.to("tpu").to_padded_tensor(7.0).cpu(), ragged.to_padded_tensor(7.0))
    with pytest.raises(RuntimeError, match="left-aligned"):
        torch._nested_tensor_from_mask(xt, gt, mask_check=True)
    with pytest.raises(NotImplementedError, match="NestedTensor"):
        nt.sin()
    with pytest.raises(NotImplementedError, match="NestedTensor"):
        nt + nt
    with pytest.raises(NotImplementedError, match="nested tensor on tpu"):  # CPU has a nested kernel, not a composite
        torch.nn.functional.linear(nt, torch.randn(3, 4, device="tpu"))


def test_fractional_max_pool3d_unbatched():
    x = torch.randn(4, 5, 5, 5)
    samples = torch.rand(2, 4, 3)  # a batch of 2, as FractionalMaxPool3d draws for [C, T, H, W]
    m = nn.FractionalMaxPool3d(2, output_ratio=0.5, _random_samples=samples)
    xt = x.to("tpu").requires_grad_()
    xc = x.clone().requires_grad_()
    mt = nn.FractionalMaxPool3d(2, output_ratio=0.5, _random_samples=samples.to("tpu"))
    yt, yc = mt(xt), m(xc)
    torch.testing.assert_close(yt.cpu(), yc)
    g = torch.randn(yc.shape)
    yt.backward(g.to("tpu"))
    yc.backward(g)
    torch.testing.assert_close(xt.grad.cpu(), xc.grad)
