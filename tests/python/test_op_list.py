"""The op list (tensor/ops.yaml) and the Python package agree: every op the
list binds is reachable where it says (trainrun.<name>, Tensor.<name>,
trainrun.nn.functional.<name>) and runs there; DTensor takes its pointwise
ops from the list; the generator refuses a malformed list by name."""
import subprocess
import sys

import pytest

from built_tree import ROOT, needs_torch, torch

import trainrun
import trainrun.nn.functional as F
from trainrun import _op_list
from trainrun.distributed.tensor import DTensor

GENERATOR = ROOT / "tensor" / "codegen" / "gen_ops.py"
PLACES = {"function": trainrun, "method": trainrun.Tensor, "functional": F}


def test_the_list_is_the_dispatchers_and_parses():
    ops = _op_list.ops()
    names = [op.name for op in ops]
    assert len(names) == len(set(names)) and len(names) > 90
    by_name = {op.name: op for op in ops}
    assert by_name["max.dim"].python_name == "max"
    assert by_name["max.dim"].returns == (("Tensor", "values"), ("Tensor", "indices"))
    assert [a.name for a in by_name["add"].arguments] == ["self", "other", "alpha", "out"]
    assert [a.name for a in by_name["add"].tensor_inputs] == ["self", "other"]
    assert {"pointwise", "nondifferentiable"} <= by_name["eq"].tags


def test_every_binding_the_list_names_exists():
    missing = [f"{place}: {op.python_name} ({op.name})" for op in _op_list.ops() for place in sorted(op.python)
               if not callable(getattr(PLACES[place], op.python_name, None))]
    assert not missing, "ops of tensor/ops.yaml not bound where the list says: " + ", ".join(missing)


def _inputs(op):
    """Arguments for a pointwise op's Python binding: floats in (0.5, 1.5) (every op is defined there), bools for
    the logical ops, integers for the bitwise ones."""
    def tensor(k):
        if op.tensor_inputs[k].name == "condition":
            return trainrun.tensor([[True, False], [False, True]])
        if op.python_name.startswith("bitwise"):
            return trainrun.tensor([[1, 2], [3, 12]]) + k
        if op.python_name.startswith("logical"):
            return trainrun.tensor([[True, False], [True, True]]) ^ bool(k)
        return trainrun.tensor([[0.6, 0.9], [1.2, 1.4]]) + 0.05 * k
    return [tensor(k) for k in range(len(op.tensor_inputs))]


@pytest.mark.parametrize("op", [op for op in _op_list.ops() if "pointwise" in op.tags
                                and len(op.arguments) == len(op.tensor_inputs) + 1
                                and op.arguments[-1].name == "out"], ids=lambda op: op.name)
def test_pointwise_bindings_agree_with_each_other_and_write_out(op):
    """The function, the method and the functional of one pointwise op give the same values, and out= writes
    them into the tensor given."""
    args = _inputs(op)
    names = [a.name for a in op.tensor_inputs]
    # A method is called on the schema's `self` (not always the first argument: where(condition, self, other)).
    self_at = names.index("self") if "self" in names else 0
    method_args = [args[self_at]] + args[:self_at] + args[self_at + 1:]
    results = {place: getattr(PLACES[place], op.python_name)(*(method_args if place == "method" else args))
               for place in op.python}
    first = next(iter(results.values()))
    for place, r in results.items():
        assert r.shape == first.shape and r.dtype == first.dtype, place
        assert r.tolist() == first.tolist(), place
    if "function" in op.python:
        out = trainrun.empty(first.shape, dtype=first.dtype)
        returned = getattr(trainrun, op.python_name)(*args, out=out)
        assert returned is out and out.tolist() == first.tolist()


@pytest.mark.parametrize("arity", [1, 2])
def test_dtensor_has_every_pointwise_method_of_the_list(arity):
    names = _op_list.pointwise_methods(arity)
    assert names, "the list has no pointwise methods?"
    missing = [n for n in names if n not in vars(DTensor)]
    assert not missing, f"pointwise ops without a DTensor method: {missing}"


