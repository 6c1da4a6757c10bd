"""trainrun.compile: calls recorded at the dispatcher and replayed. A replay
equals the eager call bitwise (the same ops in the same order), forward and
backward, on an MLP, a CNN with batch norm in training mode and a
transformer block, through an optimizer's steps; guards record anew on a
new shape, grad mode, mode or parameter and not on new values of the same
shape; what a graph cannot replay (values read into Python, backward inside
the call, module hooks, autograd.Function) runs eagerly with the same
result, named by explain(), or raises under fullgraph=True."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402
from trainrun._compile import GraphBreakError  # noqa: E402


def _models():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 5))
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(8 * 4 * 4, 5))
    block = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    return {"mlp": (mlp, lambda: torch.randn(6, 12)), "cnn": (cnn, lambda: torch.randn(4, 3, 8, 8)),
            "block": (block, lambda: torch.randn(2, 7, 16))}


def _twin(model):
    import copy
    return copy.deepcopy(model)


def _close(a, b):
    return torch.allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fusion", ["off", "on"])
@pytest.mark.parametrize("name", ["mlp", "cnn", "block"])
def test_compiled_training_steps_equal_eager_ones(name, fusion, monkeypatch):
    """Without fusion a replay runs the eager ops in the eager order: bitwise equal. Fused loops round in their
    own order (a multiply-add may become one FMA): equal within float32 tolerance."""
    monkeypatch.setenv("TRAINRUN_COMPILE_FUSION", "1" if fusion == "on" else "0")
    same = torch.equal if fusion == "off" else _close
    model, batch = _models()[name]
    eager = _twin(model)
    compiled = torch.compile(model)
    opt_c = torch.optim.SGD(model.parameters(), lr=0.05)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.05)
    for _ in range(4):
        x = batch()
        for m, opt in ((compiled, opt_c), (eager, opt_e)):
            opt.zero_grad()
            out = m(x)
            loss = out.pow(2).mean()
            loss.backward()
            opt.step()
            if m is compiled:
                loss_c, out_c = loss, out
        assert same(out_c, out) and same(loss_c, loss)
    for (n, p), q in zip(model.named_parameters(), eager.parameters()):
        assert same(p, q), n
    for (n, b), c in zip(model.named_buffers(), eager.buffers()):  # batch norm's running statistics
        assert same(b, c), n
    assert compiled._compiled.replays == 3, compiled.explain()
    assert "graph of" in compiled.explain()
    if name == "block":  # in_proj_weight's and in_proj_bias's gradients: three pieces each, written in one buffer
        assert "2 sums of pieces written in place" in compiled.explain(), compiled.explain()
    if name == "block" and fusion == "on":  # softmax's and layer norm's backward: loops with their reductions
        loops = [line for line in compiled.explain().splitlines() if "= fused_" in line]
        assert any("sum" in line and "mean" in line for line in loops), compiled.explain()
        assert any(line.count("sum") == 1 and "mean" not in line for line in loops), compiled.explain()


def test_inference_under_no_grad_replays_and_equals_eager():
    model, batch = _models()["block"]
    compiled = torch.compile(model)
    with torch.no_grad():
        for _ in range(3):
            x = batch()
            assert torch.equal(compiled(x), model(x))
    assert compiled._compiled.replays == 2


@pytest.mark.parametrize("fusion", ["off", "on"])
def test_numbers_are_made_once_and_a_tensor_written_through_a_view_is_made_each_call(fusion, monkeypatch):
    """`x * 0.5` records a 0-d tensor allocated and filled at every call: made once instead, bound as a constant
    (forward, backward, no_grad graphs). One the call writes to through a view stays made at each call, or the
    second replay would start from the first one's sum."""
    monkeypatch.setenv("TRAINRUN_COMPILE_FUSION", "1" if fusion == "on" else "0")
    same = torch.equal if fusion == "off" else _close

    def scaled(x):
        return (x * 0.5 + 2.0) * x

    compiled = torch.compile(scaled)
    for _ in range(3):
        x = torch.randn(5, 3)
        assert same(compiled(x), scaled(x))
    assert "2 numbers made once" in compiled.explain(), compiled.explain()
    xg = torch.randn(5, 3, requires_grad=True)
    xe = xg.detach().clone().requires_grad_()
    for _ in range(2):
        xg.grad = xe.grad = None
        compiled(xg).sum().backward()
        scaled(xe).sum().backward()
        assert same(xg.grad, xe.grad)
    assert "numbers made once" in compiled.explain() and "0 numbers made once" not in compiled.explain()

    def written(x):
        s = torch.full((), 2.0)
        s.view(()).add_(1.0)
        return x * s

    compiled = torch.compile(written)
    x = torch.ones(4)
    for _ in range(3):
        assert torch.equal(compiled(x), torch.full((4,), 3.0))
    explained = compiled.explain()  # (the 1.0 added is made once; s, written through its view, is not)
    assert compiled.replays == 2 and "1 numbers made once" in explained, explained
    assert "= empty_strided(, float32, cpu)" in explained and "= fill_(" in explained, explained


