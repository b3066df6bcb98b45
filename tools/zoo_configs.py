"""Tiny configs and dummy inputs for the model zoo (tools/zoo.py).

`architectures()` lists every model class of the installed Transformers'
auto-model mappings; `tiny_config()` shrinks a model type's default config
(generic rules, then OVERRIDES); `make_inputs()` builds a small batch for a
model from its `main_input_name`, its forward signature and its config.
Nothing here downloads anything: configs are built from their classes'
defaults and weights are random.
"""

from __future__ import annotations

import copy
import inspect
import math

import torch

# Mappings that name model classes (MODEL_*_MAPPING_NAMES). The family of an
# architecture is its first mapping in this order.
FAMILY_ORDER = [
    "MODEL_FOR_CAUSAL_LM", "MODEL_FOR_MASKED_LM", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM",
    "MODEL_FOR_SEQUENCE_CLASSIFICATION", "MODEL_FOR_TOKEN_CLASSIFICATION",
    "MODEL_FOR_QUESTION_ANSWERING", "MODEL_FOR_MULTIPLE_CHOICE",
    "MODEL_FOR_IMAGE_CLASSIFICATION", "MODEL_FOR_SPEECH_SEQ_2_SEQ", "MODEL_FOR_CTC",
    "MODEL_FOR_AUDIO_CLASSIFICATION", "MODEL_FOR_IMAGE_TEXT_TO_TEXT", "MODEL_FOR_MULTIMODAL_LM",
    "MODEL_FOR_PRETRAINING", "MODEL",
]


def architectures():
    """{class name: {"model_type", "mappings": [...], "family"}} over every
    MODEL_*_MAPPING_NAMES of transformers.models.auto.modeling_auto."""
    import transformers.models.auto.modeling_auto as ma

    out = {}
    for name in sorted(n for n in dir(ma) if n.startswith("MODEL") and n.endswith("_MAPPING_NAMES")):
        mapping = name[: -len("_MAPPING_NAMES")]
        for model_type, classes in getattr(ma, name).items():
            for cls in classes if isinstance(classes, (list, tuple)) else [classes]:
                e = out.setdefault(cls, {"model_type": model_type, "mappings": []})
                e["mappings"].append(mapping)
    for e in out.values():
        e["family"] = next((f for f in FAMILY_ORDER if f in e["mappings"]), e["mappings"][0])
    return out


# ---------------------------------------------------------------- tiny configs
HIDDEN = 32
HEADS = 4
KV_HEADS = 2
FFN = 64
LAYERS = 2
VOCAB = 512
EXPERTS = 4

# attribute -> new value (only applied where the attribute exists and is larger)
_SHRINK_INT = {
    # depth
    "num_hidden_layers": LAYERS, "num_layers": LAYERS, "n_layer": LAYERS, "n_layers": LAYERS,
    "encoder_layers": LAYERS, "decoder_layers": LAYERS, "num_encoder_layers": LAYERS,
    "num_decoder_layers": LAYERS, "text_layers": LAYERS, "vision_layers": LAYERS,
    "num_self_attends_per_block": 1, "num_blocks": LAYERS,
    # width
    "hidden_size": HIDDEN, "d_model": HIDDEN, "n_embd": HIDDEN, "dim": HIDDEN, "embed_dim": HIDDEN,
    "intermediate_size": FFN, "d_ff": FFN, "ffn_dim": FFN, "encoder_ffn_dim": FFN,
    "decoder_ffn_dim": FFN, "n_inner": FFN, "hidden_dim": FFN,
    "moe_intermediate_size": FFN // 2, "shared_expert_intermediate_size": FFN // 2,
    "d_kv": HIDDEN // HEADS, "projection_dim": HIDDEN, "embedding_size": HIDDEN,
    # heads
    "num_attention_heads": HEADS, "n_head": HEADS, "n_heads": HEADS, "num_heads": HEADS,
    "encoder_attention_heads": HEADS, "decoder_attention_heads": HEADS,
    "num_key_value_heads": KV_HEADS, "n_kv_heads": KV_HEADS, "num_kv_heads": KV_HEADS,
    # mixture of experts
    "num_experts": EXPERTS, "num_local_experts": EXPERTS, "n_routed_experts": EXPERTS,
    "num_experts_per_tok": 2, "num_experts_per_token": 2, "moe_topk": 2, "n_shared_experts": 1, "num_shared_experts": 1,
    "first_k_dense_replace": 1, "n_group": 1, "num_expert_group": 1, "topk_group": 1,
    # vocabulary / positions
    "vocab_size": VOCAB, "max_position_embeddings": 512, "n_positions": 512,
    # state-space layers (Mamba-2 style: heads x head dim = expand x hidden)
    "mamba_n_heads": HEADS, "mamba_d_head": 2 * HIDDEN // HEADS, "mamba_d_state": 16,
    "ssm_state_size": 16, "state_size": 16,
    # audio codecs whose quantizer works at the model width
    "codebook_dim": HIDDEN,
    # widths under other names (XLM's emb_dim, DeBERTa's pooler), and the
    # widths a sub-model projects into that validators require to equal the
    # (shrunk) hidden size of the model it feeds
    "emb_dim": HIDDEN, "pooler_hidden_size": HIDDEN, "out_hidden_size": HIDDEN,
    "text_hidden_size": HIDDEN, "condition_dim": HIDDEN, "audio_hidden_size": HIDDEN,
    "adapter_in_dim": HIDDEN, "adapter_input_size": HIDDEN,
    "adapter_out_dim": HIDDEN, "rotary_dim": HIDDEN // HEADS,
    # a decoder's cross-attention reads its encoder's (shrunk) width (Dia)
    "cross_hidden_size": HIDDEN,
    # secondary vocabularies (LUKE's entities, Gemma 4's per-layer embeddings)
    "entity_vocab_size": VOCAB, "entity_emb_size": HIDDEN, "vocab_size_per_layer_input": VOCAB,
    # a head narrower than the (padded) embedding: Inkling 2's unpadded_vocab_size
    "unpadded_vocab_size": VOCAB,
    # DPT-style necks read the backbone's (shrunk) width; CLIP-style
    # projections; detectors' queries (RT-DETR takes the top num_queries
    # of the anchors of a small image); video frames
    "reassemble_hidden_size": HIDDEN, "projection_size": HIDDEN, "num_queries": 16,
    "num_frames": 4,
}


def _cut_layer_list(v, n):
    """The first n entries of a per-layer list, but keeping one layer of each
    kind (hybrid models: cutting [linear, linear, linear, full, ...] to its
    first two leaves no attention layer, and the model's cache refuses a
    forward): the first layer of each kind, then the earliest others."""
    if not all(isinstance(x, str) for x in v):
        return v[:n]
    keep = []
    for i, x in enumerate(v):
        if x not in [v[j] for j in keep]:
            keep.append(i)
    keep = keep[:n]
    for i in range(len(v)):
        if len(keep) >= n:
            break
        if i not in keep:
            keep.append(i)
    return [v[i] for i in sorted(keep)]


def _kinds(v):
    return len(set(v)) if all(isinstance(x, str) for x in v) else 1


def _sub_configs(cfg):
    from transformers import PretrainedConfig

    for k, v in list(vars(cfg).items()):
        if isinstance(v, PretrainedConfig):
            yield k, v


def _token_attrs(cfg):
    for k, v in vars(cfg).items():
        if isinstance(v, int) and not isinstance(v, bool) and (
                k.endswith("_token_id") or k.endswith("_token_index") or k.endswith("_token_ids")):
            yield k, v


def _vocab(d):
    v = d.get("vocab_size")
    if isinstance(v, int):
        return v
    for k in ("text_config", "decoder", "language_config", "llm_config"):
        sub = d.get(k)
        if isinstance(sub, dict) and isinstance(sub.get("vocab_size"), int):
            return sub["vocab_size"]
    return None


