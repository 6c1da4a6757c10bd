"""torch.compiler and torch._dynamo as PyTorch scripts call them, over trainrun.compile: reset() makes every
compiled function record anew; disable() keeps a function out of recordings (a compiled call reaching it runs
eagerly, named by explain(), and a disabled function given to compile stays itself); is_compiling() is true while
a call records (so the recorded branch is the one replayed) and is_exporting() only under export;
_dynamo.config.cache_size_limit is read at each call; _dynamo.explain counts graphs, breaks and ops;
mark_dynamic checks its dims."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402
from trainrun._compile import GraphBreakError  # noqa: E402


def test_reset_forgets_every_compiled_functions_recordings():
    f = torch.compile(lambda a: a * 2 + 1)
    m = torch.compile(nn.Linear(3, 2))
    x = torch.randn(4, 3)
    f(x), f(x), m(x), m(x)
    assert f.replays == 1 and m._compiled.replays == 1
    torch.compiler.reset()
    f(x), m(x)
    assert f.replays == 1 and m._compiled.replays == 1, "after reset the next call records, it does not replay"
    f(x)
    assert f.replays == 2


def test_a_disabled_function_runs_eagerly_inside_a_compiled_call_with_the_same_result():
    seen = []

    @torch.compiler.disable
    def logged(a):
        seen.append(a.shape[0])  # Python that a replay would skip
        return a + 1

    f = torch.compile(lambda a: logged(a) * 2)
    x = torch.ones(3)
    for _ in range(3):
        assert torch.equal(f(x), torch.full((3,), 4.0))
    assert seen == [3, 3, 3], "the disabled function ran on every call"
    assert "logged is marked trainrun.compiler.disable" in f.explain()
    with pytest.raises(GraphBreakError, match="logged is marked"):
        torch.compile(lambda a: logged(a), fullgraph=True)(x)


def test_disable_on_a_module_and_as_decorator_with_arguments():
    for lin in (nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 2))):  # a C++ layer and a Python module
        assert torch.compiler.disable(lin) is lin
        f = torch.compile(lambda a: lin(a) * 2)
        x = torch.randn(3, 2)
        assert torch.equal(f(x), lin(x) * 2) and torch.equal(f(x), lin(x) * 2)
        assert f.replays == 0, f.explain()
        assert f"{type(lin).__name__}.forward is marked trainrun.compiler.disable" in f.explain(), f.explain()
    g = torch._dynamo.disable(recursive=False)(lambda a: a - 1)
    assert torch.compile(g) is g, "compile leaves a disabled function as it is"
    with pytest.raises(TypeError, match="function or a module"):
        torch.compiler.disable(3)


def test_is_compiling_is_true_while_recording_so_replays_take_the_recorded_branch():
    assert not torch.compiler.is_compiling()
    f = torch.compile(lambda a: a * 3 if torch.compiler.is_compiling() else a * 2)
    x = torch.ones(2)
    assert torch.equal(f(x), torch.full((2,), 3.0))
    assert torch.equal(f(x), torch.full((2,), 3.0)) and f.replays == 1
    assert not torch.compiler.is_compiling() and not torch.compiler.is_exporting()

    class Probe(nn.Module):
        def forward(self, a):
            return a + (1.0 if torch.compiler.is_exporting() else 0.0)

    ep = torch.export.export(Probe(), (x,))
    assert torch.equal(ep(x), torch.full((2,), 2.0))
    assert torch.equal(torch.compile(Probe())(x), x), "compile is not export"


def test_cache_size_limit_is_read_at_each_call():
    limit = torch._dynamo.config.cache_size_limit
    try:
        torch._dynamo.config.cache_size_limit = 1
        f = torch.compile(lambda a: a + 1)
        f(torch.ones(2))
        assert torch.equal(f(torch.ones(3)), torch.full((3,), 2.0))
        assert "cache_size_limit (1) reached" in f.explain()
    finally:
        torch._dynamo.config.cache_size_limit = limit


def test_dynamo_explain_counts_graphs_breaks_and_ops():
    out = torch._dynamo.explain(lambda a: (a * 2).sin())(torch.ones(3))
    assert (out.graph_count, out.graph_break_count, out.break_reasons) == (1, 0, [])
    assert out.op_count >= 2 and out.ops_per_graph == [out.op_count]
    assert "Graph Count: 1" in str(out)
    broken = torch._dynamo.explain(lambda a: a * float(a.sum()), torch.ones(3))  # the older spelling
    assert broken.graph_count == 0 and broken.graph_break_count == 1
    assert "Break Reason 1:" in str(broken)


def test_mark_dynamic_checks_its_dims():
    x = torch.ones(2, 3)
    torch._dynamo.mark_dynamic(x, 0)
    torch._dynamo.mark_dynamic(x, [0, 1], min=1, max=8)
    with pytest.raises(IndexError, match="dim 2 is out of range"):
        torch._dynamo.mark_dynamic(x, 2)
    with pytest.raises(ValueError, match="min"):
        torch._dynamo.mark_dynamic(x, 0, min=4, max=2)
    f = torch.compile(lambda a: a.sum(0))
    assert torch.equal(f(x), torch.full((3,), 2.0))


def test_allow_in_graph_returns_the_function():
    fn = lambda a: a  # noqa: E731
    assert torch.compiler.allow_in_graph(fn) is fn
    with pytest.raises(TypeError):
        torch.compiler.allow_in_graph(None)


def test_compile_as_a_method_decorator_binds_per_instance_with_the_parameters_as_inputs():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        @torch.compile
        def forward(self, x):
            return self.lin(x).relu()

    a, b = Block(), Block()
    x = torch.randn(4, 3)
    for m in (a, b):
        assert torch.equal(m(x), m.lin(x).relu())
        assert torch.equal(m(x), m.lin(x).relu())
    assert a.forward is a.forward and a.forward is not b.forward
    assert a.forward.replays == 1 and b.forward.replays == 1
    a.lin.weight = nn.Parameter(torch.zeros(2, 3))  # a new parameter is read, not the recorded one
    assert torch.equal(a(x), a.lin.bias.relu().expand(4, 2))


def test_modes_and_backends_are_checked():
    lin = nn.Linear(3, 2)
    x = torch.randn(2, 3)
    for options in ({"mode": "reduce-overhead"}, {"mode": "max-autotune"}, {"backend": "eager"},
                    {"backend": "aot_eager"}, {"dynamic": True}):
        compiled = torch.compile(lin, **options)
        assert torch.equal(compiled(x), lin(x)) and torch.equal(compiled(x), lin(x))
    with pytest.raises(RuntimeError, match="Unrecognized mode=fast"):
        torch.compile(lin, mode="fast")
    with pytest.raises(RuntimeError, match="backend='tvmx' cannot be found"):
        torch.compile(lin, backend="tvmx")
    with pytest.raises(RuntimeError, match="Either mode or options"):
        torch.compile(lin, mode="default", options={"trace.enabled": True})
    with pytest.raises(RuntimeError, match="backend='tvmx' cannot be found"):  # (as a decorator's too)
        torch.compile(backend="tvmx")


def test_each_part_of_a_tensors_guard_records_anew():
    f = torch.compile(lambda a: a * 2)
    x = torch.ones(2, 3)
    variants = [x, x.t().contiguous().t(),              # other strides
                x.double(), x.clone().requires_grad_(),  # dtype, requires_grad
                torch.ones(3, 2), torch.ones(6)]         # shape, rank
    for v in variants:
        assert torch.equal(f(v), v * 2)
    assert len(f._cache) == len(variants)
    for v in variants:
        f(v)
    assert f.replays == len(variants), f.explain()


def test_module_compile_compiles_in_place_and_trains_as_eager():
    torch.manual_seed(0)
    for make in (lambda: nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2)), lambda: nn.Linear(3, 2)):
        model, twin = make(), make()
        twin.load_state_dict(model.state_dict())
        keys = list(model.state_dict())
        assert model.compile() is None
        assert list(model.state_dict()) == keys and type(model) is type(twin), "in place: same module, same keys"
        opt, opt_twin = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(twin.parameters(), lr=0.1)
        for _ in range(3):
            x = torch.randn(4, 3)
            for m, o in ((model, opt), (twin, opt_twin)):
                o.zero_grad()
                m(x).pow(2).mean().backward()
                o.step()
        for p, q in zip(model.parameters(), twin.parameters()):
            assert torch.allclose(p, q, rtol=1e-5, atol=1e-6)
        assert model.__dict__["_compiled_call"].replays == 2
    plain = nn.Linear(3, 2)
    plain.compile(disable=True)
    assert "_compiled_call" not in plain.__dict__
    with pytest.raises(RuntimeError, match="Unrecognized mode"):
        plain.compile(mode="fastest")


def test_config_settings_scripts_set_exist_and_patch_restores_them():
    """torch._inductor.config and torch._dynamo.config as scripts use them: read, set, and patch(...) as a `with`
    block, a decorator, by name, dict or keywords, dotted names for nested settings; an unknown name raises and
    leaves nothing patched."""
    inductor, dynamo = torch._inductor.config, torch._dynamo.config
    assert inductor.max_autotune is False and inductor.triton.cudagraphs is False and dynamo.suppress_errors is False
    with inductor.patch(freezing=True, coordinate_descent_tuning=True):
        assert inductor.freezing and inductor.coordinate_descent_tuning
    assert not inductor.freezing and not inductor.coordinate_descent_tuning
    with inductor.patch({"triton.cudagraphs": True}), dynamo.patch("suppress_errors", True):
        assert inductor.triton.cudagraphs and dynamo.suppress_errors
    assert not inductor.triton.cudagraphs and not dynamo.suppress_errors

    @dynamo.patch(cache_size_limit=1)
    def limited():
        f = torch.compile(lambda a: a + 1)
        f(torch.ones(2)), f(torch.ones(3))
        return len(f._cache), f.explain()

    kept, explained = limited()
    assert kept == 2 and "cache_size_limit (1) reached" in explained, "the patched limit is the one read"
    assert dynamo.cache_size_limit == 8
    with pytest.raises(AttributeError, match="no_such_setting"):
        with dynamo.patch(suppress_errors=True, no_such_setting=1):
            pass
    assert dynamo.suppress_errors is False, "what was set before the unknown name went back"


def test_autocast_state_is_a_guard():
    lin = nn.Linear(4, 3)
    compiled = torch.compile(lin)
    x = torch.randn(2, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert compiled(x).dtype == torch.bfloat16
        assert compiled(x).dtype == torch.bfloat16
    assert compiled(x).dtype == torch.float32, "a recording made under autocast must not replay outside it"
    assert torch.allclose(compiled(x), lin(x))
    with torch.autocast("cpu", dtype=torch.float16):
        assert compiled(x).dtype == torch.float16, "another autocast dtype records anew"
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
        assert compiled(x).dtype == torch.float32
    assert compiled._compiled.replays == 3


def test_hooks_added_or_removed_after_compiling_change_what_runs():
    lin = nn.Linear(4, 4)
    compiled = torch.compile(lin)
    x = torch.randn(2, 4)
    compiled(x), compiled(x)
    seen = []
    handle = lin.register_forward_hook(lambda mod, args, out: seen.append(out.shape))
    compiled(x), compiled(x)
    assert seen == [(2, 4), (2, 4)], "a hook added after the recording runs"
    handle.remove()
    compiled(x)
    assert len(seen) == 2, "a removed hook does not"
    with lin.register_forward_pre_hook(lambda mod, args: (args[0] * 0,)):
        assert torch.equal(compiled(x), lin.bias.expand(2, 4)), "a pre-hook's replacement input is used"
    assert torch.allclose(compiled(x), lin(x))


def test_a_checkpointed_block_inside_a_compiled_module_trains_as_eager():
    import copy
    from trainrun.utils.checkpoint import checkpoint

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, x):
            return checkpoint(lambda t: self.b(torch.nn.functional.gelu(self.a(t))), x, use_reentrant=False) + x

    torch.manual_seed(0)
    model = Block()
    ref = copy.deepcopy(model)
    compiled = torch.compile(model)
    x = torch.randn(4, 8)
    for _ in range(2):
        model.zero_grad()
        compiled(x).pow(2).sum().backward()
    ref(x).pow(2).sum().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-5)


def test_print_in_a_compiled_function_is_a_graph_break_and_prints_every_call(capsys):
    @torch.compile
    def f(x):
        print("step", x.shape[0])
        return x + 1

    for _ in range(3):
        assert torch.equal(f(torch.ones(2)), torch.full((2,), 2.0))
    assert capsys.readouterr().out.count("step 2") == 3
    assert "print() was called" in f.explain() and f.replays == 0
    g = torch.compile(lambda x: x * 2)
    g(torch.ones(1)), g(torch.ones(1))
    assert g.replays == 1, "a call that does not print replays"
    print("after")  # (print is itself again once the recording ends)
    assert capsys.readouterr().out == "after\n"
    with pytest.raises(GraphBreakError, match="print\\(\\) was called"):
        torch.compile(f._fn, fullgraph=True)(torch.ones(2))


def test_a_call_that_changes_a_container_it_reaches_runs_eagerly_each_time():
    history = []

    @torch.compile
    def f(x):
        history.append(x.shape[0])
        return x + 1

    for _ in range(3):
        f(torch.ones(2))
    assert history == [2, 2, 2], "every call appends, as without compile"
    assert "list.append() changed closure variable history" in f.explain() and f.replays == 0

    class Keeps(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.seen = set()

        def forward(self, x):
            self.seen.add(x.shape[0])
            return self.lin(x)

    m = Keeps()
    compiled = torch.compile(m)
    compiled(torch.ones(1, 2)), compiled(torch.ones(3, 2))
    assert m.seen == {1, 3}
    assert "set.add() changed attribute seen" in compiled.explain()

    sizes = [1, 2, 3]
    g = torch.compile(lambda x: x * len(sizes) + sum(list(sizes)))  # reading a container is no change
    g(torch.ones(1)), g(torch.ones(1))
    assert g.replays == 1


def test_reseeding_inside_a_compiled_call_runs_it_eagerly_with_eagers_draws():
    def noisy(x):
        torch.manual_seed(0)
        return x + torch.randn(3)

    f = torch.compile(noisy)
    want = noisy(torch.zeros(3))
    for _ in range(3):
        assert torch.equal(f(torch.zeros(3)), want), "each call reseeds, as without compile"
    assert "manual_seed() was called" in f.explain()
    state = torch.get_rng_state()

    def restoring(x):
        torch.set_rng_state(state)
        return x + torch.rand(2)

    g = torch.compile(restoring)
    assert torch.equal(g(torch.zeros(2)), g(torch.zeros(2)))


def test_a_replay_returns_the_modules_own_parameter_object():
    class Gives(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(2))

        def forward(self, x):
            return x * self.w, self.w, x

    m = Gives()
    compiled = torch.compile(m)
    x = torch.ones(2)
    for _ in range(3):
        _, w, same = compiled(x)
        assert w is m.w and isinstance(w, nn.Parameter) and same is x
    assert compiled._compiled.replays == 2


def test_recompile_limit_is_cache_size_limit_and_the_backends_are_listed_by_torch_compiler():
    before = torch._dynamo.config.cache_size_limit
    with torch._dynamo.config.patch(recompile_limit=1):
        assert torch._dynamo.config.cache_size_limit == 1
        f = torch.compile(lambda x: x * 2)
        f(torch.ones(2))
        f(torch.ones(3))  # (a second guard set: past the limit, it runs eagerly, still right)
        assert torch.equal(f(torch.ones(3)), torch.full((3,), 2.0))
        assert "cache_size_limit (1) reached" in f.explain()
    assert torch._dynamo.config.recompile_limit == before
    assert torch.compiler.list_backends() == torch._dynamo.list_backends() == ["cudagraphs", "inductor"]
    t = torch.randn(4, 3)
    torch._dynamo.maybe_mark_dynamic(t, 0)
    with pytest.raises(IndexError, match="dim 2 is out of range"):
        torch._dynamo.maybe_mark_dynamic(t, 2)