def test_a_function_of_plain_tensors_fuses_with_grad_enabled_and_records_anew_when_grad_is_wanted():
    """With grad enabled but nothing read or given requiring grad, there is no autograd graph to keep: the
    pointwise ops fuse as under no_grad. An input that requires grad is another guard: recorded anew, with its
    backward. An output requiring grad through a tensor made in the call with requires_grad=True (which the
    recording's allocation would remake without it) runs eagerly, as explain() says."""
    def f(x, y):
        return torch.nn.functional.gelu(x * 2 + y).exp() - y

    compiled = torch.compile(f)
    x, y = torch.randn(64, 32), torch.randn(64, 32)
    for _ in range(2):
        assert _close(compiled(x, y), f(x, y))
    assert compiled.replays == 1
    assert "loops for" in compiled.explain() and "= fused_" in compiled.explain(), compiled.explain()

    xg = x.clone().requires_grad_()
    out = compiled(xg, y)
    assert out.requires_grad and len(compiled._cache) == 2
    out.sum().backward()
    xe = x.clone().requires_grad_()
    f(xe, y).sum().backward()
    assert _close(xg.grad, xe.grad)

    def made_inside(x):
        w = torch.ones(32, requires_grad=True)
        return (x * w).relu()

    inside = torch.compile(made_inside)
    for _ in range(2):
        got = inside(x)
        assert got.requires_grad and got.grad_fn is not None
    assert "runs eagerly: an output requires grad through a tensor made in the call" in inside.explain()


def test_guards_record_anew_on_what_changes_the_program_and_only_then():
    model, _ = _models()["mlp"]
    compiled = torch.compile(model)
    compiled(torch.randn(6, 12))
    compiled(torch.randn(6, 12))  # new values, same shape: a replay
    assert (compiled._compiled.calls, compiled._compiled.replays, len(compiled._compiled._cache)) == (2, 1, 1)
    compiled(torch.randn(9, 12))  # a new shape
    with torch.no_grad():
        compiled(torch.randn(6, 12))  # grad mode
    model.eval()
    compiled(torch.randn(6, 12))  # mode
    model.train()
    assert len(compiled._compiled._cache) == 4
    # Parameters are inputs of the recording: another one of the same shape is read, not recorded anew.
    model[0].weight = nn.Parameter(torch.zeros(32, 12))
    x = torch.randn(6, 12)
    assert torch.equal(compiled(x), model(x))
    assert len(compiled._compiled._cache) == 4
    compiled(x).sum().backward()
    assert model[0].weight.grad is not None and model[0].weight.grad.shape == (32, 12)
    model[0].weight = nn.Parameter(torch.zeros(32, 12).t().contiguous().t())  # other strides: recorded anew
    assert torch.equal(compiled(x), model(x))
    assert len(compiled._compiled._cache) == 5


def test_dropout_replays_draw_new_masks_as_eager_does():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 64), nn.Dropout(0.5))
    compiled = torch.compile(model)
    x = torch.randn(4, 8)
    compiled(x)  # recorded
    torch.manual_seed(5)
    replayed = compiled(x)
    torch.manual_seed(5)
    assert torch.equal(replayed, model(x))
    assert not torch.equal(compiled(x), replayed)


