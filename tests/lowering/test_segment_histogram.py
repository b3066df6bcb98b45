"""segment_reduce (+ backward), histogram and histogramdd on tpu vs CPU."""

import pytest
import torch

from utils import assert_close, check, check_grad, make

F32, F64, BF16 = torch.float32, torch.float64, torch.bfloat16
REDUCTIONS = ["sum", "mean", "max", "min", "prod"]


def segment_data(dtype=F32):
    x = make((6, 3), dtype, seed=1)
    x[2, 1] = float("nan")  # NaN propagates through max/min/sum like CPU
    return x


@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("initial", [None, 2.0])
def test_segment_reduce_lengths_and_offsets(reduce, initial):
    x = segment_data()
    lengths = torch.tensor([2, 0, 3, 1])  # an empty segment too
    offsets = torch.tensor([0, 2, 2, 5, 6])
    check(lambda d, l: torch.segment_reduce(d, reduce, lengths=l, initial=initial), x, lengths)
    check(lambda d, o: torch.segment_reduce(d, reduce, offsets=o, initial=initial), x, offsets)
    check(lambda d, l: torch.segment_reduce(d, reduce, lengths=l, initial=initial, unsafe=True), x, lengths)


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_segment_reduce_batched_axis(reduce):
    x = make((2, 5, 3), seed=2)
    lengths = torch.tensor([[2, 3], [1, 4]])
    check(lambda d, l: torch.segment_reduce(d, reduce, lengths=l, axis=1), x, lengths)
    offsets = torch.tensor([[1, 3, 5], [0, 1, 4]])  # the first segment need not start at 0
    check(lambda d, o: torch.segment_reduce(d, reduce, offsets=o, axis=1), x, offsets)


def test_segment_reduce_bf16_and_int32_lengths():
    x = make((7, 2), BF16, seed=3)
    check(lambda d, l: torch.segment_reduce(d, "sum", lengths=l), x, torch.tensor([3, 4], dtype=torch.int32))


@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("initial", [None, 1.5])
def test_segment_reduce_backward(reduce, initial):
    x = make((6, 2), F64, seed=4)
    x[1, 0] = x[0, 0]  # a tie for max/min
    x[4, 1] = 0.0  # a zero for prod's exclusive product
    lengths = torch.tensor([2, 0, 3, 1])
    check_grad(lambda d: torch.segment_reduce(d, reduce, lengths=lengths.to(d.device), initial=initial), x)
    offsets = torch.tensor([0, 2, 2, 5, 6])
    check_grad(lambda d: torch.segment_reduce(d, reduce, offsets=offsets.to(d.device), initial=initial), x)


def test_segment_reduce_errors():
    x = make((4,)).to("tpu")
    with pytest.raises(RuntimeError, match="indices"):
        torch.segment_reduce(x, "sum", indices=torch.tensor([0, 1]).to("tpu"))
    with pytest.raises(RuntimeError, match="lengths or offsets"):
        torch.segment_reduce(x, "sum")
    with pytest.raises(RuntimeError):
        torch.segment_reduce(x, "median", lengths=torch.tensor([4]).to("tpu"))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_histogram_bin_count(dtype):
    x = make((20,), dtype, seed=5)
    w = make((20,), dtype, low=0, high=1, seed=6)
    check(lambda a: torch.histogram(a, 7), x)
    check(lambda a: torch.histogram(a, 5, range=(-1.0, 1.0)), x)
    check(lambda a, b: torch.histogram(a, 6, weight=b), x, w)
    check(lambda a, b: torch.histogram(a, 6, weight=b, density=True), x, w)
    check(lambda a: torch.histogram(a.view(4, 5), 4, density=True), x)
    check(lambda a: torch.histogram(a, 3), torch.ones(5, dtype=dtype))  # equal min and max
    check(lambda a: torch.histogram(a, 3), torch.ones(0, dtype=dtype))  # empty: edges [0, 1]


def test_histogram_bin_edges():
    x = make((30,), seed=7)
    edges = torch.tensor([-2.0, -0.5, 0.0, 0.25, 2.0])  # uneven, some data outside
    check(lambda a, e: torch.histogram(a, e), x, edges)
    check(lambda a, e, w: torch.histogram(a, e, weight=w, density=True), x, edges, make((30,), low=0, high=1))


def test_histogram_errors():
    with pytest.raises(RuntimeError, match="float32 or float64"):
        torch.histogram(torch.arange(4).to("tpu"), 3)
    with pytest.raises(RuntimeError, match="not finite"):
        torch.histogram(make((4,)).to("tpu"), 3, range=(0.0, float("inf")))


def test_histogramdd_bin_counts():
    x = make((4, 5, 3), F64, seed=8)
    w = make((4, 5), F64, low=0, high=1, seed=9)
    for kw in [{}, {"range": [-1.0, 1.0, 0.0, 2.0, -3.0, 3.0]}, {"weight": w, "density": True}]:
        expected = torch.histogramdd(x, [3, 4, 2], **kw)
        actual = torch.histogramdd(x.to("tpu"), [3, 4, 2], **{k: v.to("tpu") if isinstance(v, torch.Tensor) else v
                                                             for k, v in kw.items()})
        assert actual.hist.device.type == "tpu"
        assert_close(actual.hist, expected.hist)
        assert len(actual.bin_edges) == 3
        for a, e in zip(actual.bin_edges, expected.bin_edges):
            assert_close(a, e)


def test_histogramdd_bin_tensors():
    x = make((10, 2), seed=10)
    bins = [torch.tensor([-2.0, 0.0, 1.0]), torch.tensor([-3.0, -1.0, 0.0, 3.0])]
    check(lambda a, b0, b1: torch.histogramdd(a, [b0, b1]).hist, x, *bins)
    check(lambda a, b0, b1, w: torch.histogramdd(a, [b0, b1], weight=w, density=True).hist, x, *bins,
          make((10,), low=0, high=1))
