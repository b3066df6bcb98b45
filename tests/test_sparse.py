"""Sparse COO tensors on tpu (csrc/aten/sparse_coo.cpp, sparse_coo_ops.cpp):
sparse gradients of Embedding and EmbeddingBag, their accumulation, the
optimizers that read them, the basic sparse API, and what graph networks do
with an adjacency matrix, each against the same code on CPU. Before, the
first backward of nn.Embedding(sparse=True) failed with the dispatcher's
"Could not run ... 'SparsePrivateUse1' backend"."""

import copy

import pytest
import torch

from utils import assert_close


def _dense(t):
    return t.to_dense() if t.is_sparse else t


def _train(module, make_opt, batches, device):
    module = module.to(device)
    opt = make_opt(module.parameters())
    grads = []
    for args in batches:
        opt.zero_grad()
        out = module(*[a.to(device) for a in args])
        out.square().sum().backward()
        grads.append(module.weight.grad)
        opt.step()
    return module, grads


def _compare_training(module, make_opt, batches):
    torch.manual_seed(0)
    ref, ref_grads = _train(copy.deepcopy(module), make_opt, batches, "cpu")
    got, got_grads = _train(module, make_opt, batches, "tpu")
    for g, r in zip(got_grads, ref_grads):
        assert g.is_sparse and r.is_sparse and g.device.type == "tpu"
        assert_close(_dense(g).cpu(), _dense(r))
    for p, q in zip(got.parameters(), ref.parameters()):
        assert_close(p.detach().cpu(), q.detach())


_IDX = [(torch.tensor([[1, 2, 1, 7], [3, 3, 9, 0]]),), (torch.tensor([[4, 4, 4, 2]]),), (torch.tensor([[0, 9]]),)]


@pytest.mark.parametrize(
    "make_opt",
    [
        lambda ps: torch.optim.SGD(ps, lr=0.1),
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
        lambda ps: torch.optim.SparseAdam(ps, lr=0.05),
        lambda ps: torch.optim.Adagrad(ps, lr=0.1),
    ],
    ids=["sgd", "sgd_momentum", "sparse_adam", "adagrad"],
)
def test_sparse_embedding_trains_like_cpu(make_opt):
    torch.manual_seed(0)
    _compare_training(torch.nn.Embedding(10, 4, sparse=True), make_opt, _IDX)


def test_sparse_embedding_with_padding_idx():
    torch.manual_seed(0)
    _compare_training(torch.nn.Embedding(10, 3, padding_idx=3, sparse=True), lambda ps: torch.optim.SGD(ps, lr=0.5), _IDX)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_sparse_embedding_bag_trains_like_cpu(mode):
    torch.manual_seed(0)
    bag = torch.nn.EmbeddingBag(12, 5, mode=mode, sparse=True)
    batches = [
        (torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 4])),
        (torch.tensor([11, 0, 0]), torch.tensor([0, 1])),
    ]
    _compare_training(bag, lambda ps: torch.optim.SGD(ps, lr=0.2, momentum=0.5), batches)


def test_sparse_gradients_accumulate_over_backwards():
    torch.manual_seed(0)
    cpu = torch.nn.Embedding(6, 2, sparse=True)
    tpu = copy.deepcopy(cpu).to("tpu")
    for idx in ([0, 1, 1], [5, 1]):
        cpu(torch.tensor(idx)).sum().backward()
        tpu(torch.tensor(idx, device="tpu")).sum().backward()
    assert tpu.weight.grad.is_sparse
    assert_close(tpu.weight.grad.to_dense().cpu(), cpu.weight.grad.to_dense())
    # A dense gradient already there takes the sparse one into it.
    tpu.weight.grad = torch.ones(6, 2, device="tpu")
    cpu.weight.grad = torch.ones(6, 2)
    cpu(torch.tensor([2, 2])).sum().backward()
    tpu(torch.tensor([2, 2], device="tpu")).sum().backward()
    assert not tpu.weight.grad.is_sparse
    assert_close(tpu.weight.grad.cpu(), cpu.weight.grad)


def _example(device, dense_dims=()):
    i = torch.tensor([[2, 0, 2, 1, 0], [1, 3, 1, 0, 3]])
    v = torch.arange(5 * max(1, int(torch.tensor(dense_dims).prod())), dtype=torch.float32)
    v = v.reshape(5, *dense_dims)
    return torch.sparse_coo_tensor(i, v, (3, 4, *dense_dims)).to(device)


