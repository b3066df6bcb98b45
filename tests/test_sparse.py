"""Sparse COO tensors on tpu (csrc/aten/sparse_coo.cpp): sparse gradients of
Embedding and EmbeddingBag, their accumulation, the optimizers that read them,
and the basic sparse API, each against the same code on CPU. Before, the
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
    with pytest.raises(NotImplementedError, match="index_select.*sparse COO tensor on tpu"):
        tpu.index_select(0, torch.tensor([0], device="tpu"))
    with pytest.raises(NotImplementedError, match="mul of sparse tensors on tpu"):
        tpu * tpu


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
