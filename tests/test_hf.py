"""Hugging Face on tpu, as a user moving from CUDA would use it (issue 16).

A fixed handful of tiny random-weight models (Llama-like, BERT-like, T5-like,
ViT-like, a mixture of experts, Whisper-like), each built from a config,
saved with `save_pretrained` and loaded twice from that directory: on CPU,
and with `device_map="tpu"`. Each gets forward parity, 8-token greedy
generation parity (the generative ones) and one Trainer step with plain
TrainingArguments against the same step on CPU (`use_cpu=True`). Then what
torch_tpu/huggingface.py adds: accelerate's device, `device_map="auto"`,
`pipeline()` without a device, `torch_compile_backend="tpu"`; and generate's
other modes (sampling, beam, static cache, compiled decode) and a Diffusers
pipeline. Nothing is downloaded.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

import torch_tpu

transformers = pytest.importorskip("transformers")

from utils import assert_close  # noqa: E402

VOCAB = 96


def _llama():
    return transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                    pad_token_id=0, bos_token_id=1, eos_token_id=2)


def _configs():
    t = transformers
    return {
        "llama": (t.LlamaForCausalLM, _llama()),
        "bert": (t.BertForMaskedLM, t.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                                 num_attention_heads=4, intermediate_size=64,
                                                 max_position_embeddings=64, hidden_dropout_prob=0.0,
                                                 attention_probs_dropout_prob=0.0)),
        "t5": (t.T5ForConditionalGeneration, t.T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                                        num_heads=4, decoder_start_token_id=0, pad_token_id=0,
                                                        eos_token_id=1, dropout_rate=0.0)),
        "vit": (t.ViTForImageClassification, t.ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32,
                                                         num_hidden_layers=2, num_attention_heads=4,
                                                         intermediate_size=64, num_labels=3)),
        # The default experts path (grouped by torch.histc over integer expert ids).
        "mixtral": (t.MixtralForCausalLM, t.MixtralConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                                          num_hidden_layers=2, num_attention_heads=4,
                                                          num_key_value_heads=2, num_local_experts=4,
                                                          num_experts_per_tok=2, max_position_embeddings=64,
                                                          pad_token_id=0, bos_token_id=1, eos_token_id=2)),
        "whisper": (t.WhisperForConditionalGeneration,
                    t.WhisperConfig(vocab_size=VOCAB, num_mel_bins=16, d_model=32, encoder_layers=2, decoder_layers=2,
                                    encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                                    decoder_ffn_dim=64, max_source_positions=8, max_target_positions=32,
                                    pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
                                    suppress_tokens=[], begin_suppress_tokens=[])),
    }


ARCHS = list(_configs())
GENERATIVE = ["llama", "t5", "mixtral", "whisper"]


def _inputs(name, batch=1, seed=0):
    # Every sequence (encoder and decoder) is 8 long and every model 32 wide,
    # so the models share many of their programs: fewer compiles.
    g = torch.Generator().manual_seed(seed)
    if name == "vit":
        return {"pixel_values": torch.randn(batch, 3, 16, 16, generator=g)}
    if name == "whisper":
        return {"input_features": torch.randn(batch, 16, 16, generator=g),
                "decoder_input_ids": torch.randint(3, VOCAB, (batch, 8), generator=g)}
    ids = torch.randint(3, VOCAB, (batch, 8), generator=g)
    out = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if name == "t5":
        out["decoder_input_ids"] = torch.randint(3, VOCAB, (batch, 8), generator=g)
    return out


def _labels(name, inputs, seed=1):
    g = torch.Generator().manual_seed(seed)
    if name == "vit":
        return torch.randint(0, 3, (inputs["pixel_values"].shape[0],), generator=g)
    ref = inputs.get("decoder_input_ids", inputs.get("input_ids"))
    return torch.randint(3, VOCAB, ref.shape, generator=g)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """name -> directory of a tiny random-weight model, saved once."""
    out = {}
    for name, (cls, config) in _configs().items():
        torch.manual_seed(0)
        path = tmp_path_factory.mktemp(name)
        cls(config).save_pretrained(path)
        out[name] = (cls, str(path))
    return out


@pytest.fixture(scope="module")
def models(saved):
    """name -> (CPU model, tpu model) loaded from the same directory."""
    out = {}
    for name, (cls, path) in saved.items():
        cpu = cls.from_pretrained(path).eval()
        tpu = cls.from_pretrained(path, device_map="tpu").eval()
        out[name] = (cpu, tpu)
    return out


def _on(inputs, device):
    return {k: v.to(device) for k, v in inputs.items()}


@pytest.mark.parametrize("name", ARCHS)
def test_forward_parity(models, name):
    cpu, tpu = models[name]
    assert tpu.device.type == "tpu" and all(p.device.type == "tpu" for p in tpu.parameters())
    inputs = _inputs(name)
    with torch.no_grad():
        expected = cpu(**inputs).logits
        actual = tpu(**_on(inputs, "tpu")).logits
    assert actual.device.type == "tpu"
    assert_close(actual, expected, atol=2e-5, rtol=1e-4)


@contextlib.contextmanager
def _nothing():
    yield


def _generate(model, name, device, **kw):
    inputs = _inputs(name)
    inputs.pop("decoder_input_ids", None)
    kw.setdefault("do_sample", False)
    with torch.no_grad():
        return model.generate(**_on(inputs, device), max_new_tokens=8, min_new_tokens=8, **kw).cpu()


@pytest.mark.parametrize("name", GENERATIVE)
def test_generate_greedy_parity(models, name):
    """Llama with generate's default (dynamic) cache, the others with a
    static one in eager (every step the same shapes: a few programs instead
    of one per cache length, which keeps this file fast)."""
    cpu, tpu = models[name]
    kw = {} if name == "llama" else dict(cache_implementation="static", disable_compile=True)
    expected = _generate(cpu, name, "cpu")
    # In Fused Eager a model's first decode steps compile their own fused
    # programs (bounded since recurring traces run split, but tens of
    # seconds per model here). Llama covers generate in that mode; the
    # others run their decode in Strict Eager, for time.
    mode = "fused" if name == "llama" else "strict"
    with torch_tpu.eager_mode(mode) if torch_tpu.get_eager_mode() == "fused" else _nothing():
        actual = _generate(tpu, name, "tpu", **kw)
    assert expected.shape[-1] >= 8
    assert torch.equal(actual, expected)


def _train_one_step(model, use_cpu, name, out_dir):
    # Llama keeps the default AdamW; the others take SGD: fewer programs to
    # compile, and AdamW's first step (about lr * sign(grad)) turns a rounding
    # difference in a near-zero gradient into a full-size weight difference.
    from transformers import Trainer, TrainingArguments

    # Batch 1: the forward's programs are those of the other tests.
    inputs = _inputs(name, seed=3)
    labels = _labels(name, inputs)
    dataset = [dict({k: v[0] for k, v in inputs.items()}, labels=labels[0])]
    args = TrainingArguments(output_dir=out_dir, max_steps=1, per_device_train_batch_size=1, learning_rate=1e-2,
                             report_to=[], use_cpu=use_cpu, save_strategy="no", disable_tqdm=True,
                             dataloader_pin_memory=False, optim="adamw_torch" if name == "llama" else "sgd")
    trainer = Trainer(model=model, args=args, train_dataset=dataset)
    loss = trainer.train().training_loss
    return loss, args.device, trainer.accelerator.device


@pytest.mark.parametrize("name", ARCHS)
def test_trainer_step(saved, name, tmp_path):
    """Plain TrainingArguments train on tpu without being told, and one
    step moves the weights as the same step on CPU does."""
    cls, path = saved[name]
    cpu = cls.from_pretrained(path)
    tpu = cls.from_pretrained(path)  # on cpu: the Trainer moves it
    before = {k: v.clone() for k, v in cpu.state_dict().items()}
    loss_cpu, dev_cpu, acc_cpu = _train_one_step(cpu, True, name, str(tmp_path / "cpu"))
    loss_tpu, dev_tpu, acc_tpu = _train_one_step(tpu, False, name, str(tmp_path / "tpu"))
    assert (dev_cpu.type, acc_cpu.type) == ("cpu", "cpu")  # use_cpu=True still means cpu
    assert (dev_tpu.type, acc_tpu.type) == ("tpu", "tpu")
    assert all(p.device.type == "tpu" for p in tpu.parameters())
    assert abs(loss_tpu - loss_cpu) < 1e-4 * max(1.0, abs(loss_cpu))
    moved = 0
    tpu_state = tpu.state_dict()
    for k, v in cpu.state_dict().items():
        assert_close(tpu_state[k], v, atol=1e-4, rtol=1e-3, msg=lambda m, k=k: f"{k}: {m}")
        moved += not torch.equal(v, before[k])
    assert moved > 0  # the step trained something


def test_flex_attention_llama(saved, models, fresh_dynamo):
    """attn_implementation="flex_attention" on tpu (Transformers offers it once
    torch's flex_attention takes tpu tensors): logits with a padded row,
    greedy tokens and the gradients of one backward as the SDPA model's on CPU
    (CPU's flex_attention has no backward)."""
    from transformers.utils import is_torch_flex_attn_available

    assert is_torch_flex_attn_available()
    cls, path = saved["llama"]
    cpu = models["llama"][0]
    tpu = cls.from_pretrained(path, device_map="tpu", attn_implementation="flex_attention")
    assert tpu.config._attn_implementation == "flex_attention"
    inputs = _inputs("llama", batch=2)
    inputs["attention_mask"][1, :3] = 0
    with torch.no_grad():
        expected = cpu(**inputs).logits
        actual = tpu(**_on(inputs, "tpu")).logits
    assert_close(actual[0], expected[0], atol=2e-5, rtol=1e-4)
    assert_close(actual[1, 3:], expected[1, 3:], atol=2e-5, rtol=1e-4)  # the padded positions' rows are unspecified
    assert torch.equal(_generate(tpu, "llama", "tpu"), _generate(cpu, "llama", "cpu"))
    ids = inputs["input_ids"][:1]
    cpu_train = cls.from_pretrained(path, attn_implementation="sdpa")
    cpu_train(input_ids=ids, labels=ids).loss.backward()
    tpu(input_ids=ids.to("tpu"), labels=ids.to("tpu")).loss.backward()
    for (name, a), b in zip(tpu.named_parameters(), cpu_train.parameters()):
        assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-3, msg=lambda m, name=name: f"{name}: {m}")


# ------------------------------------------------------------ what huggingface.py adds


def test_accelerate_default_device():
    from accelerate.state import AcceleratorState, PartialState

    AcceleratorState._reset_state(reset_partial_state=True)
    try:
        assert PartialState().device.type == "tpu"
        AcceleratorState._reset_state(reset_partial_state=True)
        assert PartialState(cpu=True).device.type == "cpu"
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)


