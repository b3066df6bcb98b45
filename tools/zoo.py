"""The model zoo: every architecture of the installed Transformers' auto-model
mappings, tiny random weights, on tpu against CPU (issue 16) -> docs/zoo.md.

For each architecture (model class): a tiny config (tools/zoo_configs.py),
random weights, save_pretrained to a temp dir, from_pretrained with
device_map="tpu", then
  (a) no crash:  the forward runs on tpu;
  (b) parity:    every floating output matches CPU float32 within
                 max |tpu - cpu| <= 1e-4 + 1e-4 max |cpu| per output tensor
                 (bf16, reported apart: both sides loaded with
                 dtype=bfloat16, 4e-2 + 4e-2 max |cpu|);
  (c) bounded dynamism, causal LMs: greedy generate of 64 new tokens with
                 the default (growing) cache, forward under
                 torch.compile(backend="tpu", dynamic=True), gives CPU's tokens while the
                 compiled forward builds at most ceil(log2 64) + 2 = 8 fused
                 programs (compile_stats()["fused_compiles"], prefill included).

    python tools/zoo.py                          # everything not cached yet
    python tools/zoo.py --family MODEL_FOR_CAUSAL_LM --limit 20
    python tools/zoo.py --only LlamaForCausalLM,BertModel --rerun
    python tools/zoo.py --doc-only               # rewrite docs/zoo.md from the cache

Architectures run in worker processes (two by default) fed one at a time; a
worker that crashes or passes the per-architecture timeout is replaced and
that architecture is recorded as a crash. Results are cached per
architecture in docs/zoo.json as they finish, so a rerun continues.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tools"))
DONE = "@@zoo-done "
PARTIAL = "@@zoo-partial "  # the result so far, before the (long) generate step
RESULTS = os.path.join(ROOT, "docs", "zoo.json")
DOC = os.path.join(ROOT, "docs", "zoo.md")
GEN_TOKENS = 64
TOL = dict(atol=1e-4, rtol=1e-4)
TOL_BF16 = dict(atol=4e-2, rtol=4e-2)
MAX_PARAMS = 30_000_000
SEED = 0  # torch.manual_seed before every forward (CPU and tpu)
# How to read the current figures (kept in the report by hand; update with each run).
NOTES = [
    "Partial run. Slices so far: alphabetical ASTForAudioClassification .. BrosModel (all families, "
    "17:43-19:04 UTC, load average 17-18); the 25 exclusions of that slice re-run with the new input "
    "recipes (21:19); BloomForCausalLM .. CTRLModel with generate (21:30, stopped: causal LMs hit "
    "the 300 s timeout); then every architecture outside MODEL_FOR_CAUSAL_LM alphabetically from "
    "CamembertForMaskedLM to OmniASRModel (21:45-22:26, `--skip-family MODEL_FOR_CAUSAL_LM`, stopped "
    "at the session's deadline; at load 5-7, 345 took 12.9 minutes, 2.2 s each; at load 2-3, 297 "
    "took 8.9 minutes, 1.8 s each); then the rest outside MODEL_FOR_CAUSAL_LM, OmniASRModel .. "
    "xLSTMModel (22:38-23:08, one worker, load ~4 beside the test suite: 520 in 29.3 minutes, 3.4 s "
    "each). So every architecture outside the causal LMs has run. Then the causal LMs with the "
    "faster (c) (`dynamic=True`, two traces): `--family MODEL_FOR_CAUSAL_LM --retry --workers 1 "
    "--timeout 400`, failures and the not yet run, alphabetically AXK1ForCausalLM .. "
    "JetMoeForCausalLM (01:26-02:26 UTC, load 10-12; 89 of the 174 selected, stopped at the "
    "session's end; the worker was replaced at about 02:15, so rows after that run with the "
    "topk/sort rule of 01:45), and the 11 causal LMs that had passed with the old (c) "
    "(`dynamic=None`, four traces) re-run with the new one (02:26-02:32), then the run continued past JetMoeForCausalLM to "
    "MellumForCausalLM (02:32-02:37, stopped). Then (branch zoocl) the causal LMs after "
    "MellumForCausalLM: `--family MODEL_FOR_CAUSAL_LM --workers 1 --timeout 400`, "
    "MiMoV2FlashForCausalLM .. Qwen3_5ForCausalLM (04:02-04:53 UTC, 41 of 70, load 2 at the start, "
    "10-16 from 04:25, 10-300 s a model; the worker was replaced at 04:26 after ProphetNet's "
    "timeout and picked up the tree as it was being edited, so the run was stopped and restarted "
    "from the committed code), MiniMaxM2ForCausalLM and the two MusicGen decoders re-run with the "
    "gather rule and the config fallback (04:57), then continued Qwen3_5MoeForCausalLM .. "
    "StableLmForCausalLM (05:01-05:23, load 9-15, stopped at the session's deadline). "
    "The 15 causal LMs after StableLmForCausalLM (Starcoder2ForCausalLM .. xLSTMForCausalLM) are "
    "not run. "
    "Also (Dec 2, branch zooa) the exclusions and failures outside "
    "MODEL_FOR_CAUSAL_LM were re-run twice with the new shrink rules and input recipes "
    "(`--retry --skip-family MODEL_FOR_CAUSAL_LM --workers 1 --timeout 200`: 00:43-01:31, 338 of 512, "
    "stopped; then from 01:30 all of them again with the later fixes, and after 02:00 those still "
    "excluded or failing once more with the final code, plus the Swin, Longformer and LED "
    "architectures whose configs or inputs changed; the exact commands are under Slices run). "
    "The machine had 2 cores shared by 5-6 engineers (load average 7-11 in the last slices). The "
    "targets are not demonstrated by these slices: continue with `make zoo`.",
    "Where the time goes (`phase_s` per architecture in docs/zoo.json): an architecture outside the "
    "causal LMs takes 1-3 s in a warm worker (CLIP*, ConvBert*: build, save, CPU and tpu forward, "
    "bf16); the first one in a fresh worker 20-36 s (importing the model's module and starting the "
    "runtime). A causal LM is dominated by the compiled 64-token generate, that is by Dynamo tracing "
    "the HF forward. Before 01:26 UTC (2 December) it was traced 4 times (prefill, first decode, "
    "automatic-dynamic recompile, strided-cache variant; 42 + 30 + 58 + 62 s for AXK1ForCausalLM at "
    "load 10) and causal LMs timed out at 300-600 s. Since then the harness compiles with "
    "`dynamic=True` and the backend gives the padded graphs' exactly-full results storage with room "
    "(design.md, Bounded dynamism): 2 traces where the prefill runs padded (`graphs` in "
    "docs/zoo.json; 3 where some op of the prefill has no padded rule). LlamaForCausalLM alone: "
    "generate 182.9 s, 4 graphs, 10 fused compiles before; 64.5 s, 2 graphs, 7 fused compiles "
    "after. In this run a causal LM took 25-120 s (AXK1ForCausalLM 118.7 s, was past 600 s).",
    "(c) failures \"timeout in compiled generate\" on this loaded machine are not shown to be "
    "backend bugs; since the harness now records the backend's warnings during generate into the "
    "notes (also for a timeout), a graph that cannot run padded names its op there.",
    "BitModel's and BitBackbone's bf16 misses are rounding between two bf16 implementations, not a bug "
    "found: its weight-standardised convs normalise bf16 weights with batch_norm, and tpu's result is "
    "nearer float32 than CPU's (max |d| 0.0127 vs CPU's 0.0202 on a 64x288 weight); the one-ulp "
    "differences grow over the layers. float32 matches.",
    "(c) failures of the causal-LM run (01:26 UTC on) are backend gaps, not exclusions: a graph "
    "with an op that has no padded rule runs at exact sizes (the warning in the row's notes), so it "
    "compiles per size and passes the budget of 8: `topk`/`sort` along the padded sequence dim "
    "(AXK2ForCausalLM, HYV4ForCausalLM, HunYuanMoEV1ForCausalLM: a masked rule is needed), `view` "
    "merging the padded token dim (MoE experts: FlexOlmoForCausalLM, GraniteMoeForCausalLM, "
    "AriaTextForCausalLM, MellumForCausalLM), `aten.index.Tensor` (BigBirdForCausalLM, MegatronBertForCausalLM), `full_like` "
    "(Glm4MoeLiteForCausalLM), sizes with symbols no input gives (DeepseekV4ForCausalLM, "
    "GraniteMoeSWAForCausalLM). JetMoeForCausalLM (23 Dynamo graphs, 17 fused compiles) and "
    "CpmAntForCausalLM (past the 400 s timeout) were not analysed. AXK2ForCausalLM and "
    "AriaTextForCausalLM ran before the topk/sort rule of 01:45 "
    "(`tests/test_bounded_dynamism.py::test_topk_and_sort_along_a_static_dim`, MoE routers along a "
    "static dim); alone with it AriaTextForCausalLM still has 9 fused compiles (its `view`) and "
    "AXK2ForCausalLM 10 (2 graphs, 131.2 s; its top-k keys along the sequence).",
    "The causal-LM slice of 04:02-05:23 UTC (branch zoocl; 55 of the 70 run: 38 pass, 12 fail, 5 "
    "excluded) fails (c) only, never (a) or (b), each by an op that has no padded rule (the "
    "graph runs at exact sizes, 9-10 fused compiles > 8): the MoE experts' `view` merging the "
    "padded token dim (MiniMaxForCausalLM, MixtralForCausalLM, Qwen2MoeForCausalLM, "
    "Qwen3MoeForCausalLM, and MiniMaxM2ForCausalLM once its gather ran padded), sizes with "
    "symbols no input gives (MiMoV2FlashForCausalLM, ModernBertDecoderForCausalLM; sliding-window "
    "caches), `aten.index.Tensor` (RemBertForCausalLM), `full_like` (SolarOpenForCausalLM): all "
    "four are being given rules on branch zoopad. `aten.gather` (MiniMaxM3VLForCausalLM, "
    "PhimoeForCausalLM: run before the gather rule, not re-run) now has a rule. "
    "ProphetNetForCausalLM timed out at 400 s at load 10-16 with `cumsum`, a `split` along the "
    "padded dim (both now have rules) and unbound symbols (`s39 + s5`, zoopad) in its graphs. "
    "Passing rows also named ops (their graphs ran at exact sizes within the budget): "
    "`convolution` (NemotronH, OlmoHybrid; now a rule), `constant_pad_nd` (Qwen3Next, Qwen3_5; "
    "now a rule; with a symbolic pad in Qwen3_5Moe, not covered), in-place `copy_` (Qwen3Next, "
    "Qwen3_5*, not covered) and unbound symbols (Mistral, Ministral, Moshi, Olmo3, RecurrentGemma). "
    "Exclusions (harness, not backend): Qwen4ExpForCausalLM (its QSA indexer needs "
    "`token_budget` and `compress_ratio`, unset), RwkvForCausalLM (CPU forward fails: an "
    "unshrunk width, 32 vs 4096), ReformerModelWithLMHead (needed `is_decoder`; fixed in "
    "`OVERRIDES` after its row, not re-run), MusicgenForCausalLM and MusicgenMelodyForCausalLM "
    "(built from their own decoder configs since 04:57; their rows are from before their "
    "(batch x codebooks) ids were given (05:06); with those ids their forward runs on CPU but "
    "their own `generate` fails on CPU in `_expand_inputs_for_generation`, so (c) will be "
    "excluded; not re-run). The rows from Qwen2ForCausalLM to Qwen3_5ForCausalLM ran in a worker "
    "that started at 04:26 while `bounded_rules.py` was being edited (gather/conv rules in "
    "progress); they passed, except Qwen2Moe/Qwen3Moe on the `view`.",
    "Models that draw random numbers inside forward: every forward (CPU and tpu) now starts from "
    "`torch.manual_seed(0)`. ViLT samples its patches with `torch.multinomial` on CPU tensors, so "
    "both sides draw the same; ViTMAE and VITS draw on the model's device, and the tpu generator's "
    "stream differs from CPU's for the same seed (`torch.rand(4, device=\"tpu\")` after "
    "`manual_seed(0)` is not CPU's), so seeding cannot make them equal: ViTMAE gets its `noise` as "
    "an input, VITS runs with `noise_scale` and `noise_scale_duration` 0 (flow and duration "
    "predictor still run, the noise term is zero).",
    "PixioBackbone's 0.07 was not ours: the harness gives zero-initialised parameters small random "
    "values, so its two final layer-norm biases (`layernorm.bias`, `pixio.layernorm.bias`) differ in "
    "the built model, and the loaded model's differ from them, identically on CPU and on tpu (the "
    "checkpoint loading does not keep them apart); the harness compared the built model with the "
    "loaded one. The "
    "CPU reference is now the saved model loaded back on CPU (and CPU must be able to load what "
    "it saved: BART's sequence classifier lost its third label in the config round trip, fixed in "
    "the shrink; Gradium Phonon TTS and Nemotron 3.5 Transcribe fail CPU's own load and are "
    "excluded as CPU failures).",
    "Glm5NextForConditionalGeneration timed out at 200 s in the 00:43 slice (alone, its CPU forward "
    "took 24 s and its first tpu forward 35 s, 677 per-op compiles in Strict mode, at load ~5) and "
    "passed in 38 s in the 01:30 slice; SLANeXtForTableRecognition (timeout at 300 s before) "
    "passed in 48 s there.",
    "Mask2Former's bf16 misses (float32 matches) are not diagnosed.",
    "The RT-DETR-style detectors' (b) failures (RTDetr*, DFineForObjectDetection, Deimv2*, "
    "PPDocLayoutV3*/V4*, at enc_topk_bboxes) are top-k among equal scores, not a wrong value shown "
    "(checked on RTDetrModel and Deimv2Model): the encoder's class scores match CPU exactly "
    "(enc_outputs_class, max |d| 0.0) and the 16 scores selected are all -0.6931 on both sides (the "
    "class bias, -log 2, of anchors whose masked features are zero, above the random valid ones), "
    "so which anchors top-k returns among the ties is unspecified (CPU and XLA order them "
    "differently) and the selected boxes differ. They count as failures until the harness avoids "
    "the ties.",
    "OneFormerModel and OneFormerForUniversalSegmentation now run (their list main_input_name and "
    "task_inputs were the harness TypeError) and fail (b): task_token is 9e-5 off and the decoder's "
    "object queries 1.6; not diagnosed, possibly ours.",
    "Exclusions \"CPU itself fails (forward with the harness's inputs)\" and \"config can't be made "
    "tiny\" are limits of the harness's generic config shrink and input recipes (they need entries in "
    "`OVERRIDES` or a recipe), not bugs of CPU PyTorch; they are listed so that none is hidden.",
]
# Backend fixes that zoo failures led to (kept in the report by hand).
FIXED = [
    "`aten::_grouped_mm` under `torch.compile(backend=\"tpu\")`: Transformers' MoE experts "
    "(Afmoe, AriaText, ... every `grouped_mm` experts model) failed in Dynamo with "
    "\"Expected inputs of BF16 type\" (torch's meta kernel is CUDA's); "
    "`torch_tpu/fake_impls.py` registers a fake kernel for tpu tensors "
    "(`tests/test_torch_compile.py::test_grouped_mm_float32_compiles_on_tpu_and_cpu_tracing_is_unchanged`).",
    "Bounded dynamism, `aten.copy` and `slice_scatter`/`select_scatter` along a static dim: MLA "
    "attention (AXK1/AXK2, DeepSeek-style) builds its key with `new_empty` and `copy_` into two "
    "slices of the head dim; the graph ran at exact sizes (\"recompiles for every new size ... "
    "aten.copy.default on padded sizes\"), compiling every decode step, so AXK1ForCausalLM's (c) "
    "timed out at 600 s. `torch_tpu/bounded_rules.py` runs them padded; AXK1ForCausalLM alone "
    "now gives CPU's 64 tokens with 8 fused compiles (budget 8) "
    "(`tests/test_bounded_dynamism.py::test_copy_into_slices_of_a_new_tensor_along_a_static_dim`).",
    "Bounded dynamism, `aten.gather` (branch zoocl, 2 December): MoE routers that gather the "
    "weights of their top-k experts (MiniMaxM2ForCausalLM, MiniMaxM3VLForCausalLM, "
    "PhimoeForCausalLM) ran their graphs at exact sizes (\"aten.gather.default on padded sizes\"). "
    "`torch_tpu/bounded_rules.py` runs gather padded, along a static or the padded dim, with the "
    "index's padding set to 0 (unmasked, `n - 1 - arange` past n tripped gather's bounds check); "
    "MiniMaxM2ForCausalLM re-run: the gather no longer shows, its next blocker is the MoE `view` "
    "(`tests/test_bounded_dynamism.py::test_gather_along_static_and_padded_dims`). Also new padded "
    "rules for ops the causal LMs showed: `convolution` (NemotronH, OlmoHybrid: the input's "
    "padding zeroed), `split` along the padded dim and prefix scans (`cumsum`, ProphetNet), "
    "`constant_pad_nd` growing the padded dim (Qwen3-Next, Qwen3.5), and a symbolic int as a "
    "Scalar operand (`rsub.Scalar`) (`test_convolution_along_a_padded_dim`, "
    "`test_split_and_cumsum_along_a_padded_dim`, `test_constant_pad_along_a_padded_dim`).",
]


# ---------------------------------------------------------------- worker side
def _short(e):
    s = f"{type(e).__name__}: {e}".replace("\n", " ")
    return s[:300]


def _tensors(obj, prefix="out"):
    """(name, tensor) for every tensor in a model output (nested)."""
    import torch

    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict) or hasattr(obj, "items"):
        try:
            items = list(obj.items())
        except Exception:
            return
        for k, v in items:
            yield from _tensors(v, f"{prefix}.{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _tensors(v, f"{prefix}[{i}]")


def compare(got, want, atol, rtol):
    """(ok, worst error, where) over every tensor of two outputs."""
    import torch

    g, w = dict(_tensors(got)), dict(_tensors(want))
    if set(g) != set(w):
        return False, None, f"output keys differ: {sorted(set(g) ^ set(w))[:4]}"
    worst, where, ok = 0.0, "", True
    for k, wt in w.items():
        gt = g[k].detach().cpu()
        wt = wt.detach()
        if gt.shape != wt.shape:
            return False, None, f"{k}: shape {list(gt.shape)} vs CPU {list(wt.shape)}"
        if gt.dtype != wt.dtype:
            return False, None, f"{k}: dtype {gt.dtype} vs CPU {wt.dtype}"
        if not (wt.is_floating_point() or wt.is_complex()):
            if not torch.equal(gt, wt):
                return False, None, f"{k}: integer output differs"
            continue
        gf, wf = gt.double(), wt.double()
        bad_nan = (gf.isnan() != wf.isnan()).any().item()
        if bad_nan:
            return False, float("nan"), f"{k}: NaN where CPU has none (or the reverse)"
        fin = wf.isfinite() & gf.isfinite()
        if (gf[~fin] != wf[~fin]).any().item() if (~fin).any().item() else False:
            if not torch.equal(gf[~fin].nan_to_num(0), wf[~fin].nan_to_num(0)):
                return False, float("inf"), f"{k}: inf differs"
        if fin.any().item():
            # relative to the tensor's scale, not each element's: an element
            # that is a small sum of large terms carries their rounding
            d = (gf[fin] - wf[fin]).abs()
            err = d.max().item()
            excess = err - (atol + rtol * wf[fin].abs().max().item())
            if err > worst:
                worst, where = err, k
            if excess > 0:
                ok = False
                where = k
    return ok, worst, where


def _to(inputs, device, dtype=None):
    import torch

    out = {}
    for k, v in inputs.items():
        if isinstance(v, torch.Tensor):
            v = v.to(device)
            if dtype is not None and v.is_floating_point():
                v = v.to(dtype)
        out[k] = v
    return out


def _load_tpu(cls, d, notes, **kw):
    """from_pretrained(device_map="tpu"); on a loading failure, load on cpu
    and .to("tpu") (noted: that is the integration's bug, not the zoo's)."""
    try:
        m, info = cls.from_pretrained(d, device_map="tpu", output_loading_info=True, **kw)
    except Exception as e:  # noqa: BLE001
        notes.append(f"device_map='tpu' failed ({_short(e)[:120]}); loaded on cpu and .to('tpu')")
        m, info = cls.from_pretrained(d, output_loading_info=True, **kw)
        m = m.to("tpu")
    return m.eval(), info


class _Phases:
    """Seconds per phase of one architecture (res["phase_s"]), to see where
    the zoo's time goes."""

    def __init__(self, res):
        self.d = res.setdefault("phase_s", {})
        self.t = time.time()

    def __call__(self, name):
        now = time.time()
        self.d[name] = round(self.d.get(name, 0.0) + now - self.t, 2)
        self.t = now


