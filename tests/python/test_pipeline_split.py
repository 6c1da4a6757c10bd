"""pipeline(): a model cut into stages at split points (SplitPoint.BEGINNING
or END of a submodule). The stages chained compute what the model computes,
with the model's own weights under their original names, and models it
cannot split are refused naming the reason. On ranks, stages built this way
train like one process: test_pipelining.py's "-split" schedules."""
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

import trainrun as tr  # noqa: E402
from trainrun import nn  # noqa: E402
from trainrun.distributed.pipelining import Pipe, SplitPoint, pipeline  # noqa: E402

D, VOCAB, LAYERS = 8, 11, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(D)
        self.fc = nn.Linear(D, D)

    def forward(self, h, scale):
        return h + self.fc(self.norm(h)) * scale


class Net(nn.Module):
    """Glue code before, between and after the blocks, and a buffer of the root used by every block."""

    def __init__(self):
        super().__init__()
        tr.manual_seed(0)
        self.emb = nn.Embedding(VOCAB, D)
        self.layers = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB)
        self.register_buffer("scale", tr.full((D,), 0.5))

    def forward(self, tokens):
        h = self.emb(tokens) * 2.0
        for layer in self.layers:
            h = layer(h, self.scale)
        return self.head(self.norm(h).relu())


def tokens():
    return tr.tensor(np.random.default_rng(0).integers(0, VOCAB, (3, 5)))


def chain(pipe, x):
    out = x
    for s in range(pipe.num_stages):
        out = pipe.get_stage_module(s)(*(out if isinstance(out, tuple) else (out,)))
    return out


SPEC = {"layers.1": SplitPoint.BEGINNING, "layers.2": SplitPoint.END}


def test_stages_own_the_models_weights_under_their_names():
    model = Net()
    pipe = pipeline(model, (tokens(),), split_spec=SPEC)
    assert isinstance(pipe, Pipe) and pipe.num_stages == 3
    assert [name for name, _ in pipe.split_gm.named_children()] == ["submod_0", "submod_1", "submod_2"]
    names = [set(n for n, _ in pipe.get_stage_module(s).named_parameters()) for s in range(3)]
    assert names[0] == {"emb.weight"} | {f"layers.0.{p}" for p in ("norm.weight", "norm.bias", "fc.weight",
                                                                      "fc.bias")}
    assert {n.split(".")[1] for n in names[1]} == {"1", "2"}
    assert {n.rsplit(".", 1)[0] for n in names[2]} == {"layers.3.norm", "layers.3.fc", "norm", "head"}
    full = dict(model.named_parameters())
    assert set().union(*names) == set(full) and sum(map(len, names)) == len(full)  # a partition
    for s in range(3):
        for n, p in pipe.get_stage_module(s).named_parameters():
            assert p.data_ptr() == full[n].data_ptr()  # the model's own tensors, not copies
        assert dict(pipe.get_stage_module(s).named_buffers())["scale"].data_ptr() == model.scale.data_ptr()


def test_the_stages_chained_compute_the_model_and_its_gradients():
    model = Net()
    x = tokens()
    ref = model(x)
    (ref * ref).sum().backward()
    ref_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    pipe = pipeline(model, (x,), split_spec=SPEC)
    first = pipe.get_stage_module(0)(x)
    assert isinstance(first, tuple) and len(first) == 2  # layers.1 takes (h, scale): both cross
    out = chain(pipe, x)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6, atol=1e-6)
    (out * out).sum().backward()
    for n, p in model.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), ref_grads[n].numpy(), rtol=1e-5, atol=1e-6, err_msg=n)
    # The model itself still runs whole (the stages' hooks are idle outside a stage's forward).
    np.testing.assert_allclose(model(x).detach().numpy(), ref.detach().numpy(), rtol=1e-6)


def test_a_sequential_splits_at_its_children_and_one_stage_is_the_model():
    tr.manual_seed(1)
    model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(6)])
    x = tr.randn(2, 4)
    pipe = pipeline(model, (x,), split_spec={"2": SplitPoint.BEGINNING, "3": SplitPoint.END})
    assert [sorted({n.split(".")[0] for n, _ in pipe.get_stage_module(s).named_parameters()})
            for s in range(3)] == [["0", "1"], ["2", "3"], ["4", "5"]]
    np.testing.assert_allclose(chain(pipe, x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
    whole = pipeline(model, (x,))
    assert whole.num_stages == 1
    assert set(n for n, _ in whole.get_stage_module(0).named_parameters()) == set(dict(model.named_parameters()))
    np.testing.assert_allclose(whole.get_stage_module(0)(x).detach().numpy(), model(x).detach().numpy())


class SkipAround(Net):
    def forward(self, tokens):
        e = self.emb(tokens)
        h = e
        for layer in self.layers:
            h = layer(h, self.scale)
        return self.head(self.norm(h + e))  # e skips past every split point


class OwnWeight(Net):
    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(tr.ones(D))

    def forward(self, tokens):
        return super().forward(tokens) * self.gain.sum()


def test_models_it_cannot_split_are_refused_naming_why():
    x = tokens()
    with pytest.raises(ValueError, match="'layers.9' is not a submodule"):
        pipeline(Net(), (x,), split_spec={"layers.9": SplitPoint.BEGINNING})
    with pytest.raises(ValueError, match="'layers' runs 0 times"):
        pipeline(Net(), (x,), split_spec={"layers": SplitPoint.BEGINNING})
    with pytest.raises(ValueError, match="leave an empty stage"):
        pipeline(Net(), (x,), split_spec={"layers.1": SplitPoint.BEGINNING, "layers.0": SplitPoint.END})
    with pytest.raises(TypeError, match="must be a SplitPoint"):
        pipeline(Net(), (x,), split_spec={"layers.1": "beginning"})
    with pytest.raises(ValueError, match=r"'\(the root\)' has parameters of its own \(gain\)"):
        pipeline(OwnWeight(), (x,), split_spec=SPEC)
    pipe = pipeline(SkipAround(), (x,), split_spec={"layers.2": SplitPoint.BEGINNING})
    with pytest.raises(RuntimeError, match="pipeline stage 1: .*needs the model split by hand"):
        chain(pipe, x)


@pytest.mark.parametrize("nproc", [2, 4])
def test_the_readme_example_learns_with_stages_cut_by_pipeline(ranks, nproc):
    out = ranks.run_script(nproc, "examples/pipeline_split.py").stdout
    losses = [float(line.rsplit(" ", 1)[1]) for line in out.splitlines() if " loss " in line]
    assert len(losses) == 12 and losses[-1] < 0.2 * losses[0], out
    assert f"stage {nproc - 1}: head, layers.{4 - 4 // nproc}" in out, out
