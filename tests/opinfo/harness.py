"""Runs PyTorch's own OpInfo entries (`op_db`) on tpu and compares with CPU.

Three checks per entry, each on the entry's own sample inputs:
  forward   every sample, per dtype: inputs made on CPU, copied to tpu, the
            same call on both, outputs compared (like PyTorch's
            TestCommon.test_compare_cpu, after `output_process_fn_grad`);
  gradient  float32, differentiable entries: the same upstream gradient on
            both devices, input gradients compared;
  errors    each `error_inputs` case must behave as on CPU: raise the type
            PyTorch declares for it where CPU raises, nothing where CPU
            accepts the case.
Used by tools/opinfo_report.py (whole suite) and tests/test_opinfo_slice.py
(the CI slice).
"""

from __future__ import annotations

import dataclasses
import itertools
import traceback

import torch
from torch.utils._pytree import tree_flatten, tree_map

DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "bool": torch.bool,
    "complex64": torch.complex64,
    # not in the default run: for sweeps with --dtypes
    "float16": torch.float16,
    "uint8": torch.uint8,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
}

# (atol, rtol). float32 as PyTorch's test_compare_cpu; bf16 allows a couple
# of bf16 ulps (CPU and tpu both compute in f32 and round once, but not always
# at the same intermediate points).
TOLERANCE = {
    torch.float64: (1e-5, 1e-5),
    torch.float32: (1e-3, 1e-3),
    torch.complex128: (1e-5, 1e-5),
    torch.complex64: (1e-3, 1e-3),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (2e-2, 2e-2),
}  # integer and bool outputs: exact

# Entries whose outputs are random or uninitialised: their values cannot be
# compared with CPU (PyTorch skips them in test_compare_cpu too). For these
# only shape, dtype and device are compared.
UNCOMPARABLE_VALUES = {
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "normal", "uniform",
    "multinomial", "rand_like", "randn_like", "randint_like", "randint", "randn", "rand",
    "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
    "nn.functional.rrelu", "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d", "empty", "empty_like", "new_empty",
    "new_empty_strided", "empty_strided", "empty_permuted", "svd_lowrank", "pca_lowrank",
    "torch.empty", "randperm",
}


def _applies_dropout(op, sample) -> bool:
    """A sample of an attention entry with dropout (p > 0, training): its
    values are random like those of the entries above, so its forward is
    compared on shape and dtype only and its gradient not at all."""
    if sample.kwargs.get("dropout_p", 0) > 0:  # scaled_dot_product_attention
        return True
    return (op.name == "nn.functional.multi_head_attention_forward" and bool(sample.kwargs.get("training"))
            and sample.args[9] > 0)  # its dropout_p is positional


