"""After manual_seed(s), trainrun's CPU draws are PyTorch's (1.13's, the oracle here): the factories at every
size and dtype, fills of strided tensors, bernoulli and dropout masks, randint/random_, exponential and
multinomial, Generator objects, the weights nn layers initialise (Linear, Conv, Embedding, LSTM,
MultiheadAttention, a transformer layer, the nn.init functions), DataLoader shuffles and samplers, and a
model's first forward. The generator's state is PyTorch's layout: a state saved by either restores in the
other."""
import numpy as np
import pytest

from built_tree import needs_torch, torch as peer  # noqa: F401  (before trainrun: the source tree's)

import trainrun  # noqa: E402


def _cases():
    def factories(t):
        return [t.rand(3), t.randn(3), t.randn(3), t.randint(0, 10, (4,)), t.randperm(7),
                t.rand(2, dtype=t.float64), t.randn(20), t.randn(37, dtype=t.float64), t.randn(5, 7),
                t.rand(20, dtype=t.float16).float(), t.rand(3, dtype=t.bfloat16).float(),
                t.randint(0, 2 ** 40, (3,)), t.randint(-5, 5, (2, 3), dtype=t.int32)]

    def fills(t):
        return [t.empty(5).uniform_(-2, 3), t.empty(17).normal_(1.0, 2.0), t.empty(4, 3).t().normal_(),
                t.empty(20, 3).t().uniform_(), t.empty(3, dtype=t.int64).random_(0, 100), t.empty(4).random_(10),
                t.empty(3, dtype=t.int64).random_(), t.empty(3).random_(), t.empty(2, dtype=t.uint8).random_(),
                t.empty(5).exponential_(2.0)]

    def masks(t):
        F = t.nn.functional
        return [t.empty(6).bernoulli_(0.3), F.dropout(t.ones(40), 0.5), t.bernoulli(t.full((5,), 0.5)),
                t.nn.Dropout2d(0.5)(t.ones(2, 4, 2, 2)), t.nn.AlphaDropout(0.2).train()(t.ones(30))]

    def sampling(t):
        w = t.tensor([0.1, 0.2, 0.3, 0.4])
        return [t.multinomial(w, 2), t.multinomial(t.stack([w, w.flip(0)]), 5, replacement=True),
                t.multinomial(w, 1), t.normal(t.zeros(3), t.ones(3)), t.normal(2.0, 3.0, size=(4,)),
                t.rand_like(t.zeros(2, 3)), t.randn_like(t.zeros(2, 3)), t.randint_like(t.zeros(2, 3), 5)]

    def generators(t):
        g = t.Generator().manual_seed(42)
        return [t.rand(3, generator=g), t.randn(20, generator=g), t.randperm(6, generator=g),
                t.randint(0, 9, (3,), generator=g), t.empty(4).uniform_(generator=g),
                t.multinomial(t.ones(5), 2, generator=g), t.rand(2)]

    def layers(t):
        nn = t.nn
        lstm, attention = nn.LSTM(3, 2), nn.MultiheadAttention(4, 2)
        block = nn.TransformerEncoderLayer(4, 2, 8)
        return [nn.Linear(4, 3).weight, nn.Linear(4, 3).bias, nn.Conv2d(2, 3, 2).weight, nn.Embedding(5, 3).weight,
                *[p for _, p in lstm.named_parameters()], *[p for _, p in attention.named_parameters()],
                *[p for _, p in block.named_parameters()]]

    def more_layers(t):
        nn = t.nn
        encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 8, dropout=0.3), 2)  # (deepcopies: no draw)
        return [nn.Conv1d(2, 3, 3).weight, nn.Conv2d(2, 4, 3, groups=2).weight, nn.ConvTranspose2d(3, 2, 2).weight,
                nn.Embedding(4, 3, padding_idx=1).weight, nn.EmbeddingBag(5, 2).weight, nn.Bilinear(2, 3, 2).weight,
                *[p for _, p in nn.GRU(3, 2, num_layers=2, bidirectional=True).named_parameters()],
                *[p for _, p in nn.MultiheadAttention(4, 2, kdim=3, vdim=5, add_bias_kv=True).named_parameters()],
                *[p for _, p in nn.Transformer(4, 2, 1, 1, 6).named_parameters()],
                encoder(t.randn(3, 2, 4)), t.randn(2)]

    def activations_and_distributions(t):
        F, d = t.nn.functional, t.distributions
        x = t.tensor([[-1.0, 2.0, -3.0], [0.0, -0.5, 4.0]], requires_grad=True)
        y = F.rrelu(x, 0.1, 0.3, training=True)
        y.sum().backward()
        return [y, x.grad, F.gumbel_softmax(t.zeros(2, 3), tau=1.0), d.Normal(0.0, 1.0).sample((3,)),
                d.Uniform(0.0, 2.0).sample((2,)), d.Bernoulli(0.3).sample((4,)),
                d.Categorical(t.tensor([0.2, 0.8])).sample((5,)), d.Normal(t.zeros(2), 1.0).rsample()]

    def init_functions(t):
        init = t.nn.init
        return [init.xavier_uniform_(t.empty(3, 4)), init.xavier_normal_(t.empty(3, 4)),
                init.kaiming_normal_(t.empty(3, 4)), init.kaiming_uniform_(t.empty(3, 4), mode="fan_out"),
                init.trunc_normal_(t.empty(3, 4), std=0.5), init.normal_(t.empty(3, 4), 0, 0.1),
                init.orthogonal_(t.empty(3, 4)), init.sparse_(t.empty(3, 4), 0.5)]

    def data(t):
        from importlib import import_module
        d = import_module(t.__name__ + ".utils.data")
        return [[b.tolist() for b in d.DataLoader(list(range(10)), batch_size=4, shuffle=True)],
                [list(s.indices) for s in d.random_split(range(10), [3, 7])], list(d.RandomSampler(range(6))),
                list(d.RandomSampler(range(6), replacement=True, num_samples=40)),
                list(d.WeightedRandomSampler([0.1, 0.9, 0.5], 5)), list(d.SubsetRandomSampler([5, 6, 7])),
                t.rand(1)]

    def model(t):
        nn = t.nn
        m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 2))
        return [m(t.randn(4, 8))]
    return {f.__name__: f for f in (factories, fills, masks, sampling, generators, layers, more_layers,
                                     activations_and_distributions, init_functions, data, model)}


