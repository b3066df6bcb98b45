"""Runs PyTorch's own ModuleInfo entries (`module_db`) on tpu and compares
with CPU, as PyTorch's TestModule.test_cpu_gpu_parity does for CUDA.

For each entry, dtype (float32, and bfloat16 where the entry lists it) and
training flag (train, plus eval where the entry says the two differ):
every sample builds the module on CPU (seeded), deep-copies it to tpu,
runs the same inputs on both and compares
  forward   the outputs (eval mode: also under no_grad, where PyTorch takes
            its inference fast paths, e.g. TransformerEncoderLayer's);
  backward  float32 and bfloat16: the same upstream gradient on both, then
            the gradients of every parameter and of every input that
            requires grad.
Used by tools/opinfo_report.py (`--modules`, whole module_db) and
tests/test_moduleinfo_slice.py (the CI slice).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import traceback

import torch
from torch.nn.utils.rnn import PackedSequence
from torch.utils._pytree import tree_flatten, tree_map

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}

TOLERANCE = {
    torch.float32: (1e-3, 1e-3),   # as PyTorch's test_cpu_gpu_parity (assertEqual's defaults are tighter)
    torch.bfloat16: (2e-2, 2e-2),
}

# Modules whose outputs are random in training: only shapes/dtypes compare.
RANDOM_IN_TRAINING = {
    "nn.Dropout", "nn.Dropout1d", "nn.Dropout2d", "nn.Dropout3d", "nn.AlphaDropout",
    "nn.FeatureAlphaDropout", "nn.RReLU",
}


def all_entries() -> dict:
    from torch.testing._internal.common_modules import module_db

    out = {}
    for info in module_db:
        name = info.name
        k = 2
        while name in out:  # module_db lists a few classes twice (other input funcs)
            name = f"{info.name}#{k}"
            k += 1
        out[name] = info
    return out


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


def _to_tpu(x):
    def one(t):
        if isinstance(t, PackedSequence):
            data = t.data.detach().to("tpu").requires_grad_(t.data.requires_grad)
            return PackedSequence(data, t.batch_sizes,
                                  None if t.sorted_indices is None else t.sorted_indices.to("tpu"),
                                  None if t.unsorted_indices is None else t.unsorted_indices.to("tpu"))
        if isinstance(t, torch.Tensor):
            out = t.detach().to("tpu")
            return out.requires_grad_(t.requires_grad) if t.requires_grad else out
        return t

    return tree_map(one, x, is_leaf=lambda t: isinstance(t, PackedSequence))


def _tensors(x):
    flat = tree_flatten(x, is_leaf=lambda t: isinstance(t, PackedSequence))[0]
    out = []
    for t in flat:
        if isinstance(t, PackedSequence):
            out.append(t.data)
        elif isinstance(t, torch.Tensor):
            out.append(t)
    return out


def _compare(actual, expected, dtype, values=True, what="output"):
    a_list, e_list = _tensors(actual), _tensors(expected)
    assert len(a_list) == len(e_list), f"{what}: {len(a_list)} tensors, CPU gives {len(e_list)}"
    for i, (a, e) in enumerate(zip(a_list, e_list)):
        assert a.device.type == "tpu", f"{what} {i} on {a.device}, expected tpu"
        a = a.detach().cpu()
        if not values or not e.is_floating_point() and not e.is_complex():
            assert a.shape == e.shape and a.dtype == e.dtype, (
                f"{what} {i}: got {tuple(a.shape)} {a.dtype}, CPU gives {tuple(e.shape)} {e.dtype}")
            if values:
                torch.testing.assert_close(a, e.detach(), msg=lambda m: f"{what} {i}: {m}")
            continue
        atol, rtol = TOLERANCE.get(e.dtype, (1e-3, 1e-3))
        torch.testing.assert_close(a, e.detach(), atol=atol, rtol=rtol, equal_nan=True,
                                   msg=lambda m: f"{what} {i}: {m}")


def _samples(info, dtype, training):
    torch.manual_seed(0)
    return list(info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=True,
                                        training=training))


def _build(info, sample, dtype, training):
    args, kwargs = sample.constructor_input.args, sample.constructor_input.kwargs
    torch.manual_seed(0)
    m_cpu = info.module_cls(*args, **kwargs)
    m_cpu.to(dtype)
    m_cpu.train(training)
    if info.is_lazy and sample.forward_input is not None:
        # As PyTorch's test_cpu_gpu_parity: lazy parameters are initialised
        # (randomly) by a first forward on CPU, so both devices start from the
        # same values. Lazy initialisation on tpu itself is covered by
        # tests/lowering/test_rnn.py::test_lazy_modules_initialise_on_tpu.
        with torch.no_grad():
            m_cpu(*copy.deepcopy(sample.forward_input.args), **copy.deepcopy(sample.forward_input.kwargs))
    m_tpu = copy.deepcopy(m_cpu).to("tpu")
    return m_cpu, m_tpu


def _describe(sample) -> str:
    def one(x):
        if isinstance(x, PackedSequence):
            return f"PackedSequence{list(x.data.shape)}"
        if isinstance(x, torch.Tensor):
            return f"{x.dtype}{list(x.shape)}".replace("torch.", "")
        return repr(x)[:30]

    c = sample.constructor_input
    cons = ", ".join([one(a) for a in c.args] + [f"{k}={one(v)}" for k, v in c.kwargs.items()])
    fwd = sample.forward_input
    ins = ", ".join(one(a) for a in fwd.args) if fwd is not None else ""
    return f"{cons} | {ins}"[:200]


def _leaves(m, inputs):
    params = [p for p in m.parameters() if p.requires_grad]
    ins = [t for t in _tensors(inputs) if t.requires_grad and t.is_leaf]
    return params, ins


def run_one(info, name, dtype, training, max_samples=None):
    """(forward Outcome, backward Outcome) for one dtype and training flag."""
    # bfloat16 is tried for every entry (module_db lists it for few): where
    # CPU itself rejects a sample, there is nothing to compare.
    if dtype not in info.supported_dtypes("cpu") and dtype != torch.bfloat16:
        return Outcome("unsupported"), Outcome("unsupported")
    values = not (training and name.split("#")[0] in RANDOM_IN_TRAINING)
    try:
        samples = _samples(info, dtype, training)
    except Exception as e:
        return (Outcome("none", 0, "sample generation failed on CPU: " + _short(e)),) * 2
    if max_samples is not None:
        samples = samples[:max_samples]
    mode = "train" if training else "eval"
    nf = nb = 0
    fwd_fail = bwd_fail = None
    for k, sample in enumerate(samples):
        if sample.forward_input is None:
            continue
        try:
            m_cpu, m_tpu = _build(info, sample, dtype, training)
            cin = (sample.forward_input.args, sample.forward_input.kwargs)
            out_c = m_cpu(*cin[0], **cin[1])
        except Exception:
            continue  # CPU rejects this sample itself: nothing to compare
        tin = _to_tpu(cin)
        where = f"{mode} sample {k}"
        try:
            out_t = m_tpu(*tin[0], **tin[1])
        except Exception as e:
            fwd_fail = fwd_fail or Outcome("fail", nf, f"{where}: {_short(e)} [{_describe(sample)}]")
            continue
        if fwd_fail is None:
            try:
                _compare(out_t, out_c, dtype, values)
                if not training:  # inference fast paths (no autograd graph)
                    with torch.no_grad():
                        ref = m_cpu(*cin[0], **cin[1])
                        got = m_tpu(*tin[0], **tin[1])
                    _compare(got, ref, dtype, values, "no_grad output")
                nf += 1
            except Exception as e:
                fwd_fail = Outcome("fail", nf, f"{where}: {_short(e)} [{_describe(sample)}]")
                continue
        if bwd_fail is None and values:
            try:
                outs_c = [o for o in _tensors(out_c) if o.requires_grad and o.is_floating_point()]
                leaves_c = _leaves(m_cpu, cin)
                if not outs_c or not (leaves_c[0] or leaves_c[1]):
                    continue
                gen = torch.Generator().manual_seed(k)
                cot = [torch.randn(o.shape, generator=gen, dtype=torch.float32).to(o.dtype) for o in outs_c]
                grads_c = torch.autograd.grad(outs_c, leaves_c[0] + leaves_c[1], cot, allow_unused=True)
            except Exception:
                continue  # CPU cannot differentiate this sample
            try:
                outs_t = [o for o in _tensors(out_t) if o.requires_grad and o.is_floating_point()]
                leaves_t = _leaves(m_tpu, tin)
                grads_t = torch.autograd.grad(outs_t, leaves_t[0] + leaves_t[1], [c.to("tpu") for c in cot],
                                              allow_unused=True)
                for i, (gt, gc) in enumerate(zip(grads_t, grads_c)):
                    assert (gt is None) == (gc is None), f"gradient {i}: defined on one device only"
                    if gc is not None:
                        what = f"grad of parameter {i}" if i < len(leaves_c[0]) else \
                            f"grad of input {i - len(leaves_c[0])}"
                        _compare(gt, gc, dtype, True, what)
                nb += 1
            except Exception as e:
                bwd_fail = Outcome("fail", nb, f"{where}: {_short(e)} [{_describe(sample)}]")
    fwd = fwd_fail or Outcome("pass" if nf else ("unsupported" if dtype == torch.bfloat16 else "none"), nf)
    bwd = bwd_fail or Outcome("pass" if nb else ("unsupported" if not values else "none"), nb)
    return fwd, bwd


def _merge(a: Outcome, b: Outcome) -> Outcome:
    if a.status == "fail":
        return a
    if b.status == "fail":
        return Outcome("fail", a.samples + b.samples, b.detail)
    if "pass" in (a.status, b.status):
        return Outcome("pass", a.samples + b.samples)
    return a


def run_entry(info, name, dtypes=("float32", "bfloat16"), max_samples=None) -> dict:
    """{dtype: {"forward": Outcome dict, "backward": Outcome dict}}, train and
    (where the entry says they differ) eval merged: the first failure wins."""
    flags = [True, False]  # eval too: PyTorch's inference fast paths run only there
    result = {}
    for dname in dtypes:
        fwd = bwd = None
        for training in flags:
            f, b = _guard(lambda: run_one(info, name, DTYPES[dname], training, max_samples))
            fwd = f if fwd is None else _merge(fwd, f)
            bwd = b if bwd is None else _merge(bwd, b)
        result[dname] = {"forward": fwd.as_dict(), "backward": bwd.as_dict()}
    return result


def _guard(fn):
    try:
        return fn()
    except Exception as e:
        o = Outcome("fail", 0, "harness: " + _short(e) + " | "
                    + traceback.format_exc().strip().splitlines()[-2][:200])
        return o, o