def test_accelerate_prepare_loop():
    """An optimizer built before `prepare` moves the model still trains it
    (the Parameters survive `.to("tpu")`), and the step matches CPU's."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    def step(cpu):
        AcceleratorState._reset_state(reset_partial_state=True)
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 2)),
                                           batch_size=8)
        acc = Accelerator(cpu=cpu)
        model, opt, data = acc.prepare(model, opt, data)
        for x, y in data:
            loss = torch.nn.functional.mse_loss(model(x), y)
            acc.backward(loss)
            opt.step()
        return acc.device, model.weight.detach().cpu()

    try:
        dev_cpu, w_cpu = step(True)
        dev_tpu, w_tpu = step(False)
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)
    torch.manual_seed(0)
    w0 = torch.nn.Linear(4, 2).weight.detach()
    assert (dev_cpu.type, dev_tpu.type) == ("cpu", "tpu")
    assert not torch.equal(w_tpu, w0)
    assert_close(w_tpu, w_cpu)


class _DropoutRegression(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, x, labels=None):
        out = self.linear(torch.nn.functional.dropout(x, 0.5, self.training))
        return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}


class _Pairs(torch.utils.data.Dataset):
    def __init__(self, n=32):
        g = torch.Generator().manual_seed(1)
        self.x, self.y = torch.randn(n, 8, generator=g), torch.randn(n, 4, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i]}


def test_trainer_resume_draws_the_same_dropout(tmp_path):
    """8 steps with dropout, a checkpoint at step 4, then a run resumed from
    it: the same weights as the uninterrupted run, as on CPU and CUDA (the
    checkpoint carries tpu's generator; without it the resumed run drew
    other masks, max diff 0.08)."""
    from transformers import Trainer, TrainingArguments

    def train(resume=None):
        torch.manual_seed(0)
        args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=4, max_steps=8,
                                 learning_rate=0.1, save_strategy="steps", save_steps=4, report_to=[], seed=0,
                                 disable_tqdm=True)
        trainer = Trainer(model=_DropoutRegression(), args=args, train_dataset=_Pairs())
        trainer.train(resume_from_checkpoint=resume)
        assert trainer.model.linear.weight.device.type == "tpu"
        return trainer.model.linear.weight.detach().cpu()

    whole = train()
    assert "tpu" in torch.load(tmp_path / "checkpoint-4" / "rng_state.pth", weights_only=False)
    torch.testing.assert_close(train(str(tmp_path / "checkpoint-4")), whole, rtol=0, atol=0)


def test_accelerate_load_state_restores_tpu_generator(tmp_path):
    """Accelerator.save_state / load_state bring back tpu's random state (the
    masks drawn after load_state are those drawn after save_state)."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    try:
        acc = Accelerator(project_dir=str(tmp_path))
        acc.prepare(torch.nn.Linear(4, 4))
        device = acc.device
        torch.manual_seed(0)
        acc.save_state(str(tmp_path / "state"))
        after_save = torch.nn.functional.dropout(torch.ones(256, device=acc.device), 0.5).cpu()
        acc.load_state(str(tmp_path / "state"))
        after_load = torch.nn.functional.dropout(torch.ones(256, device=acc.device), 0.5).cpu()
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)
    assert device.type == "tpu"
    assert torch.equal(after_load, after_save)