def run_arch(arch, info, opts):
    import torch
    import torch_tpu
    import transformers

    import zoo_configs as zc

    res = {"arch": arch, "model_type": info["model_type"], "family": info["family"],
           "status": "excluded", "a": None, "b": None, "bf16": None, "c": None,
           "reason": "", "notes": []}
    notes = res["notes"]
    phase = _Phases(res)
    causal = "MODEL_FOR_CAUSAL_LM" in info["mappings"]
    # -- build (exclusions: these are not our failures)
    try:
        cls = getattr(transformers, arch)
    except Exception as e:  # noqa: BLE001
        res["reason"] = f"class not importable (optional dependency): {_short(e)}"
        return res
    try:
        try:
            cfg = zc.tiny_config(arch, info["model_type"])
            n = zc.n_params_meta(cls, cfg)
        except Exception:
            # A decoder of a composite model (MusicgenForCausalLM) is listed
            # under the composite's model type but is built from its own
            # config class (MusicgenDecoderConfig): the mapping's config
            # lacks its attributes. Most such classes take the composite's
            # config too (Mllama, Llama4), so the class's own config is the
            # fallback, not the rule.
            own = getattr(cls, "config_class", None)
            if own is None or own is type(zc.tiny_config(arch, info["model_type"])):
                raise
            cfg = zc.tiny_config(arch, info["model_type"], own)
            n = zc.n_params_meta(cls, cfg)
            notes.append(f"built from {own.__name__} (the class's own config class)")
    except Exception as e:  # noqa: BLE001
        res["reason"] = f"config can't be made tiny: {_short(e)}"
        return res
    res["params"] = n
    phase("config")
    if n > MAX_PARAMS:
        res["reason"] = f"config can't be made tiny: {n / 1e6:.0f}M parameters after shrinking"
        return res
    d = tempfile.mkdtemp(prefix="zoo-")
    try:
        torch.manual_seed(0)
        try:
            model = cls(cfg).eval()
            # Parameters a model initialises to zero (routers, gates, biases) are
            # given small random values: all-equal router scores make top-k a
            # tie, whose order CPU leaves unspecified.
            g = torch.Generator().manual_seed(1)
            with torch.no_grad():
                for p in model.parameters():
                    if p.numel() > 1 and p.is_floating_point() and not p.any():
                        p.copy_(torch.randn(p.shape, generator=g) * 0.02)
            phase("build")
            model.save_pretrained(d)
            # The CPU reference is the saved model loaded back on CPU, as the
            # tpu one is (missing keys are handled below by copying CPU's
            # state_dict into the tpu model): the model in memory may differ
            # from what loading it gives (PixioBackbone's two final layer-norm
            # biases, given different random values above, come back
            # otherwise, on CPU as on tpu). CPU must be able to load what it
            # saved, else excluded.
            ref = cls.from_pretrained(d).eval()
            del model
            phase("save")
        except Exception as e:  # noqa: BLE001
            res["reason"] = f"CPU itself fails (build/save/load): {_short(e)}"
            return res
        try:
            cands = zc.make_inputs(ref, cfg, info["family"])
        except LookupError as e:
            res["reason"] = f"harness has no input recipe: {e}"
            return res
        except Exception as e:  # noqa: BLE001
            res["reason"] = f"harness's input recipe fails: {_short(e)}"
            return res
        err = None
        # Every forward starts from the same seed: models that draw on the
        # CPU generator inside forward (ViLT's patch sampling builds its
        # weights with torch.ones on cpu) then draw the same numbers on both
        # sides. Draws on the tpu device use the tpu generator, whose stream
        # differs from CPU's for the same seed: those models get the noise
        # as an input where the forward takes one (ViTMAE's `noise`) or a
        # zero noise scale (VITS, tools/zoo_configs.py OVERRIDES).
        for inputs in cands:
            try:
                torch.manual_seed(SEED)
                with torch.no_grad():
                    want = ref(**inputs)
                break
            except Exception as e:  # noqa: BLE001
                err = err or e
        else:
            res["reason"] = f"CPU itself fails (forward with the harness's inputs): {_short(err)}"
            return res
        res["inputs"] = sorted(inputs)
        phase("cpu_forward")
        # -- (a) no crash
        res["status"] = "fail"
        try:
            tpu, tinfo = _load_tpu(cls, d, notes)
            if tinfo.get("missing_keys"):
                # weights initialised at load differ by device: use CPU's
                tpu.load_state_dict(ref.state_dict(), strict=False)
                notes.append("missing keys at load: copied CPU's state_dict")
            phase("tpu_load")
            torch.manual_seed(SEED)
            with torch.no_grad():
                got = tpu(**_to(inputs, "tpu"))
            got = [(k, v.cpu()) for k, v in _tensors(got)]
            res["a"] = True
            phase("tpu_forward")
        except Exception as e:  # noqa: BLE001
            res["a"] = False
            res["reason"] = f"(a) forward on tpu: {_short(e)}"
            return res
        # -- (b) parity, float32
        ok, err, where = compare(dict(got), dict(_tensors(want)), **TOL)
        res["b"], res["max_err"] = ok, err
        if not ok:
            res["reason"] = f"(b) float32 parity: max |d| {err} at {where}"
        # -- (b') bfloat16, reported apart
        if opts.bf16:
            try:
                ref16 = cls.from_pretrained(d, dtype=torch.bfloat16).eval()
                torch.manual_seed(SEED)
                with torch.no_grad():
                    want16 = ref16(**_to(inputs, "cpu", torch.bfloat16))
            except Exception as e:  # noqa: BLE001
                want16 = None
                notes.append(f"bf16: CPU itself fails: {_short(e)[:150]}")
            if want16 is not None:
                try:
                    tpu16, _ = _load_tpu(cls, d, [], dtype=torch.bfloat16)
                    if tinfo.get("missing_keys"):
                        tpu16.load_state_dict(ref16.state_dict(), strict=False)
                    torch.manual_seed(SEED)
                    with torch.no_grad():
                        got16 = tpu16(**_to(inputs, "tpu", torch.bfloat16))
                    ok16, err16, where16 = compare(got16, want16, **TOL_BF16)
                    res["bf16"], res["max_err_bf16"] = ok16, err16
                    if not ok16:
                        notes.append(f"bf16 parity: max |d| {err16} at {where16}")
                    del tpu16
                except Exception as e:  # noqa: BLE001
                    res["bf16"] = False
                    notes.append(f"bf16 on tpu: {_short(e)[:200]}")
            phase("bf16")
        # -- (c) bounded dynamism, causal LMs
        if causal and opts.generate:
            if getattr(opts, "report_partial", None):
                opts.report_partial(dict(res, c=False, status="fail",
                                         reason="(c) timeout in compiled generate"))
            res.update(_generate(ref, tpu, inputs, cfg, notes, phase,
                                 partial=lambda: opts.report_partial(dict(res, c=False, status="fail",
                                     reason="(c) timeout in compiled generate"))
                                 if getattr(opts, "report_partial", None) else None))
        if res["a"] and res["b"] and res["c"] in (True, None):
            res["status"] = "pass"
        return res
    finally:
        import shutil

        shutil.rmtree(d, ignore_errors=True)


