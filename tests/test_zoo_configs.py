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


def test_width_pass_scales_lists_and_base_widths():
    d = {"decoder_hidden_size": 1536, "upsample_initial_channel": 512, "intermediate_size": 4096,
         "embed_dim_per_stage": [96, 192, 384, 768], "t2u_vocab_size": 10082,
         "num_filters": 32, "downsampling_ratios": [2, 2, 4, 5], "patch_size": 384, "max_position_embeddings": 4096,
         "sub": {"base_channels": 128, "latent_channels": 256}}
    zc._shrink_widths(d)
    assert d["decoder_hidden_size"] == zc.HIDDEN and d["upsample_initial_channel"] == zc.HIDDEN
    assert d["intermediate_size"] == zc.FFN
    assert d["embed_dim_per_stage"] == [6, 12, 24, 48]  # ratios kept
    assert d["t2u_vocab_size"] == zc.VOCAB
    assert d["num_filters"] == 8  # doubled per down-sampling stage
    assert d["patch_size"] == 384 and d["max_position_embeddings"] == 4096
    assert d["sub"]["base_channels"] == zc.HIDDEN and d["sub"]["latent_channels"] == zc.HIDDEN


def test_width_tied_values_follow_the_width():
    d = {"hidden_size": 512, "upsample_groups": 512, "num_attention_heads": 8,
         "out_features": [64, 64, 128, 512]}
    zc._shrink_dict(d)
    assert d["upsample_groups"] == d["hidden_size"] == zc.HIDDEN
    assert d["out_features"][-1] == d["hidden_size"]
    d = {"hidden_size": 4096, "mamba_n_heads": 128, "mamba_d_head": 8, "mamba_d_ssm": 1024}
    zc._shrink_dict(d)
    assert d["mamba_d_ssm"] == d["mamba_n_heads"] * d["mamba_d_head"]


def test_layer_parts_and_shared_kv_layers_fit_the_new_depth():
    d = {"num_hidden_layers": 72, "n_input_layers": 16, "n_recurrent_layers": 40, "n_output_layers": 16}
    zc._shrink_dict(d)
    assert d["n_input_layers"] + d["n_recurrent_layers"] + d["n_output_layers"] == d["num_hidden_layers"]
    assert sorted(d[k] for k in ("n_input_layers", "n_recurrent_layers", "n_output_layers")) == [0, 1, 1]
    d = {"num_hidden_layers": 35, "num_kv_shared_layers": 15,
         "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7}
    zc._shrink_dict(d)
    assert d["num_kv_shared_layers"] == 0  # else a type would have no layer producing its cache


def test_rope_parameters_name_every_layer_type():
    d = {"num_hidden_layers": 8, "rope_parameters": {},
         "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"] * 2}
    zc._shrink_dict(d)
    assert set(d["rope_parameters"]) == set(d["layer_types"])
    d = {"num_hidden_layers": 2, "layer_types": ["full_attention", "full_attention"],
         "rope_parameters": {"rope_type": "default", "rope_theta": 1e4}}
    zc._shrink_dict(d)
    assert d["rope_parameters"] == {"rope_type": "default", "rope_theta": 1e4}  # shared: left alone


def test_model_built_from_a_sub_config_gets_it():
    from transformers import Llama4TextConfig, Llama4VisionConfig

    assert zc._model_config_class("Llama4TextModel", "llama4") is Llama4TextConfig
    assert zc._model_config_class("Llama4VisionModel", "llama4") is Llama4VisionConfig
    assert zc._model_config_class("Llama4ForConditionalGeneration", "llama4") is None
    # another model type's config (Llama listed under "exaone") is left alone
    assert zc._model_config_class("LlamaForCausalLM", "exaone") is None


def test_stale_derived_widths_are_derived_again_from_the_shrunk_config():
    # Zamba 2's __post_init__ derives its head widths and its hybrid layer
    # ids from the full size; to_dict() stores them, so the shrink drops them
    cfg = zc.tiny_config("Zamba2Model", "zamba2")
    assert cfg.mamba_headdim == int(cfg.mamba_expand * cfg.hidden_size) // cfg.n_mamba_heads
    assert cfg.attention_hidden_size == 2 * cfg.hidden_size
    assert all(i < cfg.num_hidden_layers for i in cfg.hybrid_layer_ids)
    # a value the shrink changed is kept, an unchanged derived one dropped
    d = {"a": 5, "b": 7, "sub": {"c": [6, 12]}}
    zc._drop_stale_derived(d, {(): {"a": 5, "b": 8}, ("sub",): {"c": [6, 12]}})
    assert d == {"b": 7, "sub": {}}


def test_sam_neck_and_prompt_encoder_follow_the_mask_decoder():
    d = {"vision_config": {"hidden_size": 32, "output_channels": 256, "num_pos_feats": 128,
                           "image_size": 64, "patch_size": 16},
         "prompt_encoder_config": {"hidden_size": 256, "image_size": 1024, "patch_size": 16,
                                   "image_embedding_size": 64},
         "mask_decoder_config": {"hidden_size": 32}}
    zc._fit_sam(d)
    assert d["vision_config"]["output_channels"] == 32 and d["vision_config"]["num_pos_feats"] == 16
    assert d["prompt_encoder_config"]["hidden_size"] == 32
    assert d["prompt_encoder_config"]["image_embedding_size"] == 64 // 16


def test_expert_count_per_token_and_groups_shrink():
    d = {"num_experts": 256, "num_experts_per_token": 8, "num_expert_group": 8, "topk_group": 4}
    zc._shrink_dict(d)
    assert d["num_experts_per_token"] <= d["num_experts"]
    assert d["num_experts"] % d["num_expert_group"] == 0


def test_text_ids_fit_a_composite_configs_smallest_vocabulary():
    import torch

    cfg = zc.tiny_config("DiaModel", "dia")
    ids = zc.text_ids(cfg, (2, 64), torch.Generator().manual_seed(0))
    assert ids.max().item() < cfg.encoder_config.vocab_size


def test_textnet_stem_follows_the_first_stage_width():
    d = {"stem_out_channels": 64, "hidden_sizes": [64, 64, 128, 256, 512], "depths": [3, 4, 4, 4]}
    zc._shrink_dict(d)
    assert d["stem_out_channels"] == d["hidden_sizes"][0] < 64
