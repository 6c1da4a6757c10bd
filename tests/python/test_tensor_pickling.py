"""copy.deepcopy and pickle of tensors, Parameters and modules, as PyTorch
1.13 does them (compared with it where it is installed)."""
import copy
import pickle

import pytest

from built_tree import torch  # trainrun from the source tree; skips when not built

import trainrun  # noqa: E402

LIBS = [trainrun] + ([torch] if torch is not None else [])


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_deepcopy_of_tensors_keeps_values_grads_and_shared_storages(lib):
    x = lib.arange(6.0).view(2, 3).requires_grad_()
    (x * 2).sum().backward()
    views = [x, x.detach()[1]]
    a, b = copy.deepcopy(views)
    assert a.tolist() == x.tolist() and a.requires_grad and a.grad.tolist() == [[2.0] * 3] * 2
    assert a.data_ptr() != x.data_ptr()
    with lib.no_grad():
        a[1, 0] = 100.0
    assert b[0].item() == 100.0  # the copies share one new storage, as the originals did
    assert x[1, 0].item() == 3.0
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(x * 2)


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_pickle_round_trips_tensors_parameters_devices_and_dtypes(lib):
    values = [lib.arange(12, dtype=lib.int64).view(3, 4).t(), lib.tensor([1.5, -2.0], dtype=lib.bfloat16),
              lib.tensor([2**62 + 1]), lib.zeros(0, 3), lib.nn.Parameter(lib.ones(2)), lib.device("cpu"), lib.float16]
    back = pickle.loads(pickle.dumps(values))
    for before, after in zip(values[:5], back[:5]):
        assert after.dtype == before.dtype and list(after.shape) == list(before.shape)
        assert after.tolist() == before.tolist()
    assert back[1].float().tolist() == [1.5, -2.0]
    assert type(back[4]) is lib.nn.Parameter and back[4].requires_grad
    assert back[5] == lib.device("cpu") and back[6] is lib.float16
    non_leaf = pickle.loads(pickle.dumps(lib.ones(2, requires_grad=True) * 3))
    assert non_leaf.is_leaf and non_leaf.requires_grad and non_leaf.tolist() == [3.0, 3.0]


class TiedNet(trainrun.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = trainrun.nn.Embedding(10, 4)
        self.norm = trainrun.nn.LayerNorm(4)
        self.head = trainrun.nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight
        self.register_buffer("scale", trainrun.full((1,), 2.0))
        self.temperature = 0.5

    def forward(self, tokens):
        return self.head(self.norm(self.embed(tokens))) * self.scale / self.temperature


def test_deepcopy_and_pickle_of_modules():
    trainrun.manual_seed(0)
    for net in (TiedNet(), trainrun.nn.Sequential(trainrun.nn.Linear(3, 5), trainrun.nn.ReLU(),
                                                  trainrun.nn.BatchNorm1d(5), trainrun.nn.Linear(5, 2))):
        net.eval()
        x = trainrun.tensor([1, 2, 3]) if isinstance(net, TiedNet) else trainrun.randn(4, 3)
        for twin in (copy.deepcopy(net), pickle.loads(pickle.dumps(net))):
            assert type(twin) is type(net) and not twin.training
            assert trainrun.equal(twin(x), net(x))
            assert [n for n, _ in twin.named_parameters()] == [n for n, _ in net.named_parameters()]
            for p, q in zip(net.parameters(), twin.parameters()):
                assert p.data_ptr() != q.data_ptr()
    twin = copy.deepcopy(TiedNet())
    assert twin.head.weight._cdata == twin.embed.weight._cdata  # still one tensor
    assert len(list(twin.parameters())) == 3 and twin.temperature == 0.5
    with trainrun.no_grad():
        twin.embed.weight.zero_()
    assert twin.head.weight.abs().sum().item() == 0.0
