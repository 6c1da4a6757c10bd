"""Non-tensor inputs of torch.export (an int, float, bool, str or None the forward takes), as torch.export treats
them: the program is specialized to the example's values, runs with them given again, refuses another value or a
missing one naming the input, keeps them through save/load, and works next to dynamic tensor dims."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.nn as nn  # noqa: E402


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, n: int, mode="relu", y=None, scale=1.0):
        out = self.lin(x) * n * scale
        if y is not None:
            out = out + y
        return out.relu() if mode == "relu" else out


def test_a_program_is_specialized_to_its_non_tensor_inputs(tmp_path):
    torch.manual_seed(0)
    m, x, y = Scaled(), torch.randn(2, 4), torch.randn(2, 4)
    ep = torch.export.export(m, (x, 3, "linear"), kwargs={"y": y, "scale": 0.5})
    assert ep.graph_signature.user_inputs == ["x", "y"]
    other_x, other_y = torch.randn(2, 4), torch.randn(2, 4)
    want = m(other_x, 3, "linear", y=other_y, scale=0.5)
    assert (want < 0).any(), "mode='linear' keeps negative values: the recorded branch is the example's"
    assert torch.allclose(ep.module()(other_x, 3, "linear", y=other_y, scale=0.5), want)
    with pytest.raises(RuntimeError, match="input 'n' is 4; the program was exported with n=3"):
        ep.module()(x, 4, "linear", y=y, scale=0.5)
    with pytest.raises(RuntimeError, match="input 'mode' is 'relu'; the program was exported with mode='linear'"):
        ep.module()(x, 3, "relu", y=y, scale=0.5)
    with pytest.raises(RuntimeError, match="input 'n' is 3.0"):  # (a float is not the int it was exported with)
        ep.module()(x, 3.0, "linear", y=y, scale=0.5)
    with pytest.raises(TypeError, match="input 'scale' is missing \\(the program was exported with scale=0.5\\)"):
        ep.module()(x, 3, "linear", y=y)

    torch.export.save(ep, tmp_path / "scaled.pt2")
    loaded = torch.export.load(tmp_path / "scaled.pt2")
    assert torch.allclose(loaded.module()(other_x, 3, "linear", y=other_y, scale=0.5), want)
    with pytest.raises(RuntimeError, match="input 'n' is 5"):
        loaded.module()(x, 5, "linear", y=y, scale=0.5)


def test_specialized_inputs_sit_next_to_dynamic_dims():
    torch.manual_seed(0)
    m, x = Scaled(), torch.randn(2, 4)
    batch = torch.export.Dim("batch", max=16)
    z = torch.randn(7, 4)
    for shapes in ({"x": {0: batch}, "n": None}, ({0: batch}, None)):
        ep = torch.export.export(m, (x, 2), dynamic_shapes=shapes)
        assert torch.allclose(ep.module()(z, 2), m(z, 2), atol=1e-6)
    with pytest.raises(ValueError, match="dynamic_shapes gives .* for input 'n', which is not a tensor; give None"):
        torch.export.export(m, (x, 2), dynamic_shapes=({0: batch}, {0: batch}))


def test_inputs_that_cannot_be_specialized_are_named():
    with pytest.raises(TypeError, match="input 'n' is a set; inputs must be tensors or numbers"):
        torch.export.export(Scaled(), (torch.randn(2, 4), {1, 2}))  # (a list would be a container: its leaves)