def _generate(ref, tpu, inputs, cfg, notes, phase, partial=None):
    import torch
    import torch_tpu

    import zoo_configs as zc

    out = {}
    ids = inputs["input_ids"][: zc.codebook_rows(cfg), :4]  # one batch element
    kw = dict(max_new_tokens=GEN_TOKENS, do_sample=False, eos_token_id=None,
              pad_token_id=0, num_beams=1)
    try:
        with torch.no_grad():
            want = ref.generate(ids, attention_mask=torch.ones_like(ids), **kw)
    except Exception as e:  # noqa: BLE001
        notes.append(f"(c) excluded: CPU generate fails: {_short(e)[:200]}")
        return {"c": None, "c_reason": "CPU itself fails"}
    phase("cpu_generate")
    torch._dynamo.reset()
    # dynamic=True: generate calls forward with the prompt, then with one
    # token and a cache one longer each step. With Dynamo's default
    # (dynamic=None) the first decode call is traced at its exact sizes and
    # only the second size change turns the cache length symbolic
    # (automatic dynamic): one more trace of the whole HF forward (25-60 s
    # a model here) and one more fused program, for nothing, since the
    # graph is traced symbolic anyway. dynamic=True, the documented option
    # for inputs known to change size, traces the prefill and the decode
    # step once each (the backend runs both padded to buckets:
    # bounded_graph.py). The criterion is unchanged: CPU's tokens, fused
    # programs counted from the first call, prefill included.
    tpu.forward = torch.compile(tpu.forward, backend="tpu", dynamic=True)
    s0 = torch_tpu.compile_stats()
    t0 = time.time()
    import warnings

    # The backend's own warnings (a graph that cannot run padded names the
    # op) explain a (c) failure or a slow generate: they go into the notes,
    # and into the partial result at once, so a timeout still shows them.
    seen = set()

    def show(message, category, filename, lineno, file=None, line=None):
        m = str(message)
        if m.startswith("torch_tpu") and m not in seen:
            seen.add(m)
            notes.append(m[:240])
            if partial:
                partial()

    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = show
            got = tpu.generate(ids.to("tpu"), attention_mask=torch.ones_like(ids).to("tpu"), **kw).cpu()
    except Exception as e:  # noqa: BLE001
        out["c"] = False
        out["reason"] = f"(c) compiled generate on tpu: {_short(e)}"
        return out
    s1 = torch_tpu.compile_stats()
    phase("tpu_generate")
    out["gen_seconds"] = round(time.time() - t0, 1)
    out["compiles"] = s1["fused_compiles"] - s0["fused_compiles"]
    out["graphs"] = s1["graphs"] - s0["graphs"]
    out["bounded_compiles"] = s1["bounded_compiles"] - s0["bounded_compiles"]
    same = got.shape == want.shape and torch.equal(got, want)
    budget = zc.log2_budget(GEN_TOKENS)
    out["c"] = bool(same and out["compiles"] <= budget)
    if not same:
        n = min(got.shape[-1], want.shape[-1])
        first = next((i for i in range(n) if got[0, i] != want[0, i]), n)
        out["reason"] = f"(c) tokens differ from CPU at position {first} (of {want.shape[-1]})"
    elif not out["c"]:
        out["reason"] = f"(c) {out['compiles']} fused compiles > {budget}"
    return out