def test_a_no_grad_block_inside_the_call_stays_one_when_replayed():
    w = torch.randn(3, requires_grad=True)

    def f(x):
        y = x * w
        with torch.no_grad():
            scale = y.abs() + 1  # no gradient flows through here, in eager and replayed
        return y * scale

    compiled = torch.compile(f)
    grads = []
    for _ in range(2):
        w.grad = None
        compiled(torch.ones(3)).sum().backward()
        grads.append(w.grad.clone())
    w.grad = None
    f(torch.ones(3)).sum().backward()
    assert torch.equal(grads[1], w.grad) and torch.equal(grads[0], w.grad)
    assert compiled.replays == 1


def test_graph_breaks_run_eagerly_with_the_same_results_and_say_why():
    def data_dependent(x):
        if x.sum() > 0:  # reads a value into Python
            return x * 2
        return x - 1

    compiled = torch.compile(data_dependent)
    assert compiled(torch.ones(2)).tolist() == [2.0, 2.0]
    assert compiled(-torch.ones(2)).tolist() == [-2.0, -2.0]  # a replay would have given -2: eager gives x - 1
    assert compiled.replays == 0
    assert "graph break, runs eagerly: item() read a tensor's value into Python" in compiled.explain()
    with pytest.raises(GraphBreakError, match="could not be recorded whole: item\\(\\) read a tensor's value"):
        torch.compile(data_dependent, fullgraph=True)(torch.ones(2))

    w = torch.ones(2, requires_grad=True)

    def step(x):
        loss = (x * w).sum()
        loss.backward()
        return loss

    compiled_step = torch.compile(step)
    compiled_step(torch.ones(2))
    compiled_step(torch.ones(2))
    assert w.grad.tolist() == [2.0, 2.0]  # both calls ran their backward
    assert "ran a backward pass" in compiled_step.explain()

    hooked, _ = _models()["mlp"]
    seen = []
    hooked.register_forward_hook(lambda m, i, o: seen.append(1))
    compiled_hooked = torch.compile(hooked)
    compiled_hooked(torch.randn(2, 12))
    compiled_hooked(torch.randn(2, 12))
    assert len(seen) == 2 and "forward hooks" in compiled_hooked.explain()

    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    compiled_fn = torch.compile(lambda x: Double.apply(x))
    compiled_fn(torch.ones(2, requires_grad=True))
    assert "autograd.Function" in compiled_fn.explain()


def test_outputs_keep_their_structure_and_inputs_pass_through():
    def f(x, scale=2.0, *, extra=None):
        return {"y": x * scale, "same": x, "pair": (x + 1, 7)}

    compiled = torch.compile(f)
    x = torch.ones(2)
    for _ in range(2):
        out = compiled(x, 3.0, extra="ignored")
        assert out["y"].tolist() == [3.0, 3.0] and out["same"] is x and out["pair"][1] == 7
    assert compiled.replays == 1
    assert compiled(x, 4.0, extra="ignored")["y"].tolist() == [4.0, 4.0]  # another scale: another recording


def test_compile_keeps_pytorchs_surface():
    model, _ = _models()["mlp"]
    compiled = torch.compile(model)
    assert compiled._orig_mod is model
    assert all(k.startswith("_orig_mod.") for k in compiled.state_dict())
    assert getattr(compiled, "0") is getattr(model, "0")  # attributes reach the module

    @torch.compile
    def f(x):
        return x + 1

    @torch.compile(fullgraph=True, mode="max-autotune")
    def g(x):
        return x * 2

    assert f(torch.ones(1)).item() == 2.0 and g(torch.ones(1)).item() == 2.0
    assert torch.compile(model, disable=True) is model
    with pytest.raises(TypeError, match="expected a function or an nn.Module, got int"):
        torch.compile(3)