def test_device_map_auto_and_max_memory(saved):
    from accelerate.utils import get_max_memory

    memory = get_max_memory()
    assert 0 in memory and "cpu" in memory and list(memory)[0] == 0  # accelerators first, as for CUDA
    assert get_max_memory({0: "1GiB", "cpu": "2GiB"}) == {0: 2**30, "cpu": 2 * 2**30}
    with pytest.raises(ValueError, match="tpu device 5"):
        get_max_memory({5: "1GiB"})
    cls, path = saved["llama"]
    model = cls.from_pretrained(path, device_map="auto")
    assert {p.device.type for p in model.parameters()} == {"tpu"}


def test_bf16_load_and_forward(saved, models):
    cls, path = saved["llama"]
    model = cls.from_pretrained(path, device_map="tpu", dtype=torch.bfloat16).eval()
    assert {(p.device.type, p.dtype) for p in model.parameters()} == {("tpu", torch.bfloat16)}
    inputs = _inputs("llama")
    with torch.no_grad():
        actual = model(**_on(inputs, "tpu")).logits
        expected = models["llama"][0].to(torch.bfloat16)(**inputs).logits
        models["llama"][0].float()
    assert actual.dtype == torch.bfloat16
    assert_close(actual.float(), expected.float(), atol=5e-2, rtol=5e-2)