@pytest.mark.parametrize("dense_dims", [(), (2,)])
def test_sparse_api_matches_cpu(dense_dims):
    cpu, tpu = _example("cpu", dense_dims), _example("tpu", dense_dims)
    assert tpu.is_sparse and tpu.device.type == "tpu" and not tpu.is_coalesced()
    assert (tpu._nnz(), tpu.sparse_dim(), tpu.dense_dim()) == (cpu._nnz(), cpu.sparse_dim(), cpu.dense_dim())
    c, r = tpu.coalesce(), cpu.coalesce()
    assert c.is_coalesced()
    assert torch.equal(c.indices().cpu(), r.indices())
    assert_close(c.values().cpu(), r.values())
    assert_close(tpu.to_dense().cpu(), cpu.to_dense())
    back = tpu.cpu()
    assert back.is_sparse and back.device.type == "cpu"
    assert_close(back.to_dense(), cpu.to_dense())
    assert_close(tpu.clone().to_dense().cpu(), cpu.to_dense())
    assert_close((tpu * 2.5).to_dense().cpu(), (cpu * 2.5).to_dense())
    assert_close((-tpu).to_dense().cpu(), (-cpu).to_dense())
    assert_close((tpu + tpu * 3).to_dense().cpu(), (cpu + cpu * 3).to_dense())
    dense = torch.randn(3, 4, *dense_dims)
    assert_close((dense.to("tpu") + tpu).cpu(), dense + cpu)
    assert_close(dense.to("tpu").add(tpu, alpha=-2).cpu(), dense.add(cpu, alpha=-2))
    m = dense.to("tpu").sparse_mask(tpu.coalesce())
    assert m.is_sparse
    assert_close(m.to_dense().cpu(), dense.sparse_mask(cpu.coalesce()).to_dense())
    assert_close(tpu.norm().cpu(), cpu.norm())
    assert_close(tpu.norm(1).cpu(), cpu.norm(1))
    assert_close((tpu / 4).to_dense().cpu(), (cpu / 4).to_dense())
    floor = torch.div(tpu, 3, rounding_mode="floor").to_dense().cpu()
    assert_close(floor, torch.div(cpu, 3, rounding_mode="floor").to_dense())
    s = tpu.clone()
    s /= 2
    assert_close(s.to_dense().cpu(), (cpu / 2).to_dense())
    s.mul_(2)
    s.zero_()
    assert s._nnz() == 0 and s.to_dense().abs().sum().item() == 0
    assert "sparse_coo" in repr(tpu)


def test_sparse_errors_are_clear():
    tpu = _example("tpu")
    with pytest.raises(RuntimeError, match="add\\(sparse, dense\\) is not supported"):
        tpu + torch.ones(3, 4, device="tpu")
    with pytest.raises(RuntimeError, match="same size"):
        torch.ones(2, 4, device="tpu") + tpu
    with pytest.raises(NotImplementedError, match="hspmm.*sparse COO tensor on tpu"):
        torch.hspmm(tpu, torch.ones(4, 2, device="tpu"))
    with pytest.raises(RuntimeError, match="zeroth power"):
        tpu.pow(0)
    with pytest.raises(NotImplementedError, match="only the COO layout"):
        torch.ones(2, 2, device="tpu").to_sparse(layout=torch.sparse_csr)


def test_sparse_sum_and_sparse_dense_products_match_cpu():
    cpu, tpu = _example("cpu"), _example("tpu")
    assert_close(tpu.sum().cpu(), cpu.sum())
    x = torch.randn(4, 6)
    assert_close(torch.sparse.mm(tpu, x.to("tpu")).cpu(), torch.sparse.mm(cpu, x))
    assert_close((tpu @ x.to("tpu")).cpu(), cpu @ x)
    base = torch.randn(3, 6)
    got = torch.sparse.addmm(base.to("tpu"), tpu, x.to("tpu"), beta=0.5, alpha=2.0)
    assert_close(got.cpu(), torch.sparse.addmm(base, cpu, x, beta=0.5, alpha=2.0))


def test_graph_convolution_trains_like_cpu():
    """A GCN layer as graph tutorials write it: a fixed sparse adjacency
    times the features, the weight learned through the product."""
    torch.manual_seed(0)
    edges = torch.tensor([[0, 1, 1, 2, 3, 3, 4], [1, 0, 2, 1, 4, 0, 3]])
    adj = torch.sparse_coo_tensor(edges, torch.full((7,), 0.5), (5, 5))
    feats = torch.randn(5, 8)
    lin = torch.nn.Linear(8, 3)
    results = {}
    for dev in ("cpu", "tpu"):
        layer = copy.deepcopy(lin).to(dev)
        opt = torch.optim.SGD(layer.parameters(), lr=0.1)
        a, f = adj.to(dev), feats.to(dev).detach().requires_grad_()
        for _ in range(3):
            opt.zero_grad()
            torch.sparse.mm(a, layer(f)).relu().square().sum().backward()
            opt.step()
        results[dev] = (layer.weight.detach().cpu(), f.grad.cpu())
    assert_close(results["tpu"][0], results["cpu"][0])
    assert_close(results["tpu"][1], results["cpu"][1])