def _grads(model):
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("name", ["mlp", "cnn", "block"])
def test_the_backward_is_recorded_and_replayed_as_one_node(name):
    model, batch = _models()[name]
    eager = _twin(model)
    compiled = torch.compile(model)
    for _ in range(3):
        x = batch()
        model.zero_grad()
        eager.zero_grad()
        out = compiled(x)
        out.pow(2).mean().backward()
        eager(x).pow(2).mean().backward()
        for g, h in zip(_grads(model), _grads(eager)):
            assert torch.allclose(g, h, rtol=1e-5, atol=1e-6)
    # the replay's outputs hang from one node running the recorded backward, not from the model's ops
    assert out.grad_fn.name() == "CompiledFunctionBackward"
    assert "backward recorded:" in compiled.explain(), compiled.explain()
    if name == "mlp":  # GELU's and tanh's outputs are kept: recomputing them costs more than keeping them
        assert "0 saved values recomputed in backward" in compiled.explain(), compiled.explain()


def test_a_cheap_op_is_recomputed_in_backward_instead_of_saved():
    class Gated(nn.Module):  # tanh(a(x)) * gain feeds b: b's weight gradient reads the product
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(5, 16), nn.Linear(16, 3)
            self.gain = nn.Parameter(torch.randn(16))

        def forward(self, x):
            return self.b(torch.tanh(self.a(x)) * self.gain)

    torch.manual_seed(0)
    model = Gated()
    eager = _twin(model)
    compiled = torch.compile(model)
    for _ in range(2):
        x = torch.randn(8, 5)
        model.zero_grad()
        eager.zero_grad()
        compiled(x).pow(2).sum().backward()
        eager(x).pow(2).sum().backward()
        for g, h in zip(_grads(model), _grads(eager)):
            assert torch.allclose(g, h, rtol=1e-5, atol=1e-6)
    assert "1 saved values recomputed in backward (0 kB not kept)" in compiled.explain(), compiled.explain()


def test_inputs_get_gradients_and_an_unused_output_gets_none_flowing():
    w = torch.randn(4, 3, requires_grad=True)

    def f(x):
        h = torch.tanh(x @ w)
        return h.sum(dim=1), h.exp()  # the second output is left out of the loss below

    compiled = torch.compile(f)
    for _ in range(2):
        x = torch.randn(5, 4, requires_grad=True)
        w.grad = None
        a, _ = compiled(x)
        (a * torch.arange(5.0)).sum().backward()
        gx, gw = x.grad.clone(), w.grad.clone()
        x.grad, w.grad = None, None
        b, _ = f(x)
        (b * torch.arange(5.0)).sum().backward()
        assert torch.allclose(gx, x.grad) and torch.allclose(gw, w.grad)
    assert compiled.replays == 1 and a.grad_fn.name() == "CompiledFunctionBackward"


def test_the_recorded_backward_refuses_what_it_cannot_do_by_name():
    w = torch.randn(3, requires_grad=True)
    compiled = torch.compile(lambda x: (x * w).sin())
    x = torch.randn(3)
    compiled(x)
    y = compiled(x)  # a replay
    with pytest.raises(ValueError, match="create_graph=True \\(double backward\\) is not supported"):
        torch.autograd.grad(y.sum(), w, create_graph=True)
    y = compiled(x)
    x.fill_(2.0)  # the backward reads x (d sin(x w)/dw = cos(x w) x)
    with pytest.raises(RuntimeError, match="modified in place after the call"):
        y.sum().backward()
    y = compiled(torch.randn(3))
    y.sum().backward()
    with pytest.raises(RuntimeError, match="a second time"):
        y.sum().backward()


def test_hooks_on_parameters_run_once_per_backward_and_hooks_inside_the_call_break():
    model = nn.Linear(3, 2)
    calls = []
    model.weight.register_hook(lambda g: calls.append(1))
    compiled = torch.compile(model)
    for _ in range(3):
        compiled(torch.randn(4, 3)).sum().backward()
    assert len(calls) == 3 and compiled._compiled.replays == 2

    def hooked(x):
        y = x * 2
        y.register_hook(lambda g: g * 10)
        return y

    compiled_hooked = torch.compile(hooked)
    for _ in range(2):
        x = torch.ones(2, requires_grad=True)
        compiled_hooked(x).sum().backward()
        assert x.grad.tolist() == [20.0, 20.0]
    assert "register_hook" in compiled_hooked.explain()