def test_pipeline_default_device(saved, tmp_path):
    from tokenizers import Tokenizer, models as tok_models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, pipeline

    vocab = {f"w{i}": i for i in range(VOCAB)}
    backend = Tokenizer(tok_models.WordLevel(vocab, unk_token="w0"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="w0", pad_token="w0", eos_token="w2")
    cls, path = saved["llama"]
    model = cls.from_pretrained(path)
    pipe = pipeline("text-generation", model=model, tokenizer=tokenizer)
    assert pipe.device.type == "tpu" and pipe.model.device.type == "tpu"
    ids = _inputs("llama")["input_ids"]  # the shapes of the tests above: nothing new to compile
    out = pipe(" ".join(f"w{i}" for i in ids[0].tolist()), max_new_tokens=8, min_new_tokens=8,
               do_sample=False, return_tensors=True)[0]["generated_token_ids"]
    ref = cls.from_pretrained(path).generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8,
                                             min_new_tokens=8, do_sample=False)
    assert list(out) == ref[0].tolist()
    assert pipeline("text-generation", model=model, tokenizer=tokenizer, device="cpu").device.type == "cpu"


def test_compile_backend_choice(tmp_path):
    from accelerate.utils import DynamoBackend, TorchDynamoPlugin
    from transformers import TrainingArguments

    assert DynamoBackend("tpu") is DynamoBackend("TPU")
    assert TorchDynamoPlugin(backend="tpu").to_kwargs()["backend"] == "tpu"
    with pytest.raises(ValueError):
        DynamoBackend("not_a_backend")
    assert TrainingArguments(output_dir=str(tmp_path), torch_compile=True, report_to=[]).torch_compile_backend == "tpu"
    cpu_args = TrainingArguments(output_dir=str(tmp_path), torch_compile=True, use_cpu=True, report_to=[])
    assert cpu_args.torch_compile_backend == "inductor"


# ------------------------------------------------------------------ generate modes


def test_generate_static_cache_compiled(models, fresh_dynamo):
    """Transformers' own auto-compile of the static-cache decode step picks
    backend "tpu" (modeling_utils._default_compile_config); it gives CPU's
    tokens and compiles the decode step once (and the prefill runs eager)."""
    cpu, tpu = models["llama"]
    expected = _generate(cpu, "llama", "cpu")
    before = torch_tpu.compile_stats()
    first = _generate(tpu, "llama", "tpu", cache_implementation="static")
    mid = torch_tpu.compile_stats()
    second = _generate(tpu, "llama", "tpu", cache_implementation="static")
    after = torch_tpu.compile_stats()
    assert torch.equal(first, expected) and torch.equal(second, expected)
    assert 1 <= mid["graphs"] - before["graphs"] <= 2  # the decode step (and at most one recompile)
    assert after["graphs"] == mid["graphs"]  # a second generate compiles nothing
    assert after["graph_calls"] - mid["graph_calls"] >= 7  # the decode steps ran compiled
