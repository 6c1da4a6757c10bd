"""Every factory takes PyTorch's requires_grad= (arange and eye did not), and arange/eye keep their argument
forms: one bound, start/end/step as keywords, float steps, eye(n, m)."""
import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402

FACTORIES = {
    "arange": (3.0,), "eye": (2,), "linspace": (0.0, 1.0, 3), "logspace": (0.0, 1.0, 3), "full": ((2,), 1.0),
    "zeros": (2,), "ones": (2,), "empty": (2,), "rand": (2,), "randn": (2,), "tensor": ([1.0],),
    "zeros_like": (torch.ones(2),), "ones_like": (torch.ones(2),), "full_like": (torch.ones(2), 2.0),
    "rand_like": (torch.ones(2),), "randn_like": (torch.ones(2),), "empty_like": (torch.ones(2),),
    "normal": (0.0, 1.0, (2,)), "empty_strided": ((2,), (1,)),
}


@pytest.mark.parametrize("name", list(FACTORIES))
def test_requires_grad_keyword(name):
    t = getattr(torch, name)(*FACTORIES[name], requires_grad=True)
    assert t.requires_grad and t.is_leaf


def test_arange_and_eye_argument_forms():
    assert torch.arange(5).tolist() == [0, 1, 2, 3, 4] and torch.arange(5).dtype == torch.int64
    assert torch.arange(1, 5, 2).tolist() == [1, 3] and torch.arange(start=1, end=4).tolist() == [1, 2, 3]
    assert torch.arange(end=3).tolist() == [0, 1, 2] and torch.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert torch.arange(3, dtype=torch.float64).dtype == torch.float64
    assert torch.eye(2, 3).tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    assert torch.eye(3, dtype=torch.int64).dtype == torch.int64 and torch.eye(2, m=1).shape == (2, 1)
