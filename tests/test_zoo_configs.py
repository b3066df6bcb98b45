"""The zoo harness's config shrink rules (tools/zoo_configs.py): pure dict
rules, no model is built, nothing runs on tpu."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))

import zoo_configs as zc  # noqa: E402


def test_cut_layer_list_keeps_one_layer_of_each_kind():
    types = ["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 4
    assert zc._cut_layer_list(types, 2) == ["linear_attention", "full_attention"]
    assert zc._cut_layer_list(list(range(8)), 2) == [0, 1]


def test_hybrid_layer_list_raises_depth_to_its_kinds():
    d = {"num_hidden_layers": 6, "hidden_size": 64, "num_attention_heads": 4,
         "layer_types": ["conv", "conv", "full_attention", "conv", "sliding_attention", "conv"]}
    zc._shrink_dict(d)
    assert d["num_hidden_layers"] == 3
    assert sorted(d["layer_types"]) == ["conv", "full_attention", "sliding_attention"]


def test_attention_period_fits_the_new_depth():
    d = {"num_hidden_layers": 32, "attn_layer_period": 8, "attn_layer_offset": 4}
    zc._shrink_dict(d)
    assert d["attn_layer_period"] == 2 and d["attn_layer_offset"] == 1


def test_per_stage_heads_divide_the_stage_widths():
    d = {"embed_dim": 96, "depths": [2, 2, 6, 2], "num_heads": [3, 6, 12, 24], "num_layers": 4,
         "window_size": 7, "patch_size": 4, "image_size": 224}
    zc._shrink_dict(d)
    widths = [d["embed_dim"] * 2 ** i for i in range(4)]
    assert all(w % h == 0 for w, h in zip(widths, d["num_heads"]))
    assert d["num_layers"] == 4 and d["depths"] == [1, 1, 1, 1]
    # the last stage is one window
    assert d["image_size"] // d["patch_size"] // 2 ** 3 == d["window_size"]


def test_mrope_section_sums_to_half_the_shrunk_head():
    zc._MROPE_TYPES.clear()
    zc._MROPE_TYPES.add("qwen2_vl_text")
    try:
        d = {"model_type": "qwen2_vl_text", "hidden_size": 4096, "num_attention_heads": 32,
             "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}
        zc._shrink_dict(d)
        head = d["hidden_size"] // d["num_attention_heads"]
        assert sum(d["rope_parameters"]["mrope_section"]) == head // 2
        assert len(d["rope_parameters"]["mrope_section"]) == 3
    finally:
        zc._MROPE_TYPES.clear()


def test_unloaded_modules_finds_meta_weights_outside_the_module_tree():
    # OneFormer keeps its input projections in a plain list: from_pretrained
    # never loads them, and CPU's forward through them reads unfilled memory
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.registered = torch.nn.Linear(2, 2)
            with torch.device("meta"):
                self.projections = [torch.nn.Conv2d(2, 2, 1), torch.nn.Sequential()]

    assert zc.unloaded_modules(M()) == ["projections"]
    m = M()
    m.projections = [torch.nn.Conv2d(2, 2, 1)]  # real weights: a reference CPU can compute
    assert zc.unloaded_modules(m) == []


def test_rt_detr_style_norm_weights_are_set_to_one():
    import torch

    m = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 1), torch.nn.BatchNorm2d(4), torch.nn.LayerNorm(4))
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.01)
    conv = m[0].weight.clone()
    zc.adjust_weights(m, "llama")  # other model types are left alone
    assert not torch.equal(m[1].weight, torch.ones(4))
    zc.adjust_weights(m, "rt_detr")
    assert torch.equal(m[1].weight, torch.ones(4)) and torch.equal(m[2].weight, torch.ones(4))
    assert torch.equal(m[0].weight, conv)
