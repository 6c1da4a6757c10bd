"""trainrun.export and AOT packages: a module's forward captured whole with frozen weights equals the eager
forward on new inputs (an MLP, a CNN, a transformer block, a chain of pointwise ops that becomes a generated
loop); the package aot_compile writes runs from Python (aot_load) and from a C++ program with no Python
(compile/aot_run) with the same outputs; wrong inputs and what cannot be captured are refused by name."""
import os
import subprocess
import tempfile

import pytest

from built_tree import ROOT

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402
from trainrun._compile import GraphBreakError  # noqa: E402

AOT_RUN = ROOT / "bazel-bin" / "compile" / "aot_run"


class Pointwise(nn.Module):
    """A bias, then a chain of pointwise ops: one generated loop in the program."""

    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(37))

    def forward(self, x):
        h = x + self.bias
        return torch.tanh(h) * torch.sigmoid(h) - h.exp() / 3


def _models():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.Linear(32, 5))
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(8 * 4 * 4, 5))
    block = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    return {"mlp": (mlp, lambda: torch.randn(6, 12)), "cnn": (cnn, lambda: torch.randn(4, 3, 8, 8)),
            "block": (block, lambda: torch.randn(2, 7, 16)), "pointwise": (Pointwise(), lambda: torch.randn(5, 37))}


def _close(a, b):
    return torch.allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["mlp", "cnn", "block", "pointwise"])
def test_an_exported_program_equals_the_eager_forward_on_new_inputs(name):
    model, batch = _models()[name]
    model.eval()
    ep = torch.export.export(model, (batch(),))
    for _ in range(2):
        x = batch()
        with torch.no_grad():
            assert _close(ep.module()(x), model(x))
    assert ep.graph_signature.user_inputs == [{"block": "src", "pointwise": "x"}.get(name, "input")]
    specs = ep.graph_signature.input_specs
    assert specs[-1].kind == torch.export.InputKind.USER_INPUT
    assert specs[-1].arg.name == ep.graph_signature.user_inputs[0]
    params = [s for s in specs if s.kind == torch.export.InputKind.PARAMETER]
    assert [s.target for s in params] == ep.graph_signature.parameters
    assert all(s.arg.name == "p_" + s.target.replace(".", "_") for s in params)
    assert [s.kind for s in ep.graph_signature.output_specs] == [torch.export.OutputKind.USER_OUTPUT]
    assert set(ep.graph_signature.parameters) <= {n for n, _ in model.named_parameters()}
    if name == "pointwise":
        assert "1 loops for 7 ops" in str(ep), str(ep)  # add, tanh, sigmoid, mul, exp, div, sub


def test_exported_weights_are_frozen_copies():
    model, batch = _models()["mlp"]
    x = batch()
    ep = torch.export(model, (x,))  # the module itself is callable, as the trainrun.export(...)
    with torch.no_grad():
        before = model(x)
        model[0].weight.mul_(2)
    assert _close(ep(x), before) and not _close(ep(x), model(x))
    assert set(ep.state_dict) == {"0.weight", "0.bias", "2.weight", "2.bias"}