def full_name(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def all_entries() -> dict:
    from torch.testing._internal.common_methods_invocations import op_db

    return {full_name(op): op for op in op_db}


@dataclasses.dataclass
class Outcome:
    status: str  # "pass", "fail", "unsupported" (CPU lacks the dtype), "none" (no samples)
    samples: int = 0
    detail: str = ""

    def as_dict(self):
        return dataclasses.asdict(self)


def _short(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()
    first = msg[0] if msg else ""
    return f"{type(exc).__name__}: {first[:300]}"


def _describe(sample) -> str:
    def one(x):
        if isinstance(x, torch.Tensor):
            return f"{x.dtype}{list(x.shape)}".replace("torch.", "")
        return repr(x)[:40]

    args = [one(sample.input)] + [one(a) for a in sample.args]
    args += [f"{k}={one(v)}" for k, v in sample.kwargs.items()]
    return ", ".join(args)[:200]


def _to_tpu(t):
    if not isinstance(t, torch.Tensor):
        return t
    out = t.detach().to("tpu")
    return out.requires_grad_(t.requires_grad) if t.requires_grad else out


def _on_cpu(x):
    return tree_map(lambda t: t.detach().cpu() if isinstance(t, torch.Tensor) else t, x)


def _check_devices(result):
    for t in tree_flatten(result)[0]:
        if isinstance(t, torch.Tensor) and t.device.type != "tpu":
            raise AssertionError(f"result on {t.device}, expected tpu")


def _compare(actual, expected, dtype, values: bool):
    """Outputs must match in structure, dtype and shape, and in value within
    the tolerance of each expected output's own dtype."""
    actual = _on_cpu(actual)
    flat_a, spec_a = tree_flatten(actual)
    flat_e, spec_e = tree_flatten(expected)
    assert spec_a == spec_e, f"output structure {spec_a} != {spec_e}"
    for a, e in zip(flat_a, flat_e):
        if not isinstance(e, torch.Tensor):
            if values:
                torch.testing.assert_close(a, e, equal_nan=True)
            continue
        assert isinstance(a, torch.Tensor), f"got {type(a).__name__}, CPU gives a tensor"
        if not values:
            assert a.shape == e.shape and a.dtype == e.dtype, (
                f"got {tuple(a.shape)} {a.dtype}, CPU gives {tuple(e.shape)} {e.dtype}")
            continue
        atol, rtol = TOLERANCE.get(e.dtype, (0, 0))
        torch.testing.assert_close(a, e, atol=atol, rtol=rtol, equal_nan=True)


def _limited(samples, max_samples):
    return samples if max_samples is None else itertools.islice(samples, max_samples)


def _seeded(fn):
    # Sample generators draw random inputs; seed so the slice is repeatable.
    torch.manual_seed(0)
    return fn()


def _to_cpu(t):
    if not isinstance(t, torch.Tensor):
        return t
    out = _same_layout_cpu(t.detach())
    return out.requires_grad_(t.requires_grad) if t.requires_grad else out


def _same_layout_cpu(t):
    """A CPU copy that keeps the view's place in its storage (offset, strides,
    the storage around it), so ops that address storage (as_strided with a
    storage_offset) see the same memory on both devices. Plain .cpu() makes a
    fresh tensor at offset 0."""
    if t.layout != torch.strided or t.is_conj() or t.is_neg() or t.numel() == 0:
        return t.cpu()
    numel = t.untyped_storage().nbytes() // t.element_size()
    if t.storage_offset() == 0 and numel == t.numel():
        return t.cpu()
    whole = t.as_strided((numel,), (1,), 0).cpu()
    return whole.as_strided(t.shape, t.stride(), t.storage_offset())


def _retarget(x, src, dst):
    """Device arguments (factories' device=, .to(...)) on `src` move to `dst`."""
    if isinstance(x, (str, torch.device)) and str(x).split(":")[0] == src:
        return dst if isinstance(x, str) else torch.device(dst)
    if isinstance(x, (list, tuple)) and not isinstance(x, torch.Size):
        return type(x)(_retarget(v, src, dst) for v in x)
    if isinstance(x, dict):
        return {k: _retarget(v, src, dst) for k, v in x.items()}
    return x


def _device_to_tpu(x):
    return _retarget(x, "cpu", "tpu")


def _moved_to_cpu(sample):
    c = sample.transform(_to_cpu)
    c.args, c.kwargs = _retarget(c.args, "tpu", "cpu"), _retarget(c.kwargs, "tpu", "cpu")
    return c


def _names_other_device(sample) -> bool:
    d = sample.kwargs.get("device")
    return d is not None and not str(d).startswith("tpu")


def _involves_tpu(sample) -> bool:
    for x in tree_flatten((sample.input, sample.args, sample.kwargs))[0]:
        if isinstance(x, torch.Tensor) and x.device.type == "tpu":
            return True
        if isinstance(x, (str, torch.device)) and str(x).startswith("tpu"):
            return True
    return False


def sample_pairs(op, dtype, requires_grad=False, max_samples=None):
    """(tpu sample, CPU copy) pairs. Like PyTorch's test_compare_cpu, samples
    are made on the device (so generators place CPU-only arguments where
    PyTorch wants them) and copied to CPU; if the generator itself fails on
    tpu, they are made on CPU and copied to tpu instead. Each copy is made
    just before its sample runs, as test_compare_cpu does: generators reuse
    tensors across samples (batch_norm's running stats), and an earlier
    sample that updates them in place must be seen by both copies."""
    try:
        made = _seeded(lambda: list(_limited(op.sample_inputs("tpu", dtype, requires_grad=requires_grad),
                                             max_samples)))
        return ((s, _moved_to_cpu(s)) for s in made)
    except Exception:
        made = _seeded(lambda: list(_limited(op.sample_inputs("cpu", dtype, requires_grad=requires_grad),
                                             max_samples)))

        def to_tpu(s):
            t = s.transform(_to_tpu)
            t.args, t.kwargs = _device_to_tpu(t.args), _device_to_tpu(t.kwargs)
            return t

        return ((to_tpu(s), s) for s in made)


def run_forward(op, dtype: torch.dtype, max_samples=None) -> Outcome:
    if dtype not in op.supported_dtypes("cpu"):
        return Outcome("unsupported")
    values = full_name(op) not in UNCOMPARABLE_VALUES and op.name not in UNCOMPARABLE_VALUES
    n = 0
    try:
        pairs = sample_pairs(op, dtype, max_samples=max_samples)
    except Exception as e:  # the generator itself failed on CPU
        return Outcome("none", 0, "sample generation failed on CPU: " + _short(e))
    for tpu_sample, sample in pairs:
        if not _involves_tpu(tpu_sample):
            continue  # e.g. torch.arange(2): a CPU call whatever the harness does
        try:
            expected = op(sample.input, *sample.args, **sample.kwargs)
        except Exception:
            continue  # CPU rejects this sample itself: nothing to compare
        expected = sample.output_process_fn_grad(expected)
        try:
            actual = op(tpu_sample.input, *tpu_sample.args, **tpu_sample.kwargs)
            actual = tpu_sample.output_process_fn_grad(actual)
            if not _names_other_device(tpu_sample):  # e.g. zeros_like(x, device="cpu")
                _check_devices(actual)
            _compare(actual, _on_cpu(expected), dtype, values and not _applies_dropout(op, sample))
        except Exception as e:
            return Outcome("fail", n, f"sample {n}: {_short(e)} [{_describe(sample)}]")
        n += 1
    return Outcome("pass" if n else "none", n)


def _grad_leaves(sample):
    flat = tree_flatten((sample.input, sample.args, sample.kwargs))[0]
    return [t for t in flat if isinstance(t, torch.Tensor) and t.requires_grad]


def _grad_outputs(result, complex_ok=False):
    return [t for t in tree_flatten(result)[0]
            if isinstance(t, torch.Tensor) and t.requires_grad
            and (t.is_floating_point() or (complex_ok and t.is_complex()))]


def run_grad(op, max_samples=None, dtype=torch.float32) -> Outcome:
    """Input gradients of `dtype` samples (float32 in the suite; complex64
    for sweeps: gradients with respect to complex inputs, CPU's
    conjugate-Wirtinger convention)."""
    cplx = dtype.is_complex
    if not op.supports_autograd or dtype not in op.supported_backward_dtypes("cpu"):
        return Outcome("unsupported")
    if full_name(op) in UNCOMPARABLE_VALUES or op.name in UNCOMPARABLE_VALUES:
        return Outcome("unsupported", 0, "random op")
    try:
        pairs = sample_pairs(op, dtype, requires_grad=True, max_samples=max_samples)
    except Exception as e:
        return Outcome("none", 0, "sample generation failed on CPU: " + _short(e))
    n = 0
    for tpu_sample, sample in pairs:
        if _applies_dropout(op, sample):
            continue
        try:
            out_c = _grad_outputs(sample.output_process_fn_grad(
                op(sample.input, *sample.args, **sample.kwargs)), cplx)
            leaves_c = _grad_leaves(sample)
            if not out_c or not leaves_c:
                continue
            gen = torch.Generator().manual_seed(n)
            cotangents = [torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in out_c]
            grads_c = torch.autograd.grad(out_c, leaves_c, cotangents, allow_unused=True)
        except Exception:
            continue  # CPU cannot differentiate this sample: nothing to compare
        try:
            out_t = _grad_outputs(tpu_sample.output_process_fn_grad(
                op(tpu_sample.input, *tpu_sample.args, **tpu_sample.kwargs)), cplx)
            leaves_t = _grad_leaves(tpu_sample)
            grads_t = torch.autograd.grad(out_t, leaves_t, [c.to("tpu") for c in cotangents],
                                          allow_unused=True)
            _check_devices(grads_t)
            _compare(grads_t, grads_c, dtype, True)
        except Exception as e:
            return Outcome("fail", n, f"sample {n}: " + _short(e))
        n += 1
    return Outcome("pass" if n else "none", n)


def run_errors(op, max_samples=None) -> Outcome:
    """Each error_inputs case must behave as on CPU: raise the declared type
    where CPU raises, and raise nothing where CPU raises nothing (op_db keeps a
    few cases that CPU accepts, e.g. clamp_min(tensor, 2); PyTorch's own
    test_errors marks those expectedFailure)."""
    if op.error_inputs_func is None:
        return Outcome("none")
    try:
        cases = _seeded(lambda: list(_limited(op.error_inputs("tpu"), max_samples)))
        moved = False
    except Exception:
        try:
            cases = _seeded(lambda: list(_limited(op.error_inputs("cpu"), max_samples)))
            moved = True
        except Exception as e:
            return Outcome("none", 0, "error_inputs generation failed on CPU: " + _short(e))
    # The same cases built on CPU (same seed, same order), to learn which of
    # them CPU itself rejects.
    try:
        cpu_cases = _seeded(lambda: list(_limited(op.error_inputs("cpu"), max_samples)))
    except Exception:
        cpu_cases = None
    if cpu_cases is not None and len(cpu_cases) != len(cases):
        cpu_cases = None
    n = 0
    for k, case in enumerate(cases):
        cpu_raises = True
        if cpu_cases is not None:
            c = cpu_cases[k].sample_input
            try:
                op(c.input, *c.args, **c.kwargs)
                cpu_raises = False
            except Exception:
                pass
        tpu_s = case.sample_input
        if moved:
            tpu_s = tpu_s.transform(_to_tpu)
            tpu_s.args, tpu_s.kwargs = _device_to_tpu(tpu_s.args), _device_to_tpu(tpu_s.kwargs)
        try:
            op(tpu_s.input, *tpu_s.args, **tpu_s.kwargs)
            torch.tpu.synchronize()
        except case.error_type as e:
            if not cpu_raises:
                return Outcome("fail", n, f"case {n}: CPU raises nothing, tpu raised {_short(e)}")
            n += 1
            continue
        except Exception as e:
            return Outcome("fail", n, f"case {n}: expected {case.error_type.__name__}, got {_short(e)}")
        if not cpu_raises:
            n += 1
            continue
        return Outcome("fail", n, f"case {n}: expected {case.error_type.__name__}, nothing raised")
    return Outcome("pass" if n else "none", n)


def run_entry(op, dtypes=("float32", "bfloat16", "int64", "bool"), grads=True, errors=True,
              max_samples=None) -> dict:
    """All checks of one entry: {"forward": {dtype: Outcome}, "grad": Outcome, "errors": Outcome}."""
    result = {"forward": {}, "grad": None, "errors": None}
    for name in dtypes:
        result["forward"][name] = _guard(lambda: run_forward(op, DTYPES[name], max_samples)).as_dict()
    if grads:
        result["grad"] = _guard(lambda: run_grad(op, max_samples)).as_dict()
    if errors:
        result["errors"] = _guard(lambda: run_errors(op, max_samples)).as_dict()
    return result


def _guard(fn) -> Outcome:
    try:
        return fn()
    except Exception as e:  # a harness-level surprise is a failure with its trace
        return Outcome("fail", 0, "harness: " + _short(e) + " | "
                       + traceback.format_exc().strip().splitlines()[-2][:200])