def _shrink_dict(d, depth=0):
    """Shrinks one config's to_dict() in place (and its sub-config dicts).
    Lists as long as the old depth (layer_types, mlp_layer_types, ...) are
    cut to the new one; values derived from shrunk ones are recomputed."""
    old_layers = {k: d[k] for k in _SHRINK_INT if isinstance(d.get(k), int) and "layer" in k}
    old_width = next((d[k] for k in ("hidden_size", "d_model") if isinstance(d.get(k), int)), None)
    if isinstance(d.get("depths"), list) and d.get("num_layers") == len(d["depths"]):
        # Swin-style: num_layers counts the stages (one block each below)
        old_layers.pop("num_layers")
        d["num_layers"] = LAYERS + 10 ** 6  # kept: restored after the shrink
    swin_stages = d.get("num_layers", 0) > 10 ** 6
    for k, new in _SHRINK_INT.items():
        v = d.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > new:
            d[k] = new
    if swin_stages:
        d["num_layers"] = len(d["depths"])
    # a hybrid model keeps one layer of each kind: as many layers as kinds
    for k, v in list(d.items()):
        if isinstance(v, list) and v and not isinstance(v[0], dict):
            for lk, old in old_layers.items():
                if len(v) == old and old > d[lk] and _kinds(v) > d[lk]:
                    d[lk] = min(old, _kinds(v))
    for k, v in list(d.items()):
        if isinstance(v, list) and v and not isinstance(v[0], dict):
            for lk, old in old_layers.items():
                if len(v) == old and old > d[lk]:
                    d[k] = _cut_layer_list(v, d[lk])
                    break
    # hybrids that place attention every `period` layers from `offset`
    # (Jamba, Zamba): one attention layer among the remaining ones
    n_now = next((d[k] for k in old_layers), None)
    for per, off in (("attn_layer_period", "attn_layer_offset"),
                     ("expert_layer_period", "expert_layer_offset")):
        if isinstance(d.get(per), int) and isinstance(n_now, int) and d[per] > n_now:
            d[per] = n_now
            if isinstance(d.get(off), int):
                d[off] = min(d[off], n_now - 1)
    for k in ("num_attention_heads", "n_head", "num_heads", "encoder_attention_heads",
              "decoder_attention_heads"):
        w = d.get("hidden_size", d.get("d_model", d.get("n_embd")))
        if isinstance(d.get(k), int) and isinstance(w, int) and w % d[k]:
            d[k] = HEADS if w % HEADS == 0 else 1
    for k in ("head_dim", "d_head"):
        if k in d and (d[k] is None or isinstance(d[k], int)):
            d[k] = HIDDEN // HEADS
    v = d.get("hidden_sizes")
    so = d.get("stage_out_channels")
    if isinstance(v, list) and isinstance(so, list) and len(so) == len(v):
        # HGNet-V2: hidden_sizes name the stages' outputs, which the head reads
        d["hidden_sizes"] = list(so)
    elif (isinstance(v, list) and v and all(isinstance(x, int) for x in v) and max(v) > 64
            and "num_groups" not in d):
        # ResNet-style stage widths; not for group-norm models (BiT's
        # bottlenecks of a quarter width need 32 groups to divide them)
        d["hidden_sizes"] = [min(x, 32 * 2 ** i) for i, x in enumerate(v)]
        if d.get("stem_out_channels") == v[0]:
            # TextNet: the stem's output is the first stage's width
            d["stem_out_channels"] = d["hidden_sizes"][0]
    # per-stage head counts (Swin, SegFormer/GLPN) must divide the stage
    # widths: hidden_sizes[i], or embed_dim * 2**i for Swin-style stages
    for k in ("num_heads", "num_attention_heads"):
        hs = d.get(k)
        if isinstance(hs, list) and hs and all(isinstance(x, int) for x in hs):
            ws = d.get("hidden_sizes")
            if not (isinstance(ws, list) and len(ws) == len(hs) and all(isinstance(x, int) for x in ws)):
                e = d.get("embed_dim")
                ws = [e * 2 ** i for i in range(len(hs))] if isinstance(e, int) else None
            if ws:
                d[k] = [max(h for h in range(1, max(1, hh) + 1) if w % h == 0) for hh, w in zip(hs, ws)]
    if "kv_lora_rank" in d and isinstance(d.get("num_attention_heads"), int):
        d["num_key_value_heads"] = d["num_attention_heads"]  # latent attention has no GQA
    bb = d.get("backbone_config")
    if isinstance(bb, dict) and bb.get("model_type") == "timm_backbone":
        # DETR-style detectors default to a timm backbone (an optional
        # library): Transformers' own ResNet, taking the same stages
        from transformers import ResNetConfig

        idx = bb.get("out_indices") or [4]
        d["backbone_config"] = ResNetConfig(out_indices=list(idx)).to_dict()
        d["use_timm_backbone"] = False
        d["use_pretrained_backbone"] = False
        d["backbone"] = None
    if "pad_token_id" in d and d["pad_token_id"] is None:
        d["pad_token_id"] = 0  # sequence-classification heads need one for batch > 1
    n = next((d[k] for k in old_layers), None)
    # dicts keyed by layer index keep the layers that remain
    for k, v in list(d.items()):
        if isinstance(v, dict) and v and n is not None and all(str(x).isdigit() for x in v):
            d[k] = {x: y for x, y in v.items() if int(x) < n}
    # backbones: the stages taken as features are the last ones that remain
    if isinstance(d.get("out_indices"), list) and n is not None and "stage_names" in d:
        kk = len(d["out_indices"])
        for lk in old_layers:
            d[lk] = max(d[lk], kk)
        n = d[next(iter(old_layers))] if old_layers else n
        d["out_indices"] = list(range(n - kk + 1, n + 1))
        d.pop("out_features", None)
        d.pop("stage_names", None)
    for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
        if isinstance(d.get(k), int) and d[k] > 8:
            d[k] = 8
    for k in ("kv_lora_rank", "q_lora_rank"):
        if isinstance(d.get(k), int) and d[k] > 16:
            d[k] = 16
    if isinstance(d.get("qk_head_dim"), int) and "qk_nope_head_dim" in d:
        d["qk_head_dim"] = d["qk_nope_head_dim"] + d.get("qk_rope_head_dim", 0)
    rp = d.get("rope_parameters")
    if (isinstance(d.get("qk_rope_head_dim"), int) and isinstance(d.get("qk_nope_head_dim"), int)
            and isinstance(rp, dict) and "partial_rotary_factor" in rp):
        # MLA with a partial rotary factor (Mistral 4): the rotated share
        # of the (shrunk) query-key head
        full = d["qk_nope_head_dim"] + d["qk_rope_head_dim"]
        if isinstance(d.get("head_dim"), int):
            d["head_dim"] = full
        rp["partial_rotary_factor"] = d["qk_rope_head_dim"] / full
    if swin_stages and isinstance(d.get("window_size"), int) and isinstance(d.get("patch_size"), int):
        # all stages kept: windows of 4 and an image whose last stage is
        # one window (a stage smaller than its window breaks the bias)
        d["window_size"] = min(d["window_size"], 4)
        d["image_size"] = d["patch_size"] * d["window_size"] * 2 ** (len(d["depths"]) - 1)
    _fit_mrope(d)
    _fit_to_width(d, old_width)
    _fit_to_depth(d, old_layers)
    _fit_rope_per_type(d)
    # vision: one block per stage, small images
    v = d.get("depths")
    if isinstance(v, list) and v and all(isinstance(x, int) for x in v):
        d["depths"] = [1] * len(v)
    if isinstance(d.get("image_size"), int) and d["image_size"] > 64 and not swin_stages:
        p = d.get("patch_size")
        p = p if isinstance(p, int) and p > 0 else 16
        d["image_size"] = max(2 * p, 64 // p * p)
    for k, sub in d.items():
        if isinstance(sub, dict) and "model_type" in sub and depth < 3:
            _shrink_dict(sub, depth + 1)
    _fit_sam(d)
    # token ids (and id offsets) above the shrunk vocabulary move to its top
    vocab = _vocab(d)
    if isinstance(vocab, int):
        top = vocab - 1
        for k in sorted(d):
            v = d[k]
            if isinstance(v, int) and not isinstance(v, bool) and (
                    k.endswith(("_token_id", "_token_index", "_token_offset"))) and v >= vocab:
                d[k] = top
                top -= 1
    return d


def _fit_to_width(d, old):
    """Values tied to the width that the shrink changed: depthwise conv
    groups equal to the old width (Mimi's upsample_groups), feature lists
    that end at the width (EfficientLoFTR's out_features, scaled by the
    same factor), and a Mamba head state set apart (Falcon-H1's
    mamba_d_ssm = mamba_n_heads x mamba_d_head)."""
    w = next((d[k] for k in ("hidden_size", "d_model") if isinstance(d.get(k), int)), None)
    if isinstance(old, int) and isinstance(w, int) and old > w:
        for k, v in list(d.items()):
            if "groups" in k and v == old and not isinstance(v, bool):
                d[k] = w
            elif (isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
                    and v[-1] == old and "features" in k and old % w == 0):
                f = old // w
                d[k] = [max(1, x // f) for x in v]
    if all(isinstance(d.get(k), int) for k in ("mamba_d_ssm", "mamba_n_heads", "mamba_d_head")):
        d["mamba_d_ssm"] = d["mamba_n_heads"] * d["mamba_d_head"]


def _fit_to_depth(d, old_layers):
    """Counts of layers per part (Dory's n_input_layers, n_recurrent_layers,
    n_output_layers) that summed to the old depth sum to the new one, each
    part that had layers keeping at least one where the depth allows; a
    count of layers sharing another's key-value cache (Gemma 3n's
    num_kv_shared_layers) that would leave a layer type without a layer
    producing its cache goes to 0."""
    for lk, old in old_layers.items():
        n = d.get(lk)
        if not isinstance(n, int) or n >= old:
            continue
        parts = [k for k, v in d.items() if k.startswith("n_") and k.endswith("_layers") and k != lk
                 and isinstance(v, int) and not isinstance(v, bool)]
        if len(parts) > 1 and sum(d[k] for k in parts) == old:
            new = {k: (1 if d[k] else 0) for k in parts}
            rest = n - sum(new.values())
            for k in sorted(parts, key=lambda k: -d[k]):
                if rest <= 0:
                    break
                new[k] += 1
                rest -= 1
            while sum(new.values()) > n:
                k = min((k for k in parts if new[k] > 0), key=lambda k: d[k])
                new[k] -= 1
            d.update(new)
        sh = d.get("num_kv_shared_layers")
        if isinstance(sh, int) and sh > 0:
            lt = d.get("layer_types")
            first = n - sh
            if first <= 0 or (isinstance(lt, list) and set(lt[:first]) != set(lt)):
                d["num_kv_shared_layers"] = 0


def _fit_rope_per_type(d):
    """Rotary parameters given per layer type (Gemma-style {"full_attention":
    {...}, "sliding_attention": {...}}) name every type of layer_types: a
    default config that leaves them empty (Cohere Compass: {}) gets a
    default rotary for each, a missing type the parameters of a listed one."""
    lt, rp = d.get("layer_types"), d.get("rope_parameters")
    if not (isinstance(lt, list) and lt and all(isinstance(x, str) for x in lt) and isinstance(rp, dict)):
        return
    per_type = [k for k in rp if k in lt]
    if rp and not per_type:
        return  # one set of parameters for every layer
    for t in dict.fromkeys(x for x in lt if "attention" in x):
        if t not in rp:
            rp[t] = dict(rp[per_type[0]]) if per_type else {"rope_type": "default", "rope_theta": 10000.0}


def _fit_sam(d):
    """SAM-style models (a vision encoder, a prompt encoder and a mask
    decoder): the vision neck's output_channels and the prompt encoder's
    width are the mask decoder's (shrunk) width, and the prompt encoder's
    image_embedding_size is the vision encoder's patch grid."""
    v, pe, md = (d.get(k) for k in ("vision_config", "prompt_encoder_config", "mask_decoder_config"))
    if not all(isinstance(x, dict) for x in (v, pe, md)) or not isinstance(md.get("hidden_size"), int):
        return
    w = md["hidden_size"]
    if isinstance(v.get("output_channels"), int):
        v["output_channels"] = w
    if isinstance(v.get("num_pos_feats"), int):
        v["num_pos_feats"] = w // 2  # the random-Fourier positional embedding: sin and cos halves
    if isinstance(pe.get("hidden_size"), int):
        pe["hidden_size"] = w
    img, p = v.get("image_size"), v.get("patch_size")
    if isinstance(img, int) and isinstance(p, int) and p > 0:
        for k, x in (("image_size", img), ("patch_size", p), ("image_embedding_size", img // p)):
            if k in pe:
                pe[k] = x


def _fit_mrope(d):
    """Multimodal rotary sections (Qwen2-VL style: time, height, width) must
    sum to half the rotated head: rescaled to the shrunk head."""
    rp = d.get("rope_parameters") if isinstance(d.get("rope_parameters"), dict) else {}
    if d.get("model_type") in _MROPE_TYPES and isinstance(d.get("rope_parameters"), dict) and (
            "rope_type" in d["rope_parameters"]):
        # the model's default when the config has none (Qwen2-VL's rotary)
        rp.setdefault("mrope_section", [16, 24, 24])
    for holder in (rp, d):
        sec = holder.get("mrope_section")
        if not (isinstance(sec, list) and sec and all(isinstance(x, int) for x in sec)):
            continue
        w = d.get("hidden_size")
        h = d.get("num_attention_heads")
        hd = d.get("qk_rope_head_dim") or d.get("head_dim") or (
            w // h if isinstance(w, int) and isinstance(h, int) and h else None)
        if not isinstance(hd, int):
            continue
        target = hd // 2
        if sum(sec) == target or target < len(sec):
            continue
        new = [max(1, round(x * target / sum(sec))) for x in sec]
        while sum(new) > target:
            new[new.index(max(new))] -= 1
        while sum(new) < target:
            new[new.index(min(new))] += 1
        holder["mrope_section"] = new


_MROPE_TYPES: set = set()


def _mrope_types(cfg, depth=0):
    """Model types (of cfg and its sub-configs) whose rotary takes an
    mrope_section, which their configs may leave to the model's default."""
    out = set()
    if "mrope_section" in (getattr(type(cfg), "ignore_keys_at_rope_validation", None) or ()):
        out.add(cfg.model_type)
    if depth < 3:
        for _, sub in _sub_configs(cfg):
            out |= _mrope_types(sub, depth + 1)
    return out


def _int_or_ints(v):
    if isinstance(v, list):
        return bool(v) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
    return isinstance(v, int) and not isinstance(v, bool)


def _derived_ints(cfg, depth=0):
    """{path: {attribute: value}} of the integers (and lists of them)
    cfg's __post_init__ computed (a dataclass field whose declared default is None, holding an
    int): Zamba 2's attention and mamba head widths, RWKV's attention width,
    HRM's per-stack depth; or an attribute that is no field at all, set by
    __post_init__ (Zamba 2's mamba_headdim, and its hybrid_layer_ids that
    index the full-depth layers). to_dict() stores them, so the shrunk dict would
    carry the full-size values back; where the shrink left one unchanged it
    is dropped and the config derives it again from the shrunk widths."""
    import dataclasses

    out = {}
    if dataclasses.is_dataclass(cfg):
        fields = {f.name: f for f in dataclasses.fields(cfg)}
        own = {k: v for k, v in vars(cfg).items() if _int_or_ints(v) and not k.startswith("_")
               and (k not in fields or (fields[k].default is None
                                        and fields[k].default_factory is dataclasses.MISSING))}
        if own:
            out[()] = own
    if depth < 3:
        for k, sub in _sub_configs(cfg):
            out.update({(k,) + p: v for p, v in _derived_ints(sub, depth + 1).items()})
    return out


def _drop_stale_derived(d, derived):
    for path, own in derived.items():
        holder = d
        for k in path:
            holder = holder.get(k) if isinstance(holder, dict) else None
        if isinstance(holder, dict):
            for k, v in own.items():
                if holder.get(k) == v and not k.endswith(("_token_id", "_token_index")):
                    del holder[k]


def _shrink(cfg, pre=None, wide=False):
    _MROPE_TYPES.clear()
    _MROPE_TYPES.update(_mrope_types(cfg))
    d = _shrink_dict(cfg.to_dict())
    if wide:
        _shrink_widths(d)
    kept = copy.deepcopy(d)
    _drop_stale_derived(d, _derived_ints(cfg))
    for dd in (d, kept):
        for k in ("transformers_version", "architectures", "_name_or_path"):
            dd.pop(k, None)
        for k, v in copy.deepcopy(pre or {}).items():
            if isinstance(v, dict) and isinstance(dd.get(k), dict):
                dd[k].update(v)  # a sub-config: its attributes
            else:
                dd[k] = v
    labels = getattr(cfg, "num_labels", None)
    try:
        new = type(cfg).from_dict(d)
    except Exception:  # noqa: BLE001
        # a dropped value the parent config propagates into its sub-config
        # and then validates (NemotronH Omni's video_temporal_patch_size):
        # the shrunk dict with the derived values kept
        new = type(cfg).from_dict(kept)
    cfg = new
    if isinstance(labels, int) and getattr(cfg, "num_labels", labels) != labels:
        # from_dict gave BART 2 labels where its default is 3; save_pretrained
        # then writes none, and the reloaded head has 3 outputs again
        cfg.num_labels = labels
    return cfg


# Second pass (_shrink_widths), only for a config the generic shrink left
# above this many parameters (the harness's limit): widths under the model's
# own names (codecs' decoder_hidden_size, upsample_initial_channel, SAM's
# memory_attention_hidden_size, stage widths per list, ...). It is not
# applied to configs that are small already, so their results stand.
WIDE_LIMIT = 30_000_000
_WIDTH_WORDS = ("hidden_size", "hidden_dim", "intermediate", "ffn", "embed_dim", "channel",
                "mlp_dim", "_dim", "filters", "feature_dims", "num_latents")
_NOT_WIDTH_WORDS = ("token", "max_", "positions", "kernel", "stride", "sampling", "rate",
                    "image_size", "patch", "window", "rope", "embedding_base", "period", "length",
                    "num_mel", "mel_bins", "layer", "head", "input_dim", "_id")
_VOCAB_WORDS = ("vocab", "num_embeddings", "num_embeds", "zero_expert_num")


def _width_name(k):
    return any(w in k for w in _WIDTH_WORDS) and not any(w in k for w in _NOT_WIDTH_WORDS)


def _shrink_widths(d, depth=0):
    """Width-like ints above 64 become 64 (FFN-like) or 32; lists of widths
    are divided by one power of two (ratios kept, so channel halvings and
    group counts still divide) until their largest is at most 64;
    secondary vocabularies and embedding tables go to VOCAB. Where the
    widths double per down-sampling stage (a `*ratios`/`*multiplier` list:
    codecs' encoders), the base widths go to 8."""
    staged = any(isinstance(v, list) and ("ratios" in k or "multiplier" in k) for k, v in d.items())
    for k, v in list(d.items()):
        if isinstance(v, bool):
            continue
        if isinstance(v, int) and any(w in k for w in _VOCAB_WORDS) and v > VOCAB and (
                "_token" not in k):
            d[k] = VOCAB if "expert" not in k else EXPERTS
        elif isinstance(v, int) and v > 64 and _width_name(k):
            d[k] = FFN if any(w in k for w in ("intermediate", "ffn", "mlp")) else HIDDEN
        if staged and isinstance(d[k], int) and d[k] > 8 and _width_name(k) and (
                "filters" in k or "encoder_hidden_size" in k):
            d[k] = 8
        elif (isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
                and max(v) > 64 and min(v) > 1 and _width_name(k)):
            f = 1
            while max(v) // f > 64:
                f *= 2
            d[k] = [max(1, x // f) for x in v]
        elif isinstance(v, dict) and depth < 4 and all(isinstance(x, str) for x in v):
            _shrink_widths(v, depth + 1)
    return d


def _model_config_class(arch, model_type):
    """The config class a model class is built from, where it is not the
    model type's (Llama4TextModel and Llama4VisionModel are listed under
    "llama4" and take Llama4TextConfig / Llama4VisionConfig, MusicgenModel
    its MusicgenDecoderConfig); None otherwise."""
    import transformers
    from transformers import CONFIG_MAPPING

    try:
        cc = getattr(getattr(transformers, arch), "config_class", None)
    except Exception:  # noqa: BLE001  (optional dependency missing)
        return None
    comp = CONFIG_MAPPING[model_type]
    subs = tuple(getattr(comp, "sub_configs", {}).values())
    if cc is None or cc is comp or not isinstance(cc, type):
        return None
    # a sub-config of the composite (Llama4TextConfig), or a config of its
    # own that no model type names (JevForDecision's JevConfig, under
    # "gemma4"); not another model type's (LlamaForCausalLM under "exaone")
    if cc in subs or cc.model_type not in CONFIG_MAPPING:
        return cc
    return None


def tiny_config(arch, model_type, config_class=None):
    """The model type's default config (or `config_class`'s), shrunk. OVERRIDES[model_type] then
    OVERRIDES[arch]: a dict is merged into the shrunk to_dict() before the
    config is rebuilt (so derived fields follow; a dict value for a
    sub-config updates its attributes), a callable(cfg) edits the built
    config. A model class built from a sub-config of its model type's
    (Llama4TextModel) gets that sub-config of the shrunk composite one, or
    its own class's shrunk default. A config still above WIDE_LIMIT
    parameters is shrunk again with _shrink_widths."""
    from transformers import CONFIG_MAPPING

    pre, post = {}, []
    for key in (model_type, arch):
        o = OVERRIDES.get(key)
        if callable(o):
            post.append(o)
        elif o:
            pre.update(o)
    cc = None if config_class is not None else _model_config_class(arch, model_type)

    def build(wide):
        cfg = _shrink((config_class or CONFIG_MAPPING[model_type])(), pre, wide)
        if cc is not None:
            sub = next((v for _, v in _sub_configs(cfg) if type(v) is cc), None)
            cfg = sub if sub is not None else _shrink(cc(), pre, wide)
        for o in post:
            o(cfg)
        return cfg

    cfg = build(False)
    try:
        import transformers

        # on a copy: building a model may edit its config (BartForCausalLM
        # sets is_decoder), and the harness builds from the config returned
        n = n_params_meta(getattr(transformers, arch), copy.deepcopy(cfg))
    except Exception:  # noqa: BLE001  (the harness reports the build's error)
        return cfg
    return build(True) if n > WIDE_LIMIT else cfg


# Per-architecture (or model type) overrides where the generic shrink is not
# enough. Keys are model types or class names; each says why.
OVERRIDES: dict = {
    # hybrids whose attention layers are listed by index or default to none
    "bamba": {"attn_layer_indices": [1]},
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention"]},
    "recurrent_gemma": {"block_types": ["recurrent", "attention"]},
    # LiLT's layout embeddings are 6 slices of hidden_size // 6, shrunk by
    # channel_shrink_ratio: a width that 6 and 4 divide
    "lilt": {"hidden_size": 48},
    # LayoutLMv3: 4 coordinate + 2 shape embeddings concatenate to the width
    "layoutlmv3": {"coordinate_size": 4, "shape_size": 8},
    # VITS samples its latents and durations with torch.randn on the
    # model's device, scaled by these: the tpu generator's stream differs
    # from CPU's, so parity is checked without the noise (the flow and the
    # duration predictor still run)
    "vits": {"noise_scale": 0.0, "noise_scale_duration": 0.0},
    # VibeVoice's acoustic tokenizer samples its latents the same way
    # (vae_std * torch.randn on the model's device)
    "vibevoice_acoustic_tokenizer": {"vae_std": 0.0},
    # Nemotron leaves num_key_value_heads None; DeepSeek-V2 num_experts_per_tok
    "nemotron": {"num_key_value_heads": KV_HEADS},
    "deepseek_v2": {"num_experts_per_tok": 2},
    # Reformer: the axial position factors sum to the width
    "reformer": {"axial_pos_embds_dim": [HIDDEN // 2, HIDDEN // 2], "axial_pos_shape": [8, 8]},
    # DPT reads 4 hidden states (one per neck size) from a 4-layer ViT
    "dpt": {"num_hidden_layers": 4, "backbone_out_indices": [0, 1, 2, 3]},
    # EfficientNet-B7's widths and depths: scaled down
    "efficientnet": {"width_coefficient": 0.25, "depth_coefficient": 0.25, "hidden_dim": 320},
    # Bros derives its 1-d box sinusoid width as hidden_size // 4 // dim_bbox
    # (8 coordinates): 32 gives 1, whose half is 0; 64 gives 2
    "bros": {"hidden_size": 2 * HIDDEN},
    # BLIP-2 / InstructBLIP: no image token by default (inputs put
    # num_query_tokens of it in the text)
    "blip-2": {"image_token_index": VOCAB - 2},
    "instructblip": {"image_token_index": VOCAB - 2},
    "instructblipvideo": {"video_token_index": VOCAB - 2},
    # probabilistic forecasters need a horizon; feature_size (lags + time
    # features + loc and scale) is stored in to_dict() and would stay stale
    **{mt: {"prediction_length": 4, "context_length": 8, "lags_sequence": [1, 2, 3],
            "num_time_features": 1, "feature_size": 3 + 1 + 2}
       for mt in ("autoformer", "informer", "time_series_transformer")},
    # X-MOD's adapters need a language; ESM's vocabulary has no default
    "xmod": {"default_language": "en_XX"},
    "esm": {"vocab_size": 33},
    # validators: ESMC has no grouped-query attention; Mamba-2's heads x
    # head_dim = expand x hidden; Fun-ASR's adaptor is a quarter of the text width
    "esmc": {"num_key_value_heads": HEADS},
    "mamba2": {"head_dim": 2 * HIDDEN // HEADS, "n_groups": 1},
    # Dory's to_dict() writes each decoder layer as an attention block and an
    # mlp block (every count doubled): three layers, one per part
    "dory": {"num_hidden_layers": 6, "n_input_layers": 2, "n_recurrent_layers": 2, "n_output_layers": 2,
             "layer_types": ["sliding_attention", "mlp", "full_attention", "mlp", "sliding_attention", "mlp"]},
    # Default configs that cannot be built as they stand (a checkpoint
    # supplies the value; Transformers' default leaves it None or the
    # model reads an attribute its config class lacks):
    # Apertus 1.5: the visual tokens [image_token_offset, + codebook_size)
    # end where the audio tokens begin, inside the text vocabulary
    "apertus1p5": {"image_token_offset": 256, "audio_token_offset": 320,
                   "vision_config": {"codebook_size": 64}, "audio_config": {"codebook_size": 64}},
    # BridgeTower's vision tower has hidden_size // 64 heads
    "bridgetower": {"vision_config": {"hidden_size": 64}},
    # DBRX's attention reads attn_config.rope_theta, which its class lacks,
    # and clamps with clip_qkv, which defaults to None
    "dbrx": {"attn_config": {"rope_theta": 10000.0, "clip_qkv": 8.0}},
    # DETR's mask head takes hidden_size + heads channels in groups of 8
    "DetrForSegmentation": {"encoder_attention_heads": 8},
    "diffusion_gemma": {"text_config": {"num_experts": EXPERTS, "top_k_experts": 2,
                                        "moe_intermediate_size": FFN // 2}},
    "dots1": {"n_routed_experts": EXPERTS, "n_shared_experts": 1, "num_experts_per_tok": 2},
    # Dots3 Note's sliding-window layers use the MLA query-key head (nope +
    # rope, 8 + 8 after shrinking) as head_dim; the default's per-layer
    # entries that set it go with the cut layers
    "dots3_note": {"text_config": {"head_dim": 16}},
    "dots3_note_text": {"head_dim": 16},
    # BEiT's segmentation head reads 4 hidden states
    "BeitForSemanticSegmentation": {"num_hidden_layers": 4, "out_indices": [1, 2, 3, 4]},
    "HieraForPreTraining": {"decoder_hidden_size": HIDDEN, "decoder_depth": 1, "decoder_num_heads": 1},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"]},
    # Moonshine Streaming's decoder reads num_key_value_heads from the
    # top-level config, which has none; its cache layout wants no GQA
    "moonshine_streaming": {"num_key_value_heads": HEADS},
    # NeoMME's two M-RoPE axes take rotated dims in pairs of pairs: a quarter
    # of the head must be a multiple of 4
    "neomme": {"head_dim": 16},
    "qwen4_exp": {"text_config": {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 8,
                                  "indexer_budget": 4, "indexer_compress_ratio": 2}},
    "qwen4_exp_text": {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 8,
                       "indexer_budget": 4, "indexer_compress_ratio": 2},
    # the encoder's layers read dropout_rate from a text config that has none
    "t5gemma2_encoder": {"text_config": {"dropout_rate": 0.0}},
    "T5GemmaEncoderModel": {"is_encoder_decoder": False},
    "Wav2Vec2BertForCTC": {"vocab_size": 32},
    "Wav2Vec2ConformerForCTC": {"vocab_size": 32},
    # Zamba ties the shared transformer of the first hybrid layer to the
    # others': two hybrid layers
    "zamba": {"num_hidden_layers": 3, "layers_block_type": ["linear_attention", "hybrid", "hybrid"]},
    # Molmo 2 reads ViT layers 24 and 18 (negative indices wrap to the depth)
    "molmo2": {"adapter_config": {"vision_feature_layer": [-1, -2]}},
    "fun_asr_nano": {"adaptor_config": {"intermediate_size": HIDDEN // 4}},
    # MusicGen's decoders start generate's delay pattern from
    # decoder_start_token_id, which their own configs leave unset (the
    # composite model's config gives it)
    # Reformer's LM head asserts a decoder config
    "ReformerModelWithLMHead": {"is_decoder": True},
    "MusicgenForCausalLM": {"decoder_start_token_id": VOCAB - 1},
    "MusicgenMelodyForCausalLM": {"decoder_start_token_id": VOCAB - 1},
}


# RT-DETR-style detectors: their random init gives every BatchNorm and
# LayerNorm weight a value of std ~0.01 (a checkpoint's are O(1)), so each
# of the dozens of norms shrinks the image's signal a hundredfold and the
# encoder's features are their biases alone: every anchor scores the same
# to the last ulp or two, and the top-k query selection (enc_topk_bboxes)
# picks among ties, whose order CPU leaves unspecified (not lowest index
# first: `torch.topk` on CPU returns tied indices in partial-sort order) and
# any rounding difference flips. With PyTorch's own norm init (weight 1) the
# features carry the image and the scores are apart.
UNIT_NORM_WEIGHTS = {"rt_detr", "rt_detr_v2", "d_fine", "deimv2", "pp_doclayout_v3", "pp_doclayout_v4"}


def adjust_weights(model, model_type):
    """Per-model-type changes to a built model's random weights (before it
    is saved, so CPU and tpu load the same)."""
    import torch

    if model_type in UNIT_NORM_WEIGHTS:
        norms = (torch.nn.modules.batchnorm._NormBase, torch.nn.LayerNorm, torch.nn.GroupNorm)
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, norms) and getattr(m, "weight", None) is not None:
                    m.weight.fill_(1.0)


def unloaded_modules(model):
    """Modules a model keeps outside its module tree (in a plain list, dict
    or attribute that is not a registered submodule) whose weights are
    still on the meta device after from_pretrained: they are never loaded,
    and a forward through them reads uninitialised memory on every device
    (a conv or mm mixing a meta weight with a real input returns an
    unfilled tensor on the input's device, on CPU as on tpu). OneFormer's `transformer_module.input_projections` is such a
    list."""
    import torch

    found = []

    # modules only: a bare tensor attribute left on meta may be one that
    # forward recomputes (never read), and is not flagged
    def meta(v):
        if isinstance(v, torch.nn.Module):
            return any(t.is_meta for t in list(v.parameters()) + list(v.buffers()))
        if isinstance(v, (list, tuple)):
            return any(meta(x) for x in v)
        if isinstance(v, dict):
            return any(meta(x) for x in v.values())
        return False

    for name, mod in model.named_modules():
        for attr, v in vars(mod).items():
            if attr.startswith("_"):
                continue
            if isinstance(v, (torch.nn.Module, list, tuple, dict)) and meta(v):
                found.append(f"{name}.{attr}" if name else attr)
    return found


# ---------------------------------------------------------------- inputs
BATCH = 2
SEQ = 8


def special_ids(cfg):
    ids = set()
    stack = [cfg]
    while stack:
        c = stack.pop()
        ids |= {v for _, v in _token_attrs(c)}
        stack += [s for _, s in _sub_configs(c)]
    return ids


def text_ids(cfg, shape, gen):
    vocab = getattr(cfg, "vocab_size", None) or getattr(getattr(cfg, "text_config", None), "vocab_size", None)
    if not isinstance(vocab, int):
        # composite configs without a text_config (Dia's encoder_config of 256
        # byte ids, FastSpeech 2's model_config): the smallest vocabulary of
        # its sub-configs, whose ids then embed in every one of them
        subs = [getattr(s, "vocab_size", None) for _, s in _sub_configs(cfg)]
        vocab = min([v for v in subs if isinstance(v, int) and v > 0] or [VOCAB])
    hi = max(8, min(vocab, VOCAB) - 16)
    ids = torch.randint(4, hi, shape, generator=gen)
    for s in special_ids(cfg):
        ids[ids == s] = 5 if s != 5 else 6
    return ids


def _cfg_get(cfg, *names, default=None):
    for c in [cfg] + [s for _, s in _sub_configs(cfg)]:
        for n in names:
            v = getattr(c, n, None)
            if v is not None:
                return v
    return default


def _image(cfg, gen):
    ch = _cfg_get(cfg, "num_channels", "in_channels", default=3)
    size = _cfg_get(cfg, "image_size", "input_size", default=64)
    if isinstance(size, (list, tuple)) and len(size) >= 2:
        h, w = size[-2], size[-1]  # (height, width): MGP-STR, ViTPose
    elif isinstance(size, (list, tuple)):
        h = w = size[-1]
    elif isinstance(size, dict):
        h, w = size.get("height", 64), size.get("width", size.get("height", 64))
    else:
        h = w = size
    if not isinstance(ch, int):
        ch = 3
    return torch.randn(BATCH, ch, h, w, generator=gen)


GRID = 4  # patches per side of the one image of a grid_thw model


def _grid_image(cfg, gen):
    """Qwen2-VL-style vision input: the image as its flattened patches
    (patches, channels * temporal_patch * patch * patch) and its grid
    (t, h, w) per image; returns (patches, grid_thw, tokens per image)."""
    vc = getattr(cfg, "vision_config", None) or cfg
    p = getattr(vc, "patch_size", None) or 14
    t = getattr(vc, "temporal_patch_size", None) or 2  # Qwen2-VL's default
    m = getattr(vc, "spatial_merge_size", None) or 1
    ch = getattr(vc, "in_channels", None) or getattr(vc, "num_channels", None) or 3
    p = p[0] if isinstance(p, (list, tuple)) else p
    grid = torch.tensor([[1, GRID, GRID]] * BATCH)
    patches = torch.randn(BATCH * GRID * GRID, ch * t * p * p, generator=gen)
    return patches, grid, GRID * GRID // (m * m)


def _single_frame_patches(cfg, c, key):
    """Vision towers of still images (no temporal patch: Cosmos 3 Edge,
    HY-V4-VL, GLM-Image, Kimi K2.5, PaddleOCR-VL): the grid's patches
    channels * patch * patch wide, flat, as (patches, c, p, p), or
    (1, patches, c, p, p)."""
    vc = getattr(cfg, "vision_config", None) or cfg
    p = getattr(vc, "patch_size", None) or 14
    p = p[0] if isinstance(p, (list, tuple)) else p
    ch = getattr(vc, "in_channels", None) or getattr(vc, "num_channels", None) or 3
    n = c[key].shape[0]
    flat = torch.randn(n, ch * p * p, generator=torch.Generator().manual_seed(3))
    return [dict(c, **{key: flat}), dict(c, **{key: flat.view(n, ch, p, p)}),
            dict(c, **{key: flat.view(1, n, ch, p, p)})]


def _with_image_tokens(cfg, ids, n):
    """Text ids with one image per row: [start] n image tokens [end]."""
    img = _cfg_get(cfg, "image_token_id", "image_token_index")
    if not isinstance(img, int):
        return None
    start = _cfg_get(cfg, "vision_start_token_id", "image_start_token_id")
    end = _cfg_get(cfg, "vision_end_token_id", "image_end_token_id")
    ids = ids.clone()
    if ids.shape[-1] < n + 4:
        ids = ids.repeat(1, (n + 4) // ids.shape[-1] + 1)[:, : n + 4]
    i = 1
    if isinstance(start, int):
        ids[:, i] = start
        i += 1
    ids[:, i: i + n] = img
    if isinstance(end, int):
        ids[:, i + n] = end
    return ids


def _fill_required(c, params, cfg, gen):
    """Required forward arguments beside the main input, by name: the
    Q-Former's text (InstructBLIP), feature masks, SegGPT's prompt,
    VideoMAE's pretraining mask, BLIP-2 Q-Former's query embeddings."""
    required = {n for n, p in params.items() if p.default is inspect.Parameter.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)} - set(c)
    c = dict(c)
    if "qformer_input_ids" in required:
        qcfg = getattr(cfg, "qformer_config", None) or cfg
        c["qformer_input_ids"] = text_ids(qcfg, (BATCH, SEQ), gen)
        if "qformer_attention_mask" in params:
            c["qformer_attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)
    for k in required:
        if k.endswith("_mask") and k.replace("_mask", "") in c:
            c[k] = torch.ones(c[k.replace("_mask", "")].shape[:2], dtype=torch.long)
    pv = c.get("pixel_values")
    if isinstance(pv, torch.Tensor):
        if "prompt_pixel_values" in required:
            c["prompt_pixel_values"] = torch.randn(pv.shape, generator=gen)
        if "prompt_masks" in required:
            c["prompt_masks"] = torch.randn(pv.shape, generator=gen)
        if "bool_masked_pos" in required:
            p = _cfg_get(cfg, "patch_size", default=16)
            t = _cfg_get(cfg, "tubelet_size", default=1)
            n = (pv.shape[1] // t if pv.dim() == 5 else 1) * (pv.shape[-1] // p) * (pv.shape[-2] // p)
            m = torch.zeros(BATCH, n, dtype=torch.bool)
            m[:, ::2] = True  # the same count per sample
            c["bool_masked_pos"] = m
    if "noise" in params and isinstance(pv, torch.Tensor) and pv.dim() == 4 and "noise" not in c:
        # ViTMAE shuffles patches by torch.rand on the input's device; the
        # tpu generator's stream differs from CPU's, so the noise is an input
        p = _cfg_get(cfg, "patch_size", default=16)
        p = p[0] if isinstance(p, (list, tuple)) else p
        c["noise"] = torch.rand(BATCH, (pv.shape[-1] // p) * (pv.shape[-2] // p), generator=gen)
    if "visual_feats" in params and "visual_feats" not in c and "input_ids" in c:
        # LXMERT: region features and their boxes
        fd = _cfg_get(cfg, "visual_feat_dim", default=HIDDEN)
        pd = _cfg_get(cfg, "visual_pos_dim", default=4)
        c["visual_feats"] = torch.randn(BATCH, 4, fd, generator=gen)
        c["visual_pos"] = torch.rand(BATCH, 4, pd, generator=gen)
    if "global_attention_mask" in params and "input_ids" in c and "global_attention_mask" not in c:
        # Longformer: global attention on the first token (its QA head
        # otherwise derives it from exactly three separators per sample)
        g = torch.zeros_like(c["input_ids"])
        g[..., 0] = 1
        c["global_attention_mask"] = g
    if "task_inputs" in required:
        # OneFormer's task prompt, task_seq_len token ids
        n = _cfg_get(cfg, "task_seq_len", default=SEQ)
        c["task_inputs"] = text_ids(cfg, (BATCH, n if isinstance(n, int) and n <= 128 else SEQ), gen)
    if "query_embeds" in required:
        w = _cfg_get(cfg, "hidden_size", default=HIDDEN)
        c["query_embeds"] = torch.randn(BATCH, 4, w, generator=gen)
    return c


def codebook_rows(cfg):
    """MusicGen's decoders take one row of ids per codebook and batch
    element, (batch x num_codebooks, length); other models one per element."""
    if getattr(cfg, "model_type", "") in ("musicgen_decoder", "musicgen_melody_decoder"):
        return int(getattr(cfg, "num_codebooks", 1) or 1)
    return 1


def make_inputs(model, cfg, family, seed=0):
    """Candidate input dicts (CPU tensors) for `model(**inputs)`, most
    complete first: the harness uses the first one CPU's forward accepts.
    Raises LookupError when it knows no recipe for the main input."""
    gen = torch.Generator().manual_seed(seed)
    if getattr(type(model).forward, "__name__", "") == "_forward_unimplemented":
        # Bark, GLM-Image's VQ-VAE: containers of sub-models, used through
        # generate / encode / decode; there is no forward to compare
        raise LookupError("the class has no forward of its own (nn.Module's unimplemented one)")
    params = inspect.signature(model.forward).parameters
    p = params.get("inference_session")
    if p is not None and p.default is inspect.Parameter.empty:
        # SAM 3 video models: forward steps a video-tracking session object
        raise LookupError("forward takes a video inference session object (inference_session), not tensors")
    main = getattr(model, "main_input_name", "input_ids")
    if isinstance(main, (list, tuple)):
        # several main inputs (OneFormer: pixel_values and task_inputs): the
        # first one's recipe, the others filled by name (_fill_required)
        main = main[0]
    base = {}
    if "grid_thw" in params or ("image_grid_thw" in params and "input_ids" not in params):
        # Qwen2-VL-style vision towers: flattened patches and their grid
        patches, grid, _ = _grid_image(cfg, gen)
        key = "hidden_states" if "hidden_states" in params else "pixel_values"
        c = {key: patches, "grid_thw" if "grid_thw" in params else "image_grid_thw": grid}
        if "merge_sizes" in params:
            m = _cfg_get(cfg, "spatial_merge_size", default=1)
            c["merge_sizes"] = torch.tensor([m] * BATCH)
        return [c] + _single_frame_patches(cfg, c, key)
    if main == "input_ids" or (main not in params and "input_ids" in params):
        shape = (BATCH, 2, SEQ) if family == "MODEL_FOR_MULTIPLE_CHOICE" else (BATCH, SEQ)
        shape = (BATCH * codebook_rows(cfg),) + shape[1:]
        ids = text_ids(cfg, shape, gen)
        eos = getattr(cfg, "eos_token_id", None)
        if isinstance(eos, int) and 0 <= eos < (getattr(cfg, "vocab_size", None) or VOCAB):
            ids[..., -1] = eos  # heads that pool at the eos token (BART-style) need one per row
        base["input_ids"] = ids
        if "attention_mask" in params:
            base["attention_mask"] = torch.ones_like(ids)
    elif main == "pixel_values":
        base["pixel_values"] = _image(cfg, gen)
    elif main in ("input_values", "input_features"):
        pass
    elif main == "pixel_values_videos":
        # video-only models (V-JEPA 2, VideoPrism): (batch, frames, c, h, w)
        fr = _cfg_get(cfg, "frames_per_clip", "num_frames", default=4)
        fr = fr if isinstance(fr, int) and 0 < fr <= 32 else 4
        img = _image(cfg, gen)
        c = {"pixel_values_videos": img.unsqueeze(1).repeat(1, fr, 1, 1, 1)
             + 0.1 * torch.randn((BATCH, fr) + tuple(img.shape[1:]), generator=gen)}
        # video + text (VideoPrism CLIP): with token ids as well
        ids = text_ids(cfg, (BATCH, SEQ), torch.Generator().manual_seed(3))
        return [c] + ([dict(c, input_ids=ids, attention_mask=torch.ones_like(ids))]
                      if "input_ids" in params else [])
    elif main == "inputs":
        # Perceiver: whatever its preprocessor takes, token ids or an image
        w = _cfg_get(cfg, "d_model", default=HIDDEN)
        return [{"inputs": text_ids(cfg, (BATCH, SEQ), gen)}, {"inputs": _image(cfg, gen)},
                {"inputs": torch.randn(BATCH, SEQ, w, generator=gen)}]
    elif main == "past_values":
        # time series: (batch, context, channels), or (batch, context) with
        # its padding mask and frequency (TimesFM)
        ctx = _cfg_get(cfg, "context_length", default=32)
        ctx = ctx if isinstance(ctx, int) and ctx <= 1024 else 64
        pred = _cfg_get(cfg, "prediction_length")
        lags = _cfg_get(cfg, "lags_sequence")
        if isinstance(pred, int) and isinstance(lags, list) and "past_time_features" in params:
            # Autoformer / Informer / TimeSeriesTransformer: the history
            # covers the context and the largest lag, with time features
            n = ctx + max(lags)
            tf = _cfg_get(cfg, "num_time_features", default=1)
            return [{"past_values": torch.randn(BATCH, n, generator=gen),
                     "past_time_features": torch.randn(BATCH, n, tf, generator=gen),
                     "past_observed_mask": torch.ones(BATCH, n),
                     "future_values": torch.randn(BATCH, pred, generator=gen),
                     "future_time_features": torch.randn(BATCH, pred, tf, generator=gen)}]
        ch = _cfg_get(cfg, "num_input_channels", default=1)
        cands = [{"past_values": torch.randn(BATCH, ctx, ch, generator=gen)}]
        flat = {"past_values": torch.randn(BATCH, ctx, generator=gen)}
        if "past_values_padding" in params:
            flat["past_values_padding"] = torch.zeros(BATCH, ctx, dtype=torch.long)
        if "freq" in params:
            flat["freq"] = torch.zeros(BATCH, 1, dtype=torch.long)
        return cands + [flat]
    elif main.endswith("_embeds"):
        # embeddings in (Nemotron 3.5's word-timestamp head; MuSE Glimmer's
        # draft noise with the target model's context states)
        w = _cfg_get(cfg, "hidden_size", default=HIDDEN)
        c = {main: torch.randn(BATCH, SEQ, w, generator=gen)}
        layers = _cfg_get(cfg, "target_layer_ids")  # the draft reads these layers, concatenated
        cw = w * len(layers) if isinstance(layers, (list, tuple)) and layers else w
        if "context_hidden_states" in params:
            c["context_hidden_states"] = torch.randn(BATCH, SEQ, cw, generator=gen)
        if "attention_mask" in params and "context_hidden_states" not in c:
            c["attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)
        return [c]
    elif main == "latents":
        # audio codecs' decoders: latent frames, (batch, width, frames) or (batch, frames, width)
        w = _cfg_get(cfg, "hidden_size", default=HIDDEN)
        return [{"latents": torch.randn(BATCH, w, 16, generator=gen)},
                {"latents": torch.randn(BATCH, 16, w, generator=gen)}]
    elif main == "audio_mel":
        # Gemma 3n's audio encoder: log-mel frames and their padding mask (True = padding)
        mels = _cfg_get(cfg, "input_feat_size", default=128)
        return [{"audio_mel": torch.randn(BATCH, 64, mels, generator=gen),
                 "audio_mel_mask": torch.zeros(BATCH, 64, dtype=torch.bool)}]
    elif main == "flattened_patches":
        # Pix2Struct: per patch its row and column (from 1), then its pixels
        pw = _cfg_get(cfg, "patch_embed_hidden_size", default=HIDDEN)
        n = 16
        rows = torch.arange(n) // 4 + 1
        cols = torch.arange(n) % 4 + 1
        fp = torch.cat([rows[None, :, None].float().expand(BATCH, n, 1),
                        cols[None, :, None].float().expand(BATCH, n, 1),
                        torch.randn(BATCH, n, pw, generator=gen)], dim=-1)
        base = {"flattened_patches": fp, "attention_mask": torch.ones(BATCH, n)}
        if "decoder_input_ids" in params:
            dec_cfg = getattr(cfg, "text_config", None) or cfg
            base["decoder_input_ids"] = text_ids(dec_cfg, (BATCH, 4), gen)
        return [base]
    elif main == "states":
        # Decision Transformer: a trajectory of states, actions, rewards,
        # returns-to-go and time steps
        sd = _cfg_get(cfg, "state_dim", default=4)
        ad = _cfg_get(cfg, "act_dim", default=4)
        return [{"states": torch.randn(BATCH, SEQ, sd, generator=gen),
                 "actions": torch.randn(BATCH, SEQ, ad, generator=gen),
                 "rewards": torch.randn(BATCH, SEQ, 1, generator=gen),
                 "returns_to_go": torch.randn(BATCH, SEQ, 1, generator=gen),
                 "timesteps": torch.arange(SEQ).repeat(BATCH, 1),
                 "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long)}]
    else:
        raise LookupError(f"no input recipe for main input {main!r}")
    if "bbox" in params and "input_ids" in base:
        # layout models: one box per token, x0 <= x1 and y0 <= y1 (LayoutLM
        # embeds the integer coordinates; Bros takes normalised floats)
        b = torch.randint(0, 500, base["input_ids"].shape + (4,), generator=gen)
        b[..., 2:] += b[..., :2]
        base_int = dict(base, bbox=b)
        base_f = dict(base, bbox=b.float() / 1000.0)
    cands = []
    if main == "input_values":
        mels = _cfg_get(cfg, "num_mel_bins", "feature_size", default=80)
        frames = _cfg_get(cfg, "max_length", default=64)
        frames = frames if isinstance(frames, int) and frames <= 1024 else 64
        # raw audio (batch, samples), codecs' (batch, channels, samples),
        # then features (batch, frames, mels)
        ach = _cfg_get(cfg, "audio_channels", default=1)
        ach = ach if isinstance(ach, int) and 0 < ach <= 2 else 1
        cands += [{"input_values": torch.randn(BATCH, 1600, generator=gen)}]
        cands += [{"input_values": torch.randn(BATCH, c, 1600, generator=gen)} for c in sorted({1, ach})]
        cands += [{"input_values": torch.randn(BATCH, frames, mels, generator=gen)}]
        # encoders that downsample 1600 samples below a kernel (x-vector
        # TDNNs, Perception Encoder audio): one second at 16 kHz
        cands += [{"input_values": torch.randn(BATCH, 16000, generator=gen)},
                  {"input_values": torch.randn(BATCH, 1, 16000, generator=gen)}]
    elif main == "input_features":
        mels = _cfg_get(cfg, "num_mel_bins", "input_feat_per_channel", "feature_size", default=80)
        src = _cfg_get(cfg, "max_source_positions", default=None)
        frames = 2 * src if isinstance(src, int) and src <= 1500 else 64
        cands += [{"input_features": torch.randn(BATCH, mels, frames, generator=gen)},
                  {"input_features": torch.randn(BATCH, 64, mels, generator=gen)}]
        proj = _cfg_get(cfg, "feature_projection_input_dim", default=None)
        if isinstance(proj, int):
            # Wav2Vec2-BERT / Seamless: stacked frames, projection_input_dim wide
            cands.append({"input_features": torch.randn(BATCH, 64, proj, generator=gen)})
    else:
        if "bbox" in params and "input_ids" in base:
            cands += [base_int, base_f]
        if "image_grid_thw" in params and "input_ids" in base:
            # Qwen2-VL-style: flattened patches, their grid, and the image's
            # tokens in the text
            patches, grid, n = _grid_image(cfg, gen)
            ids = _with_image_tokens(cfg, base["input_ids"], n)
            if ids is not None:
                c = dict(base, input_ids=ids, pixel_values=patches, image_grid_thw=grid)
                if "attention_mask" in c:
                    c["attention_mask"] = torch.ones_like(ids)
                if "mm_token_type_ids" in params:
                    c["mm_token_type_ids"] = (ids == _cfg_get(cfg, "image_token_id", "image_token_index")).long()
                cands.append(c)
        if main != "pixel_values" and "pixel_values" in params:
            nq = _cfg_get(cfg, "num_query_tokens")
            if isinstance(nq, int) and "input_ids" in base:
                # BLIP-2 style: the Q-Former's query outputs replace
                # num_query_tokens image tokens of the text
                ids = _with_image_tokens(cfg, base["input_ids"], nq)
                if ids is not None:
                    c = dict(base, input_ids=ids, pixel_values=_image(cfg, gen))
                    if "attention_mask" in c:
                        c["attention_mask"] = torch.ones_like(ids)
                    cands.append(c)
            cands.append(dict(base, pixel_values=_image(cfg, gen)))
        if main == "pixel_values" and "input_ids" in params:
            # image + text models whose main input is the image
            ids = text_ids(cfg, (BATCH, SEQ), gen)
            c = dict(base, input_ids=ids)
            if "attention_mask" in params:
                c["attention_mask"] = torch.ones_like(ids)
            cands.append(c)
        cands.append(base)
        # video models (batch, frames, channels, h, w); Idefics' images
        # per sample have the same layout
        fr = _cfg_get(cfg, "num_frames", default=1)
        fr = fr if isinstance(fr, int) and 0 < fr <= 32 else 1
        for c in list(cands):
            pv = c.get("pixel_values")
            if isinstance(pv, torch.Tensor) and pv.dim() == 4:
                video = pv.unsqueeze(1).repeat(1, fr, 1, 1, 1)
                video = video + 0.1 * torch.randn(video.shape, generator=gen)
                v = dict(c, pixel_values=video)
                if "image_attention_mask" in params and "input_ids" in c:
                    v["image_attention_mask"] = torch.ones(c["input_ids"].shape + (fr,), dtype=torch.long)
                cands.append(v)
    cands = [_fill_required(c, params, cfg, gen) for c in cands]
    if "decoder_input_ids" in params:
        dec_cfg = getattr(cfg, "decoder", None) or getattr(cfg, "text_config", None) or cfg
        dec = text_ids(dec_cfg, (BATCH, 4), gen)
        with_dec = [dict(c, decoder_input_ids=dec) for c in cands]
        # encoder-decoders need decoder ids, but their classification heads
        # (BART's) derive them from input_ids and want the same length;
        # others (BLIP's question answering) may need them: with, then without
        cands = with_dec + cands
    # recipes keyed by what the forward or the config asks for beyond the
    # generic ones; tried last, so a model an earlier candidate fits keeps it
    return cands + _keyed_inputs(model, cfg, params, main, cands)


def _audio_features(cfg, gen, params):
    """input_features beyond (batch, mels, frames) and (batch, 64, mels):
    128 mel bins (Gemma 4's audio tower reads 128 whatever its config says),
    low-frame-rate stacks of num_stacked_frames frames (Fun-ASR), frame
    counts that are a multiple of the encoder's window pair (Qwen3-ASR's
    2 * n_window); each with its frame mask where the forward takes one."""
    mels = _cfg_get(cfg, "num_mel_bins", "input_feat_per_channel", "feature_size", default=80)
    out = []
    src = _cfg_get(cfg, "max_source_positions")
    if isinstance(src, int) and src <= 1500:
        out.append(torch.randn(BATCH, mels, 2 * src, generator=gen))  # Whisper-style, with its mask
    for m in sorted({mels, 128}):
        out += [torch.randn(BATCH, m, 64, generator=gen), torch.randn(BATCH, 64, m, generator=gen)]
    stack = _cfg_get(cfg, "num_stacked_frames")
    if isinstance(stack, int) and stack > 1:
        out.append(torch.randn(BATCH, 64, mels * stack, generator=gen))
    # spectrogram images (CLAP's audio tower: (batch, 1, frames, mels))
    out.append(torch.randn(BATCH, 1, 64, mels, generator=gen))
    win = _cfg_get(cfg, "n_window")
    if isinstance(win, int) and 0 < win <= 512:
        out.append(torch.randn(BATCH, mels, 2 * win, generator=gen))
    cands = []
    for f in out:
        c = {"input_features": f}
        if "input_features_mask" in params:
            # the mask runs along the frames: the last dim of (batch, mels, frames)
            n = f.shape[-1] if f.shape[1] in (mels, 128) and f.shape[-1] not in (mels, 128) else f.shape[-2]
            c["input_features_mask"] = torch.ones(BATCH, n, dtype=torch.long)
        cands.append(c)
    return cands


def _audio_values(cfg, gen):
    """input_values whose length the encoder's patching divides (MuseSpark's
    audio tower: a multiple of its patch sizes' product), then one second."""
    out = []
    ps = _cfg_get(cfg, "patch_sizes")
    if isinstance(ps, list) and ps and all(isinstance(x, int) and x > 0 for x in ps):
        n = math.prod(ps)
        out.append(torch.randn(BATCH, n * max(1, 1600 // n), generator=gen))
    out += [torch.randn(BATCH, 16000, generator=gen), torch.randn(BATCH, 1, 16000, generator=gen)]
    return [{"input_values": v} for v in out]


def _keyed_inputs(model, cfg, params, main, cands):
    """More candidates, each keyed by a forward argument or a config field:
    - text + audio models (CLAP, CLVP, Voxtral Realtime, PE Audio): token ids
      with the audio features or samples the forward also takes;
    - audio encoders: the feature layouts of _audio_features/_audio_values;
    - patchified images (SigLIP 2's spatial_shapes, Gemma 4's
      pixel_position_ids): (batch, patches, channels * patch**2) and the grid;
    - image pairs (SuperGlue, LightGlue: (batch, 2, channels, h, w));
    - SegGPT: the prompt and the image stack along the height, half each;
    - Kosmos-2: the text positions the image embeddings take;
    - Splinter's pretraining head: a question token per row;
    - MusicGen: decoder ids per codebook, (batch * codebooks, length);
    - decoder ids as long as the input ids (T5's sequence classifier masks
      the decoder output with the input's eos positions);
    - video + text (VideoPrism CLIP), Q-Former cross-attention inputs (BLIP-2),
      and required *_embeds inputs (PI0's action_embeds): random at the width;
    - token ids without their attention mask (Doge, whose mask path needs
      flex attention's BlockMask)."""
    gen = torch.Generator().manual_seed(7)
    out = []
    ids = text_ids(cfg, (BATCH, SEQ), gen)
    text = {"input_ids": ids}
    if "attention_mask" in params:
        text["attention_mask"] = torch.ones_like(ids)
    if main == "input_ids" or "input_ids" in params:
        if "input_features" in params:
            out += [dict(text, **a) for a in _audio_features(cfg, gen, params)]
        if "input_values" in params:
            out += [dict(text, **a) for a in _audio_values(cfg, gen)]
    if main == "input_features":
        out += _audio_features(cfg, gen, params)
    if main == "input_values":
        out += _audio_values(cfg, gen)
    p = _cfg_get(cfg, "patch_size", default=16)
    p = p[0] if isinstance(p, (list, tuple)) else p
    ch = _cfg_get(cfg, "num_channels", default=3)
    g = 4
    if "spatial_shapes" in params or "pixel_position_ids" in params:
        c = {"pixel_values": torch.randn(BATCH, g * g, ch * p * p, generator=gen)}
        yx = torch.stack(torch.meshgrid(torch.arange(g), torch.arange(g), indexing="ij"), -1).reshape(-1, 2)
        if "spatial_shapes" in params:
            c["spatial_shapes"] = torch.tensor([[g, g]] * BATCH)
            c["pixel_attention_mask"] = torch.ones(BATCH, g * g, dtype=torch.long)
        if "pixel_position_ids" in params:
            c["pixel_position_ids"] = yx.unsqueeze(0).repeat(BATCH, 1, 1)
        out += [c, dict(text, **c)] if "input_ids" in params else [c]
    for c in cands:
        pv = c.get("pixel_values")
        if not isinstance(pv, torch.Tensor) or pv.dim() != 4:
            continue
        if _cfg_get(cfg, "keypoint_detector_config") is not None or "MatchingOutput" in str(
                inspect.signature(model.forward).return_annotation):
            out.append(dict(c, pixel_values=torch.stack([pv, pv.flip(-1)], 1)))
        if "prompt_pixel_values" in c:
            h = pv.shape[-2] // 2
            out.append({k: (v[..., :h, :] if isinstance(v, torch.Tensor) and v.dim() == 4 else v)
                        for k, v in c.items()})
        if "image_embeds_position_mask" in params and "input_ids" in c:
            n = _cfg_get(cfg, "latent_query_num", default=4)
            n = n if isinstance(n, int) else 4
            ids2 = c["input_ids"].repeat(1, (n + 4) // c["input_ids"].shape[1] + 1)[:, : n + 4]
            m = torch.zeros_like(ids2)
            m[:, 1: 1 + n] = 1
            out.append(dict(c, input_ids=ids2, attention_mask=torch.ones_like(ids2), image_embeds_position_mask=m))
        break
    q = _cfg_get(cfg, "question_token_id")
    if "question_positions" in params and isinstance(q, int):
        i2 = ids.clone()
        i2[:, 1] = q
        out.append(dict(text, input_ids=i2))
    ncb = _cfg_get(cfg, "num_codebooks")
    if "decoder_input_ids" in params:
        dec_cfg = getattr(cfg, "decoder", None) or getattr(cfg, "text_config", None) or cfg
        for c in cands:
            if "decoder_input_ids" in c and "input_ids" in c:
                if isinstance(ncb, int) and ncb > 1:
                    d = text_ids(dec_cfg, (BATCH * ncb, 4), gen)
                else:
                    d = text_ids(dec_cfg, tuple(c["input_ids"].shape), gen)
                out.append(dict(c, decoder_input_ids=d))
                break
    if main == "pixel_values_videos" and "input_ids" in params:
        out += [dict(c, **text) for c in cands if "pixel_values_videos" in c]
    extra = {}
    for k, prm in params.items():
        if k.endswith("_embeds") and prm.default is inspect.Parameter.empty:
            w = _cfg_get(cfg, "hidden_size", default=HIDDEN)
            extra[k] = torch.randn(BATCH, 4, w, generator=gen)
    if "encoder_hidden_states" in params and "query_embeds" in (cands[0] if cands else {}):
        w = _cfg_get(cfg, "encoder_hidden_size", default=HIDDEN)
        extra["encoder_hidden_states"] = torch.randn(BATCH, 4, w, generator=gen)
    if extra:
        out += [dict(c, **extra) for c in cands]
    if "attention_mask" in params:
        out += [{k: v for k, v in c.items() if k != "attention_mask"} for c in cands
                if "attention_mask" in c and "input_ids" in c][:1]
    return out


def n_params_meta(cls, cfg):
    with torch.device("meta"):
        m = cls(cfg)
    return sum(p.numel() for p in m.parameters())


def log2_budget(n):
    return math.ceil(math.log2(n)) + 2
