"""CI slice of the OpInfo suite (tools/opinfo_report.py runs all of it):
a fixed list of op_db entries across every op family, the first few sample
inputs of each, float32 / bfloat16 / int64 forward against CPU, float32
gradients and the entry's error inputs; and a few entries forward in
complex64."""

import pytest
import torch

from opinfo import harness

ENTRIES = [
    # elementwise, unary, comparison, logical
    "add", "sub", "mul", "div.floor_rounding", "div.trunc_rounding", "pow", "remainder", "fmod",
    "atan2", "hypot", "lerp", "addcmul", "clamp", "where", "abs", "exp", "log1p", "sin", "tanh",
    "rsqrt", "erf", "sigmoid", "round", "floor", "sign", "nan_to_num", "eq", "lt", "isnan",
    "logical_and", "bitwise_xor", "maximum", "logaddexp", "heaviside", "gcd", "nextafter", "frexp",
    # special functions
    "lgamma", "digamma", "erfinv", "i0", "special.i1e", "special.ndtri", "special.bessel_j0",
    "polygamma.polygamma_n_1", "xlogy", "logit",
    # activations and nn
    "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "nn.functional.elu",
    "nn.functional.hardswish", "nn.functional.softplus", "nn.functional.glu", "nn.functional.prelu",
    "softmax", "log_softmax", "nn.functional.layer_norm", "nn.functional.group_norm",
    "nn.functional.batch_norm", "nn.functional.rms_norm", "nn.functional.linear",
    "nn.functional.embedding", "nn.functional.embedding_bag", "nn.functional.dropout",
    # losses
    "nn.functional.mse_loss", "nn.functional.l1_loss", "nn.functional.smooth_l1_loss",
    "nn.functional.huber_loss", "nn.functional.binary_cross_entropy_with_logits",
    "nn.functional.cross_entropy", "nn.functional.nll_loss", "nn.functional.kl_div",
    # convolution, pooling, interpolation
    "nn.functional.conv1d", "nn.functional.conv_transpose1d", "nn.functional.conv2d",
    "nn.functional.max_pool2d", "nn.functional.avg_pool2d", "nn.functional.adaptive_avg_pool2d",
    "nn.functional.interpolate.bilinear", "nn.functional.interpolate.nearest",
    "nn.functional.pad.reflect", "nn.functional.pad.replicate", "nn.functional.pixel_shuffle",
    # reductions, scans, sorting
    "sum", "mean", "prod", "amax", "argmax", "var", "std_mean", "logsumexp", "norm",
    "linalg.vector_norm", "cumsum", "cumprod", "cummax", "all", "any", "median", "searchsorted",
    "histc", "histogram", "histogramdd", "hash_tensor", "_segment_reduce.lengths", "_segment_reduce.offsets",
    # indexing and data-dependent shapes
    "gather", "scatter", "scatter_add", "scatter_reduce.sum", "index_add",
    "index_put", "masked_fill", "masked_scatter", "take_along_dim", "__getitem__",
    "nonzero", "masked_select", "unique", "unique_consecutive", "bincount", "repeat_interleave",
    # shape
    "stack", "flip", "roll", "rot90", "tril", "triu", "diag_embed", "repeat", "tile",
    "narrow", "split", "chunk", "transpose", "permute", "reshape", "expand", "unfold",
    "constant_pad_nd", "block_diag", "cdist",
    # linear algebra
    "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "linalg.solve", "linalg.inv",
    "linalg.det", "linalg.cholesky", "linalg.qr", "linalg.eigh", "linalg.svd",
    "triangular_solve", "linalg.ldl_factor_ex", "linalg.ldl_solve",
    # fft and complex
    "fft.fft", "fft.rfft", "fft.irfft", "fft.fft2", "view_as_real",
    # factories and random
    "arange", "linspace", "logspace", "eye", "full", "zeros_like", "randn", "normal", "multinomial",
]

_TABLE = harness.all_entries()
MAX_SAMPLES = 3


@pytest.mark.parametrize("name", ENTRIES)
def test_entry(name):
    assert name in _TABLE, f"{name} is not an op_db entry in this PyTorch"
    result = harness.run_entry(_TABLE[name], dtypes=("float32", "bfloat16", "int64"),
                               max_samples=MAX_SAMPLES)
    failures = {dtype: r["detail"] for dtype, r in result["forward"].items() if r["status"] == "fail"}
    for check in ("grad", "errors"):
        if result[check]["status"] == "fail":
            failures[check] = result[check]["detail"]
    assert not failures, failures


# complex64 forward (the report's complex64 column): elementwise, parts,
# reductions, matmul and FFT entries.
COMPLEX_ENTRIES = [
    "add", "mul", "div.no_rounding_mode", "pow", "abs", "angle", "exp", "log", "sqrt", "tanh",
    "asin", "sgn", "reciprocal", "conj_physical", "real", "imag", "view_as_real", "isnan",
    "sum", "mean", "prod", "var", "linalg.vector_norm", "cumsum",
    "matmul", "bmm", "vdot", "fft.fft", "fft.ifft2", "fft.irfft",
]


@pytest.mark.parametrize("name", COMPLEX_ENTRIES)
def test_entry_complex64(name):
    assert name in _TABLE, f"{name} is not an op_db entry in this PyTorch"
    result = harness.run_entry(_TABLE[name], dtypes=("complex64",), grads=False, errors=False,
                               max_samples=MAX_SAMPLES)
    assert result["forward"]["complex64"]["status"] == "pass", result["forward"]["complex64"]


# complex64 gradients (gradients with respect to complex inputs, CPU's
# conjugate-Wirtinger convention): sigmoid's and tanh's backward kernels
# once lost the conj, which the float32 gradients above cannot show.
COMPLEX_GRAD_ENTRIES = [
    "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "reciprocal", "pow", "div.no_rounding_mode",
    "abs", "angle", "sgn", "sin", "asinh", "prod", "cumprod", "linalg.vector_norm", "matmul",
    "linalg.inv", "linalg.det", "fft.fft", "fft.irfft",
]


@pytest.mark.parametrize("name", COMPLEX_GRAD_ENTRIES)
def test_entry_complex64_gradients(name):
    assert name in _TABLE, f"{name} is not an op_db entry in this PyTorch"
    result = harness.run_grad(_TABLE[name], max_samples=MAX_SAMPLES, dtype=torch.complex64)
    assert result.status == "pass", result