def test_sparse_embedding_under_torch_compile():
    """The backward graph of a compiled Embedding(sparse=True) builds the
    sparse gradient: it runs (the graph check knew only dense tpu kernels)
    and is not replayed (a sparse result is not one buffer)."""
    results = {}
    for dev, backend in (("cpu", "eager"), ("tpu", "tpu")):
        torch.manual_seed(0)
        emb, lin = torch.nn.Embedding(10, 4, sparse=True).to(dev), torch.nn.Linear(4, 2).to(dev)
        opt = torch.optim.SGD([*emb.parameters(), *lin.parameters()], lr=0.1)
        step = torch.compile(lambda i: lin(emb(i)).square().sum(), backend=backend)
        grads = []
        for k in range(3):
            opt.zero_grad()
            step(torch.tensor([[1, 2, 1], [3, k, 9]], device=dev)).backward()
            assert emb.weight.grad.is_sparse
            grads.append(emb.weight.grad.to_dense().cpu())
            opt.step()
        results[dev] = grads + [emb.weight.detach().cpu(), lin.weight.detach().cpu()]
    for got, ref in zip(results["tpu"], results["cpu"]):
        assert_close(got, ref)


def _check(tpu, cpu):
    assert tpu.device.type == "tpu" and tpu.layout == cpu.layout
    assert_close(_dense(tpu).cpu(), _dense(cpu))


@pytest.mark.parametrize("dense_dims", [(), (2,)])
def test_sparse_elementwise_and_shape_ops_match_cpu(dense_dims):
    """On an uncoalesced tensor (duplicates are summed before a nonlinear op)."""
    cpu, tpu = _example("cpu", dense_dims), _example("tpu", dense_dims)
    signed_cpu, signed_tpu = cpu - cpu * 1.5, tpu - tpu * 1.5
    _check(signed_tpu, signed_cpu)
    for op in ("abs", "sqrt", "sin", "tanh", "relu", "sign", "expm1", "log1p", "trunc", "asinh"):
        src_cpu, src_tpu = (cpu, tpu) if op in ("sqrt", "log1p") else (signed_cpu, signed_tpu)
        _check(getattr(src_tpu, op)(), getattr(src_cpu, op)())
    _check(tpu.pow(2), cpu.pow(2))
    _check(torch.abs(signed_tpu, out=torch.empty(0, device="tpu").to_sparse()), signed_cpu.abs())
    inplace = tpu.coalesce()  # in place needs coalesced input, as on CPU
    inplace.sqrt_()
    _check(inplace, cpu.sqrt())
    dense = torch.randn(3, 4, *dense_dims)
    _check(tpu * dense.to("tpu"), cpu * dense)
    _check(dense.to("tpu") * tpu, dense * cpu)
    other = torch.sparse_coo_tensor(torch.tensor([[2, 1, 0, 2], [1, 1, 3, 2]]), torch.randn(4, *dense_dims), cpu.shape)
    _check(tpu * other.to("tpu"), cpu * other)
    _check(torch.cat([tpu, tpu], 1), torch.cat([cpu, cpu], 1))
    _check(tpu.unsqueeze(1), cpu.unsqueeze(1))
    _check(tpu.narrow_copy(1, 1, 2), cpu.narrow_copy(1, 1, 2))
    for dim, index in ((0, [2, 0, 2]), (1, [3, 3, 0, 2]), (len(cpu.shape) - 1, [1, 0])):
        _check(tpu.index_select(dim, torch.tensor(index, device="tpu")), cpu.index_select(dim, torch.tensor(index)))
    x = torch.randn(3, 4, *dense_dims)
    x[x < 0.3] = 0
    for sparse_dim in (1, 2):
        _check(x.to("tpu").to_sparse(sparse_dim), x.to_sparse(sparse_dim))
    assert torch.equal(x.to("tpu").to_sparse().indices().cpu(), x.to_sparse().indices())


def test_sparse_products_match_cpu():
    cpu, tpu = _example("cpu"), _example("tpu")
    x = torch.randn(5, 3)
    _check(x.to("tpu") @ tpu, x @ cpu)
    v = torch.randn(4)
    _check(torch.mv(tpu, v.to("tpu")), torch.mv(cpu, v))
    other = torch.sparse_coo_tensor(torch.tensor([[0, 3, 3, 1, 3], [1, 0, 1, 0, 1]]), torch.randn(5), (4, 2))
    got, ref = torch.sparse.mm(tpu, other.to("tpu")), torch.sparse.mm(cpu, other)
    assert got.is_sparse
    _check(got, ref)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dim", [0, 1])
def test_sparse_softmax_gradients_match_cpu(log, dim):
    """torch.sparse.softmax over the stored entries of each row (a GAT layer's
    attention over a node's edges), forward and its values' gradient."""
    torch.manual_seed(0)
    edges = torch.tensor([[0, 0, 1, 2, 2, 2, 4, 0], [1, 3, 0, 1, 2, 4, 3, 1]])
    scores = torch.randn(8)
    fn = torch.sparse.log_softmax if log else torch.sparse.softmax
    weight = torch.randn(5, 5)
    results = {}
    for dev in ("cpu", "tpu"):
        s = scores.to(dev).detach().requires_grad_()
        out = fn(torch.sparse_coo_tensor(edges.to(dev), s, (5, 5)), dim)
        (out.to_dense() * weight.to(dev)).sum().backward()
        results[dev] = (out, s.grad)
    _check(results["tpu"][0], results["cpu"][0])
    assert_close(results["tpu"][1].cpu(), results["cpu"][1])