def _rss_mb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def worker_main(opts):
    import gc

    import torch  # noqa: F401  (autoloads torch_tpu)

    import zoo_configs as zc

    archs = zc.architectures()
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints go to stderr; results keep their own line
    opts.report_partial = lambda r: out.write(PARTIAL + json.dumps(r) + "\n")
    for line in sys.stdin:
        arch = line.strip()
        if not arch:
            continue
        t0 = time.time()
        try:
            res = run_arch(arch, archs[arch], opts)
        except Exception as e:  # noqa: BLE001
            res = {"arch": arch, "status": "fail", "a": False, "reason": f"harness: {_short(e)}"}
        res["seconds"] = round(time.time() - t0, 1)
        res["rss_mb"] = _rss_mb()
        out.write(DONE + json.dumps(res) + "\n")
        try:
            torch._dynamo.reset()
        except Exception:  # noqa: BLE001
            pass
        gc.collect()


# ---------------------------------------------------------------- driver side
class Worker:
    def __init__(self, opts, log):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker"]
        if not opts.bf16:
            cmd.append("--no-bf16")
        if not opts.generate:
            cmd.append("--no-generate")
        env = dict(os.environ, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
                   TRANSFORMERS_OFFLINE="1", TRANSFORMERS_VERBOSITY="error",
                   HF_HUB_DISABLE_PROGRESS_BARS="1", PYTHONWARNINGS="ignore")
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=log, text=True, bufsize=1, cwd=ROOT, env=env)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.done = 0
        self.rss_mb = 0

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def run(self, arch, timeout):
        self.proc.stdin.write(arch + "\n")
        self.proc.stdin.flush()
        deadline = time.time() + timeout
        partial = None
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.time()))
            except queue.Empty:
                self.kill()
                if partial:
                    partial["reason"] += f" (after {timeout} s)"
                    return partial
                return {"arch": arch, "status": "fail", "a": False,
                        "reason": f"crash: timeout after {timeout} s"}
            if line is None:
                rc = self.proc.wait()
                if partial:
                    partial["reason"] = f"(c) crash in compiled generate: worker died (exit status {rc})"
                    return partial
                return {"arch": arch, "status": "fail", "a": False,
                        "reason": f"crash: worker died (exit status {rc})"}
            if line.startswith(PARTIAL):
                partial = json.loads(line[len(PARTIAL):])
            elif line.startswith(DONE):
                self.done += 1
                res = json.loads(line[len(DONE):])
                self.rss_mb = res.pop("rss_mb", 0)
                return res

    def kill(self):
        try:
            self.proc.kill()
            self.proc.wait()
        except Exception:  # noqa: BLE001
            pass