CASES = _cases()


def _as_numpy(values):
    out = []
    for v in values:
        if hasattr(v, "detach"):
            out.append(v.detach().float().numpy() if v.dtype.is_floating_point else v.numpy())
        else:
            out.append(v)
    return out


@needs_torch
@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("seed", [0, 12345])
def test_draws_equal_pytorchs(name, seed):
    trainrun.manual_seed(seed)
    ours = _as_numpy(CASES[name](trainrun))
    peer.manual_seed(seed)
    theirs = _as_numpy(CASES[name](peer))
    assert len(ours) == len(theirs)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        if isinstance(b, np.ndarray):
            assert a.shape == b.shape and a.dtype == b.dtype, (k, a, b)
            assert np.allclose(a, b, rtol=2e-6, atol=2e-6), (k, a, b)
        else:
            assert a == b, (k, a, b)


@needs_torch
def test_state_moves_between_pytorch_and_trainrun():
    peer.manual_seed(7)
    peer.randn(5)  # (leaves a cached normal in the state)
    state = peer.get_rng_state()
    trainrun.set_rng_state(trainrun.from_numpy(state.numpy()))
    ours = trainrun.randn(5).numpy()
    theirs = peer.randn(5).numpy()
    assert np.allclose(ours, theirs, rtol=1e-6)
    mine = trainrun.get_rng_state()
    assert mine.shape == (5056,) and mine.dtype == trainrun.uint8
    peer.set_rng_state(peer.from_numpy(mine.numpy()))
    assert np.allclose(trainrun.rand(40).numpy(), peer.rand(40).numpy())
    with pytest.raises(RuntimeError, match="of size 5056"):
        trainrun.set_rng_state(trainrun.zeros(10, dtype=trainrun.uint8))


def test_fork_rng_and_checkpoint_recompute_restore_the_draws():
    trainrun.manual_seed(3)
    with trainrun.random.fork_rng():
        inside = trainrun.rand(4)
    after = trainrun.rand(4)
    assert np.array_equal(inside.numpy(), after.numpy())
    from trainrun.utils.checkpoint import checkpoint
    x = trainrun.ones(64, requires_grad=True)
    y = checkpoint(lambda a: trainrun.nn.functional.dropout(a, 0.5) * 3, x, use_reentrant=False)
    y.sum().backward()
    assert np.array_equal((x.grad.numpy() != 0), (y.detach().numpy() != 0))  # the recompute drew the same mask


def test_randperm_out_takes_the_permutation_as_pytorchs():
    trainrun.manual_seed(0)
    out = trainrun.empty(0, dtype=trainrun.int64)
    assert trainrun.randperm(5, out=out) is out and out.tolist() == [4, 0, 1, 3, 2]  # (PyTorch 1.13's for seed 0)