def test_without_a_recorded_backward_replays_build_autograds_graph():
    w = torch.randn(3, requires_grad=True)

    def f(x):
        x.mul_(w)  # writes in place to an input that requires grad
        return x * 1

    compiled = torch.compile(f)
    for _ in range(2):
        leaf = torch.randn(3, requires_grad=True)
        compiled(leaf * 1).sum().backward()
        assert torch.allclose(leaf.grad, w.detach())
    assert compiled.replays == 1
    assert "writes in place to a tensor that requires grad)" in compiled.explain()


def test_compiled_modules_train_inside_ddp_and_fsdp_as_one_process_does(ranks):
    r = ranks.run_script(2, "tests/python/compile_distributed_worker.py", deadline=180)
    for rank in range(2):
        assert f"[rank{rank}]:rank {rank}: compiled under DDP and FSDP ok" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("use_gelu", [False, True])
def test_addmm_activation_equals_pytorchs_and_differentiates(use_gelu):
    """trainrun._addmm_activation (what compiled graphs fold a linear layer's activation into) against PyTorch's
    op (which has no derivative in 1.13), and its gradients against the two ops it stands for."""
    peer = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    import numpy as np
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((7, 12), (9, 12), (9,)))
    theirs = peer._addmm_activation(peer.tensor(b), peer.tensor(x), peer.tensor(w).t(), use_gelu=use_gelu)
    grads = []
    for fused in (True, False):
        xt, wt, bt = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
        y = torch._addmm_activation(bt, xt, wt.t(), use_gelu=use_gelu) if fused else \
            (torch.nn.functional.gelu if use_gelu else torch.relu)(torch.addmm(bt, xt, wt.t()))
        if fused:
            np.testing.assert_allclose(y.detach().numpy(), theirs.numpy(), rtol=1e-5, atol=1e-5)
        (y * y).sum().backward()
        grads.append([t.grad.numpy() for t in (xt, wt, bt)])
    for fused, composite in zip(*grads):
        np.testing.assert_allclose(fused, composite, rtol=1e-6, atol=1e-6)


def test_inference_folds_a_linear_layers_gelu_into_its_gemm():
    model, batch = _models()["mlp"]  # Linear, GELU, Linear, Tanh, Linear
    compiled = torch.compile(model)
    with torch.no_grad():
        for _ in range(3):
            x = batch()
            assert _close(compiled(x), model(x))
    assert "1 activations in GEMMs" in compiled.explain(), compiled.explain()


def test_a_compiled_optimizer_step_runs_eagerly_and_trains_as_eager_does():
    """optimizer.step() reads each backward's new .grad, options a scheduler changes, and state its first step
    creates: a replay would be silently wrong, so inside a recording it is a graph break (built-in and Python
    optimizers alike), and so is reading .grad."""

    class Halving(torch.optim.Optimizer):  # a Python optimizer: p -= lr * grad / 2
        def __init__(self, params, lr):
            super().__init__(params, {"lr": lr})

        def step(self, closure=None):
            with torch.no_grad():
                for group in self.param_groups:
                    for p in group["params"]:
                        p.add_(p.grad, alpha=-group["lr"] / 2)

    torch.manual_seed(0)
    for make in (lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9), lambda ps: Halving(ps, lr=0.1)):
        ours, twin = nn.Linear(6, 3), nn.Linear(6, 3)
        twin.load_state_dict(ours.state_dict())
        opt, opt_twin = make(ours.parameters()), make(twin.parameters())
        step = torch.compile(lambda: opt.step())
        for _ in range(4):
            x = torch.randn(5, 6)
            for m, o, s in ((ours, opt, step), (twin, opt_twin, opt_twin.step)):
                o.zero_grad()
                m(x).pow(2).mean().backward()
                s()
        assert torch.equal(ours.weight, twin.weight) and torch.equal(ours.bias, twin.bias)
        assert "step() runs eagerly" in step.explain(), step.explain()
    w = torch.ones(3, requires_grad=True)
    w.sum().backward()
    scaled = torch.compile(lambda: w.grad * 2)
    assert torch.equal(scaled(), torch.full((3,), 2.0))
    w.grad = torch.full((3,), 5.0)
    assert torch.equal(scaled(), torch.full((3,), 10.0)), "the new .grad, not the recording's"
    assert "read a tensor's .grad" in scaled.explain()
