"""trainrun.compile's guards on the Python values a recording bakes in (trainrun/_compile_guards.py): a module
attribute, a submodule's training flag or a swapped submodule without parameters, a global and a closure variable
each record anew when they change, and give what eager gives; tensors reached through globals, closures and
module attributes are inputs, so a replay reads the tensor the name holds then; one tensor passed twice records
apart from two; an unchanged loop keeps replaying; a compiled call made inside another recording (a compiled
function calling one, a module compiled in place then exported) joins that recording."""
import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402

SCALE = 2.0


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.scale = 1.0
        self.use_relu = False
        self.act = nn.Identity()
        self.note = ["unguarded"]  # (a list: never a guard)

    def forward(self, x):
        y = self.act(self.lin(x)) * self.scale
        return y.relu() if self.use_relu else y


def _same(compiled, model, x):
    with torch.no_grad():
        return torch.allclose(compiled(x), model(x), rtol=1e-6, atol=1e-7)


def test_a_module_attribute_or_flag_that_changes_records_anew_and_matches_eager():
    torch.manual_seed(0)
    model, x = Scaled(), torch.randn(4, 3)
    compiled = torch.compile(model)
    assert _same(compiled, model, x)
    model.scale = 5.0
    assert _same(compiled, model, x), "x * self.scale replayed the old scale"
    model.use_relu = True
    assert _same(compiled, model, x), "the branch on self.use_relu replayed the old branch"
    model.act = nn.Tanh()  # no parameters: only the structure says it changed
    assert _same(compiled, model, x), "a swapped activation replayed the old one"
    assert len(compiled._compiled._cache) == 4
    model.scale = 1.0
    model.use_relu = False
    model.act = nn.Identity()
    replays = compiled._compiled.replays
    assert _same(compiled, model, x)
    assert compiled._compiled.replays == replays + 1, "the first guard set again replays its recording"


def test_a_steady_loop_replays_and_unguarded_attributes_do_not_record():
    model, x = Scaled(), torch.randn(4, 3)
    compiled = torch.compile(model)
    with torch.no_grad():
        for _ in range(3):
            compiled(x)
        model.note = ["still unguarded"]
        model.unread_number = 7  # a name the class's code never mentions
        compiled(x)
    assert compiled._compiled.calls == 4 and compiled._compiled.replays == 3
    assert len(compiled._compiled._cache) == 1


def test_a_submodule_switched_to_eval_alone_records_anew():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
    compiled = torch.compile(model)
    x = torch.ones(4, 8)
    with torch.no_grad():
        compiled(x)
        model[1].eval()  # the top module still says training
        assert model.training
        assert torch.equal(compiled(x), model(x)), "dropout ran in training mode after its eval()"
        model[1].p = 0.0
        model[1].train()
        assert torch.equal(compiled(x), model(x)), "Dropout.p = 0 replayed the old p"


def test_globals_and_closure_variables_are_guarded():
    global SCALE

    def by_global(a):
        return a * SCALE

    compiled = torch.compile(by_global)
    x = torch.ones(2)
    assert compiled(x).tolist() == [2.0, 2.0]
    SCALE = 4.0
    try:
        assert compiled(x).tolist() == [4.0, 4.0], "a changed global replayed the old value"
    finally:
        SCALE = 2.0
    assert compiled(x).tolist() == [2.0, 2.0] and compiled.replays == 1

    k = 3.0

    def by_closure(a):
        return a + k

    compiled = torch.compile(by_closure)
    assert compiled(x).tolist() == [4.0, 4.0]
    k = -1.0
    assert compiled(x).tolist() == [0.0, 0.0], "a changed closure variable replayed the old value"


def test_a_compiled_call_inside_another_recording_joins_it():
    inner_runs = []

    @torch.compile
    def inner(a):
        inner_runs.append(1)
        return a.sin() * 2

    @torch.compile
    def outer(a):
        return inner(a) + 1

    x = torch.randn(5)
    for _ in range(3):
        assert torch.allclose(outer(x), x.sin() * 2 + 1)
    assert outer.replays == 2 and len(inner_runs) == 1, "inner ran inline in outer's one recording"
    assert inner.calls == 1 and not inner._cache, "inner kept no recording of its own"


def test_a_module_compiled_in_place_exports():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    x = torch.randn(2, 4)
    model.compile()
    model(x)
    ep = torch.export.export(model, (x,))
    assert torch.allclose(ep.module()(x), model(x))
    assert [n.target.__name__ for n in ep.graph.nodes if n.op == "call_function"][-1] == "relu.default"


WEIGHTS = torch.ones(3)


def test_tensors_in_globals_closures_and_attributes_are_read_at_each_call():
    global WEIGHTS
    x = torch.ones(3)
    by_global = torch.compile(lambda a: a * WEIGHTS)
    assert by_global(x).tolist() == [1.0] * 3
    WEIGHTS.add_(1)
    assert by_global(x).tolist() == [2.0] * 3, "an in-place change"
    saved = WEIGHTS
    WEIGHTS = torch.full((3,), 5.0)
    try:
        assert by_global(x).tolist() == [5.0] * 3, "a global bound to another tensor replayed the old one"
        assert by_global.replays == 2 and len(by_global._cache) == 1, "a new tensor of the same shape replays"
    finally:
        WEIGHTS = saved

    offset = torch.ones(3)

    def by_closure(a):
        return a + offset

    compiled = torch.compile(by_closure)
    assert compiled(x).tolist() == [2.0] * 3
    offset = torch.zeros(3)
    assert compiled(x).tolist() == [1.0] * 3, "a closure variable bound to another tensor"

    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.mask = torch.ones(3)  # a plain attribute: not a parameter or a buffer

        def forward(self, a):
            return a * self.mask

    model = Masked()
    compiled = torch.compile(model)
    assert compiled(x).tolist() == [1.0] * 3
    model.mask = torch.tensor([0.0, 1.0, 2.0])
    assert compiled(x).tolist() == [0.0, 1.0, 2.0], "an attribute bound to another tensor"


def test_one_tensor_passed_twice_records_apart_from_two():
    f = torch.compile(lambda a, b: a * 2 + b)
    x, y = torch.ones(2), torch.full((2,), 3.0)
    assert f(x, x).tolist() == [3.0, 3.0]
    assert f(x, y).tolist() == [5.0, 5.0], "f(x, y) replayed the recording of f(x, x)"
    assert f(y, x).tolist() == [7.0, 7.0]
    assert f(y, y).tolist() == [9.0, 9.0]
    assert f.replays == 2 and len(f._cache) == 2


def test_a_forward_that_assigns_module_attributes_runs_eagerly():
    class Counting(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("steps", torch.zeros(1))
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            self.steps = self.steps + 1  # (rebinding the buffer: a replay would not)
            return self.lin(x)

    model = Counting()
    compiled = torch.compile(model)
    for _ in range(3):
        compiled(torch.ones(2))
    assert model.steps.item() == 3 and model.state_dict()["steps"].item() == 3
    assert compiled._compiled.replays == 0
    assert "Counting.steps was assigned during the call" in compiled.explain()