def _generate(tmp_path, text):
    spec = tmp_path / "ops.yaml"
    spec.write_text(text)
    return subprocess.run([sys.executable, str(GENERATOR), str(spec), str(tmp_path)], capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("text, message", [
    ("- func: f(Tensor self, Tensr other) -> Tensor\n", "argument 'other' has unknown type 'Tensr'"),
    ("- func: f(Tensor self) -> Tensor\n- func: f(Tensor self) -> Tensor\n", "op f is listed twice"),
    ("- func: f(Tensor self) -> Tensor\n  tags: [pointwize]\n", "f: unknown tags ['pointwize']"),
    ("- func: f(Tensor self) -> Tensor\n  python: [methd]\n", "f: unknown python targets ['methd']"),
    ("- func: f(Tensor self, int self) -> Tensor\n", "an argument name repeats"),
    ("- func: f(Tensor self) Tensor\n", "not a schema"),
    ("- func: f(Tensor self) -> Tensor\n  tag: [view]\n", "unknown keys ['tag']"),
])
def test_the_generator_refuses_a_malformed_list_by_name(tmp_path, text, message):
    r = _generate(tmp_path, text)
    assert r.returncode != 0 and message in r.stderr, r.stderr


def test_the_generator_writes_a_struct_and_an_entry_per_op(tmp_path):
    r = _generate(tmp_path, "- func: twice.out(Tensor self, int[] dims, Tensor? out) -> (Tensor a, Tensor b)\n"
                            "  tags: [pointwise]\n  python: [method]\n")
    assert r.returncode == 0, r.stderr
    header = (tmp_path / "op_schemas.h").read_text()
    assert "struct twice_out {" in header
    assert "using Sig = std::tuple<Tensor, Tensor>(const Tensor&, const IntList&, const Tensor&);" in header
    assert 'static constexpr const char* name = "twice.out";' in header
    source = (tmp_path / "op_list.cc").read_text()
    assert '{"twice.out", ops::twice_out::schema, typeid(ops::twice_out::Sig), true, false, false, false, false, ' \
           '"twice", {"method"}, "generated"}' in source


@pytest.mark.parametrize("call, message", [
    (lambda x: trainrun.add(x, "a"), "add(): argument 'other' (position 2) must be Tensor or a number, not str"),
    (lambda x: trainrun.exp([1.0]), "exp(): argument 'input' (position 1) must be Tensor, not list"),
    (lambda x: x.add(x, alpha="q"), "add(): argument 'alpha' must be a number, not str"),
    (lambda x: trainrun.mul(x, x, out=3), "mul(): argument 'out' must be Tensor, not int"),
    (lambda x: trainrun.amax(x, dim="a"), "amax(): argument 'dim' (position 2) must be tuple of ints, not str"),
    (lambda x: x.index_select(0, [0]), "index_select(): argument 'index' (position 2) must be Tensor, not list"),
    (lambda x: x.cumsum(0, dtype="float64"), "cumsum(): argument 'dtype' must be trainrun.dtype, not str"),
    (lambda x: trainrun.mm(x.view(1, 3), 2), "mm(): argument 'mat2' (position 2) must be Tensor, not int"),
])
def test_a_wrong_argument_is_named(call, message):
    with pytest.raises(TypeError) as e:
        call(trainrun.ones(3))
    assert str(e.value) == message


def test_generated_bindings_document_pytorchs_signature():
    assert trainrun.add.__doc__.startswith("add(input, other, *, alpha=1, out=None) -> Tensor")
    assert trainrun.Tensor.amax.__doc__.startswith("amax(dim=None, keepdim=False) -> Tensor")
    assert "op diagonal(Tensor self, int offset=0, int dim1=0, int dim2=1) -> Tensor" in trainrun.diagonal.__doc__


def _operator_results(lib):
    import numpy as np
    x, i, m = lib.tensor([1., 2., 3.]), lib.tensor([1, 2, 3]), lib.tensor([True, False, True])
    values = [2 ** x, x ** 2, 7 % i, i % 2, 1 - x, 1 / x, np.float32(2) * x, x * np.float64(0.5), x == None,  # noqa
              x != None, 3 & i, m | False, 5 ^ i, 2 < x, x >= 2, x + i, i * True, lib.pow(2, x)]  # noqa: E711
    results = [(str(v.dtype).split(".")[-1], v.tolist()) if hasattr(v, "tolist") else v for v in values]
    for bad in (lambda: x + "a", lambda: x < "a", lambda: [1] @ x):
        with pytest.raises(TypeError):
            bad()
    return results


@needs_torch
def test_operators_match_pytorch_with_numbers_on_either_side():
    """The operators are CPython methods of their own (tensor_operators.cc): reflected forms, NumPy scalars,
    comparisons with None, and TypeError for anything else, as PyTorch."""
    assert _operator_results(trainrun) == _operator_results(torch)


def _reduction_results(lib):
    x = lib.tensor([[1, 2], [3, 4]])
    f = x.float()
    values = [x.sum(), x.sum(1), x.sum(axis=0), lib.sum(x, (0, 1), keepdims=True), x.sum(dtype=lib.float64),
              f.mean(dim=0), lib.mean(f, 1, True), x.prod(), x.prod(1), lib.prod(f, 0, dtype=lib.float64),
              (x > 1).sum(), f.amax(dim=(0, 1)), x.argmax(), lib.logsumexp(f, dim=1)]
    with pytest.raises(RuntimeError):
        x.mean()
    return [(str(v.dtype).split(".")[-1], [round(e, 4) for e in v.flatten().tolist()]) for v in values]


@needs_torch
def test_generated_reductions_match_pytorch():
    """int[] dims as an int or a tuple, NumPy's axis=/keepdims=, integer sums in int64, dtype=, and mean's
    RuntimeError on integers, as PyTorch."""
    assert _reduction_results(trainrun) == _reduction_results(torch)