def load_results():
    if os.path.exists(RESULTS):
        with open(RESULTS) as f:
            return json.load(f)
    return {"results": {}, "slices": []}


def save_results(data):
    tmp = RESULTS + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, RESULTS)


def select(archs, opts):
    names = sorted(archs)
    if opts.family:
        fams = opts.family.split(",")
        names = [n for n in names if archs[n]["family"] in fams]
    if opts.skip_family:
        skip = set(opts.skip_family.split(","))
        names = [n for n in names if not skip & set(archs[n]["mappings"])]
    if opts.only:
        pats = opts.only.split(",")
        names = [n for n in names if any(fnmatch.fnmatch(n, p) for p in pats)]
    return names


def drive(opts):
    import zoo_configs as zc

    from tqdm import tqdm

    archs = zc.architectures()
    data = load_results()
    todo = [n for n in select(archs, opts) if opts.rerun or n not in data["results"]
            or (opts.retry and data["results"][n]["status"] != "pass")]
    if opts.limit:
        todo = todo[: opts.limit]
    # The slice is recorded before it runs and counted as results arrive, so
    # an interrupted run (Ctrl-C, a timeout) still says what it covered.
    this_slice = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                  "command": " ".join(sys.argv[1:]), "ran": 0, "selected": len(todo)}
    data["slices"].append(this_slice)
    lock = threading.Lock()
    work = queue.Queue()
    for n in todo:
        work.put(n)
    bar = tqdm(total=len(todo), desc="zoo", unit="arch", dynamic_ncols=True)
    log_path = os.path.join(tempfile.gettempdir(), "zoo-workers.log")
    log = open(log_path, "a")

    def loop():
        w = None
        while True:
            try:
                arch = work.get_nowait()
            except queue.Empty:
                break
            # A worker lives for many architectures (its import, XLA client
            # and in-memory program cache are paid once); it is replaced
            # after a crash, a timeout, `recycle` architectures, or when it
            # has grown past --max-rss-mb.
            if (w is None or w.proc.poll() is not None or w.done >= opts.recycle
                    or w.rss_mb > opts.max_rss_mb):
                if w is not None:
                    w.kill()
                w = Worker(opts, log)
            log.write(f"== {arch}\n")
            log.flush()
            res = w.run(arch, opts.timeout)
            res.setdefault("model_type", archs[arch]["model_type"])
            res.setdefault("family", archs[arch]["family"])
            with lock:
                data["results"][arch] = res
                this_slice["ran"] += 1
                save_results(data)
                bar.set_postfix_str(f"{arch}: {res['status']}")
                bar.update(1)
        if w is not None:
            w.kill()

    threads = [threading.Thread(target=loop) for _ in range(opts.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bar.close()
    save_results(data)
    write_doc(archs, data)
    print(f"{len(todo)} architectures run; worker log: {log_path}")


# ---------------------------------------------------------------- report
def _ratio(n, m):
    return f"{n} of {m} ({100.0 * n / m:.1f}%)" if m else f"{n} of {m}"


def write_doc(archs, data):
    import zoo_configs as zc

    res = data["results"]
    ran = {k: v for k, v in res.items() if k in archs}
    attempted = {k: v for k, v in ran.items() if v["status"] != "excluded"}
    excluded = {k: v for k, v in ran.items() if v["status"] == "excluded"}
    a = sum(1 for v in attempted.values() if v.get("a"))
    b = sum(1 for v in attempted.values() if v.get("b"))
    bf = [v for v in attempted.values() if v.get("bf16") is not None]
    causal = [v for k, v in attempted.items() if "MODEL_FOR_CAUSAL_LM" in archs[k]["mappings"]
              and v.get("c", "absent") is not None and (v.get("a") is False or "c" in v)]
    c_att = [v for v in causal if v.get("c") is not None or v.get("a") is False]
    c = sum(1 for v in c_att if v.get("c"))
    n_causal_all = sum(1 for e in archs.values() if "MODEL_FOR_CAUSAL_LM" in e["mappings"])
    L = []
    L.append("# Model zoo: every Transformers architecture on tpu against CPU\n")
    L.append("Generated by `make zoo` (`tools/zoo.py`; tiny configs in `tools/zoo_configs.py`). "
             "Transformers " + __import__("transformers").__version__ + ", random weights, "
             "nothing downloaded. Each architecture (a model class of an auto-model mapping) "
             "gets a tiny config (2 layers, hidden 32, 4 heads, vocabulary 512, 4 experts; "
             "per-architecture overrides), is saved with `save_pretrained` and loaded with "
             "`from_pretrained(dir, device_map=\"tpu\")`.\n")
    L.append("- **(a) no crash**: the forward runs on tpu.")
    L.append(f"- **(b) parity**: every floating output tensor within max|tpu − cpu| ≤ {TOL['atol']} + "
             f"{TOL['rtol']}·max|cpu| of CPU float32, integer outputs equal. bf16 (both sides "
             f"loaded with `dtype=torch.bfloat16`) within {TOL_BF16['atol']} + "
             f"{TOL_BF16['rtol']}·max|cpu|, reported apart. (Results before "
             "the slice of 18:35 UTC used the stricter per-element form, |d| ≤ atol + rtol·|cpu|.)")
    L.append(f"- **(c) bounded dynamism** (causal LMs): greedy `generate` of {GEN_TOKENS} new "
             "tokens with the default growing cache, `forward` under "
             "`torch.compile(backend=\"tpu\", dynamic=True)` (results from before 01:20 UTC on "
             "2 December: Dynamo's default automatic dynamic shapes, one more trace; the backend "
             "pads symbolic sizes to power-of-two buckets, design.md \"Bounded dynamism\"), "
             f"gives CPU's tokens and builds at most ⌈log2 {GEN_TOKENS}⌉+2 = "
             f"{zc.log2_budget(GEN_TOKENS)} fused programs "
             "(`compile_stats()[\"fused_compiles\"]`, prefill included); the compiles column "
             "is that count.\n")
    L.append("## Totals\n")
    L.append(f"- architectures in the mappings: {len(archs)}; run so far: {len(ran)}; "
             f"attempted: {_ratio(len(attempted), len(ran))} of those run "
             f"({_ratio(len(attempted), len(archs))} of the mappings'); excluded: {len(excluded)}")
    L.append(f"- **(a) no crash: {_ratio(a, len(attempted))}**")
    L.append(f"- **(b) parity float32: {_ratio(b, len(attempted))}**; "
             f"bf16: {_ratio(sum(1 for v in bf if v['bf16']), len(bf))}")
    L.append(f"- **(c) bounded dynamism: {_ratio(c, len(c_att))}** "
             f"(causal LMs in the mappings: {n_causal_all})\n")
    L.append("## Reading these figures\n")
    for line in NOTES:
        L.append(f"- {line}")
    L.append("")
    L.append("## Slices run\n")
    for s in data.get("slices", []):
        sel = f" of {s['selected']} selected" if "selected" in s else ""
        L.append(f"- {s['date']}: `python tools/zoo.py {s['command']}` ({s['ran']} architectures run{sel})")
    not_run = sorted(set(archs) - set(ran))
    L.append(f"\nNot run yet: {len(not_run)} architectures. Continue with `make zoo` "
             "(or `python tools/zoo.py`): cached results are kept.\n")
    L.append("## Fixed in the backend from zoo failures\n")
    for line in FIXED:
        L.append(f"- {line}")
    L.append("")
    L.append("## Failures by cause\n")
    groups = {}
    for k, v in attempted.items():
        if v["status"] == "fail" or v.get("bf16") is False:
            cause = v.get("reason") or "; ".join(v.get("notes", []))
            cause = cause.split(":")[0] + ": " + ":".join(cause.split(":")[1:3])[:90]
            groups.setdefault(cause, []).append(k)
    for cause, ks in sorted(groups.items(), key=lambda x: -len(x[1])):
        L.append(f"- {len(ks)} × {cause} — {', '.join(sorted(ks)[:8])}{' …' if len(ks) > 8 else ''}")
    L.append("\n## Architectures\n")
    L.append("| architecture | family | status | (a) | (b) f32 max err | bf16 | (c) | compiles | reason / notes |")
    L.append("|---|---|---|---|---|---|---|---|---|")

    def mark(x):
        return "—" if x is None else ("yes" if x else "**no**")

    for k in sorted(attempted):
        v = attempted[k]
        err = v.get("max_err")
        err = "" if err is None else f"{err:.1e}"
        reason = (v.get("reason", "") + (" " if v.get("reason") else "") + "; ".join(v.get("notes", []))).replace("|", "\\|")
        fam = v.get("family", "").replace("MODEL_FOR_", "").lower() or "base"
        L.append(f"| {k} | {fam} | {v['status']} | {mark(v.get('a'))} | {mark(v.get('b'))} {err} | "
                 f"{mark(v.get('bf16'))} | {mark(v.get('c'))} | {v.get('compiles', '')} | {reason[:300]} |")
    L.append("\n## Exclusions by cause\n")
    import re

    egroups = {}
    for k, v in excluded.items():
        r = v.get("reason", "")
        head, _, rest = r.partition(": ")
        # the error's type and its first words, numbers folded
        cause = head + ": " + re.sub(r"\d+", "N", rest)[:70]
        egroups.setdefault(cause, []).append(k)
    for cause, ks in sorted(egroups.items(), key=lambda x: (-len(x[1]), x[0])):
        L.append(f"- {len(ks)} × {cause.replace('|', '/')} — {', '.join(sorted(ks)[:6])}"
                 f"{' …' if len(ks) > 6 else ''}")
    L.append("\n## Excluded\n")
    L.append("| architecture | reason |")
    L.append("|---|---|")
    for k in sorted(excluded):
        L.append(f"| {k} | {excluded[k]['reason'].replace('|', '/')[:300]} |")
    with open(DOC, "w") as f:
        f.write("\n".join(L) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--only", help="comma-separated class names or globs (LlamaFor*)")
    p.add_argument("--family", help="comma-separated mapping names, e.g. MODEL_FOR_CAUSAL_LM")
    p.add_argument("--skip-family", help="comma-separated mapping names to leave out")
    p.add_argument("--limit", type=int, help="at most this many architectures (after the cache)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout", type=int, default=600, help="seconds per architecture")
    p.add_argument("--recycle", type=int, default=200, help="architectures per worker process")
    p.add_argument("--max-rss-mb", type=int, default=3000,
                   help="replace a worker whose resident memory passed this")
    p.add_argument("--rerun", action="store_true", help="ignore cached results of the selection")
    p.add_argument("--retry", action="store_true", help="run cached failures and exclusions again")
    p.add_argument("--no-bf16", dest="bf16", action="store_false")
    p.add_argument("--no-generate", dest="generate", action="store_false")
    p.add_argument("--doc-only", action="store_true")
    p.add_argument("--list", action="store_true", help="print the selection and exit")
    opts = p.parse_args()
    if opts.worker:
        return worker_main(opts)
    import zoo_configs as zc

    if opts.list:
        archs = zc.architectures()
        for n in select(archs, opts):
            print(n, archs[n]["family"])
        return
    if opts.doc_only:
        write_doc(zc.architectures(), load_results())
        return
    drive(opts)


if __name__ == "__main__":
    main()