def test_export_refuses_what_it_cannot_capture_by_name():
    class DataDependent(nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x - 1

    with pytest.raises(GraphBreakError, match="DataDependent.forward could not be captured whole: item\\(\\)"):
        torch.export.export(DataDependent(), (torch.ones(2),))

    class TwoInputs(nn.Module):
        def forward(self, x, scale):
            return x * scale

    class Opaque:
        pass
    with pytest.raises(TypeError, match="input 'scale' is a Opaque; inputs must be tensors or numbers"):
        torch.export.export(TwoInputs(), (torch.ones(2), Opaque()))
    with pytest.raises(TypeError, match="input 'scale_s' is a Opaque"):  # (a dict's leaves are inputs, named by path)
        torch.export.export(TwoInputs(), (torch.ones(2), {"s": Opaque()}))
    ep = torch.export.export(TwoInputs(), (torch.ones(2, 3), torch.ones(3)))
    with pytest.raises(ValueError, match="input 'scale' has shape \\[2\\]; the program was exported for \\[3\\]"):
        ep(torch.ones(2, 3), torch.ones(2))
    with pytest.raises(ValueError, match="1 inputs given, the program takes 2 \\(x, scale\\)"):
        ep(torch.ones(2, 3))


@pytest.mark.parametrize("name", ["mlp", "block", "pointwise"])
def test_an_aot_package_runs_from_python_and_from_cpp_with_eagers_outputs(name, tmp_path):
    model, batch = _models()[name]
    model.eval()
    ep = torch.export.export(model, (batch(),))
    package = torch.aot_compile(ep, tmp_path / "model.aot")
    assert sorted(p.name for p in (tmp_path / "model.aot").iterdir()) == ["model.so", "weights.safetensors"]
    loaded = torch.aot_load(package)
    x = batch()
    with torch.no_grad():
        expected = model(x)
    assert _close(loaded(x), expected)
    with pytest.raises(ValueError, match=f"input '{loaded.input_names[0]}' has shape"):
        loaded(torch.randn(1, *x.shape[1:]))

    if not AOT_RUN.exists():
        pytest.skip(f"{AOT_RUN} is not built (bazel build //compile:aot_run)")
    torch.save({loaded.input_names[0]: x}, str(tmp_path / "inputs.safetensors"))
    run = subprocess.run([str(AOT_RUN), package, str(tmp_path / "inputs.safetensors"),
                          str(tmp_path / "outputs.safetensors"), "--repeat", "3"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "1 outputs" in run.stdout
    assert _close(torch.load(str(tmp_path / "outputs.safetensors"))["output0"], expected)

    torch.save({loaded.input_names[0]: torch.randn(1, *x.shape[1:])}, str(tmp_path / "wrong.safetensors"))
    run = subprocess.run([str(AOT_RUN), package, str(tmp_path / "wrong.safetensors"), str(tmp_path / "o.safetensors")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and f"input '{loaded.input_names[0]}' has shape [1," in run.stderr


def test_a_missing_package_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="not a package \\(it needs model.so and weights.safetensors\\)"):
        torch.aot_load(tmp_path / "nothing")
    with pytest.raises(TypeError, match="expected an ExportedProgram"):
        torch.aot_compile(nn.Linear(2, 2), tmp_path / "x")


class TwoOutputs(nn.Module):
    """A dict holding a tuple with a tensor, None and a number: the structure comes back from an archive."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 4)

    def forward(self, x, y):
        h = self.lin(x).relu()
        return {"h": h, "rest": (h + y, None, 3)}


def test_save_and_load_give_back_the_program_its_weights_inputs_and_output_structure(tmp_path):
    torch.manual_seed(0)
    model = TwoOutputs()
    x, y = torch.randn(5, 8), torch.randn(5, 4)
    ep = torch.export.export(model, (x,), {"y": y})
    extra = {"notes.txt": "trained 3 epochs"}
    torch.export.save(ep, tmp_path / "model.pt2", extra_files=extra)
    read = {"notes.txt": ""}
    loaded = torch.export.load(tmp_path / "model.pt2", extra_files=read)
    assert read == extra
    assert loaded.graph_signature.parameters == ["lin.weight", "lin.bias"]
    assert loaded.graph_signature.user_inputs == ["x", "y"]
    assert torch.equal(loaded.state_dict["lin.weight"], model.lin.weight.detach())
    (ex_x,), ex_kwargs = loaded.example_inputs
    assert torch.equal(ex_x, x) and torch.equal(ex_kwargs["y"], y)
    x2, y2 = torch.randn(5, 8), torch.randn(5, 4)
    with torch.no_grad():
        expected = model(x2, y2)
    got = loaded.module()(x2, y=y2)
    assert set(got) == {"h", "rest"} and got["rest"][1:] == (None, 3)
    assert torch.equal(got["h"], expected["h"]) and torch.equal(got["rest"][0], expected["rest"][0])
    with pytest.raises(ValueError, match="input 'x' has shape"):
        loaded(torch.randn(2, 8), y2)
    # the loaded program compiles ahead of time again, and a file object works as a path does
    again = torch.aot_load(torch.aot_compile(loaded, tmp_path / "again.aot"))
    assert torch.equal(again(x2, y2)[0], expected["h"])
    with open(tmp_path / "copy.pt2", "wb") as f:
        torch.export.save(loaded, f)
    with open(tmp_path / "copy.pt2", "rb") as f:
        assert torch.equal(torch.export.load(f)(x2, y2)["h"], expected["h"])


def test_aoti_compile_and_package_and_load_package_as_pytorch_2_6_spells_them(tmp_path):
    torch.manual_seed(0)
    model = TwoOutputs()
    x, y = torch.randn(5, 8), torch.randn(5, 4)
    ep = torch.export.export(model, (x, y))
    path = torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "model.pt2"))
    assert path == str(tmp_path / "model.pt2")
    compiled = torch._inductor.aoti_load_package(path)
    with torch.no_grad():
        expected = model(x, y)
    got = compiled(x, y)
    assert torch.equal(got["h"], expected["h"]) and got["rest"][2] == 3
    unnamed = torch._inductor.aoti_compile_and_package(ep)
    try:
        assert unnamed.endswith(".pt2") and torch.equal(torch._inductor.aoti_load_package(unnamed)(x, y)["h"],
                                                        expected["h"])
    finally:
        import os
        os.unlink(unnamed)
    with pytest.raises(ValueError, match="must end in .pt2"):
        torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "model.zip"))
    with pytest.raises(ValueError, match="inductor_configs"):
        torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "c.pt2"),
                                                 inductor_configs={"max_autotune": True})


def test_load_refuses_what_save_did_not_write(tmp_path):
    import zipfile
    (tmp_path / "plain.txt").write_text("not an archive")
    with pytest.raises(ValueError, match="is not a file save\\(\\) wrote"):
        torch.export.load(tmp_path / "plain.txt")
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as z:
        z.writestr("data.bin", b"\0")
    with pytest.raises(ValueError, match="lacks \\['kernels.cpp', 'model.so', 'program.json', 'weights.safetensors'\\]"):
        torch.export.load(tmp_path / "other.zip")
    with pytest.raises(ValueError, match="not a package aoti_compile_and_package wrote"):
        torch._inductor.aoti_load_package(tmp_path / "plain.txt")
    with pytest.raises(TypeError, match="expected an ExportedProgram"):
        torch.export.save(nn.Linear(2, 2), tmp_path / "x.pt2")


def test_dims_are_checked_and_decompositions_are_the_program():
    model = nn.Linear(4, 2)
    x = torch.randn(3, 4)
    with pytest.raises(ValueError, match="min \\(8\\) is greater than max \\(2\\)"):
        torch.export.Dim("n", min=8, max=2)
    with pytest.raises(ValueError, match="the name must be a non-empty string"):
        torch.export.Dim("")
    ep = torch.export.export(model, (x,))
    assert ep.run_decompositions() is ep
    with torch.no_grad():
        assert torch.equal(ep.run_decompositions()(x), model(x))


def test_a_refused_input_is_a_runtime_error_as_in_pytorch_and_a_value_error():
    """PyTorch's exported module and AOTI runner raise RuntimeError for an input of the wrong shape;
    trainrun's refusal is that and a ValueError, naming the input either way."""
    model = torch.nn.Linear(4, 3)
    ep = torch.export.export(model, (torch.randn(2, 4),))
    with pytest.raises(RuntimeError, match="input 'input' has shape \\[2, 5\\]"):
        ep.module()(torch.randn(2, 5))
    with pytest.raises(ValueError, match="1 inputs given|2 inputs given"):
        ep.module()(torch.randn(2, 4), torch.randn(2, 4))
    with tempfile.TemporaryDirectory() as d:
        runner = torch._inductor.aoti_load_package(
            torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(d, "m.pt2")))
        with pytest.raises(RuntimeError, match="input 'input'"):
            runner(torch.randn(3, 4))
        assert torch.allclose(runner(torch.ones(2, 4)), model(torch.ones(2, 4)))
