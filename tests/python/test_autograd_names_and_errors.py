"""What PyTorch scripts read off the graph and catch from it: grad_fn.name() and the tensor's repr give
PyTorch's node names (built-in ops numbered, 'MulBackward0'; a custom Function's node 'ClassNameBackward'), the
errors of misuse are RuntimeErrors with PyTorch's words (scripts match them), and tensors allocated in
inference_mode are inference tensors."""
import threading

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402


def test_node_names_are_pytorchs():
    x = torch.ones(2, requires_grad=True)
    assert (x + 1).grad_fn.name() == "AddBackward0"
    assert (x * 2).grad_fn.name() == "MulBackward0"
    assert x.sum().grad_fn.name() == "SumBackward0"
    assert x.exp().grad_fn.name() == "ExpBackward0"
    assert "grad_fn=<MulBackward0>" in repr(x * 2)
    assert repr(x.sum().grad_fn).startswith("<SumBackward0 object at ")
    assert (x * 2).sum().grad_fn.next_functions[0][0].name() == "MulBackward0"
    assert (x * 2).grad_fn.next_functions[0][0].name() == "AccumulateGrad"


def test_custom_function_node_is_not_numbered():
    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a ** 3

        @staticmethod
        def backward(ctx, g):
            a, = ctx.saved_tensors
            return 3 * a * a * g
    y = Cube.apply(torch.ones(2, requires_grad=True))
    assert y.grad_fn.name() == "CubeBackward" and "grad_fn=<CubeBackward>" in repr(y)


def test_misuse_raises_runtime_error_in_pytorchs_words():
    w = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        w.add_(1)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        w.copy_(torch.zeros(2))
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        w.fill_(3.0)
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        (w * 2).requires_grad_(False)
    y = (w * w).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()
    s = w.sigmoid()
    z = s * 1
    s.mul_(2)
    with pytest.raises(RuntimeError, match="one of the variables needed for gradient computation has been "
                                           "modified by an inplace operation"):
        s.sum().backward()
    del z


def test_inference_mode_makes_inference_tensors():
    x = torch.ones(3, requires_grad=True)
    plain = torch.ones(3)
    with torch.inference_mode():
        assert torch.is_inference_mode_enabled()
        made = x * 2
        view_of_plain = plain.view(3, 1)
        with torch.inference_mode(False):
            assert not torch.is_inference_mode_enabled() and not torch.ones(1).is_inference()
        assert torch.is_inference_mode_enabled()
    assert not torch.is_inference_mode_enabled()
    assert made.is_inference() and made[1:].is_inference() and not made.requires_grad
    assert not view_of_plain.is_inference() and not plain.is_inference() and not (x * 2).is_inference()

    @torch.inference_mode()
    def decorated():
        return torch.zeros(2)
    assert decorated().is_inference()


def test_inference_mode_is_per_thread():
    seen = {}
    with torch.inference_mode():
        worker = threading.Thread(target=lambda: seen.update(mode=torch.is_inference_mode_enabled(),
                                                             tensor=torch.ones(1).is_inference()))
        worker.start()
        worker.join(timeout=30)
    assert seen == {"mode": False, "tensor": False}


def test_grad_is_one_python_object_while_it_is_one_tensor():
    model = torch.nn.Linear(2, 2)
    model(torch.ones(1, 2)).sum().backward()
    assert model.weight.grad is model.weight.grad  # (through two handles of the parameter too)
    g = model.weight.grad
    model(torch.ones(1, 2)).sum().backward()  # accumulates into the same tensor
    assert model.weight.grad is g and g[0, 0].item() == 2.0
    replacement = torch.zeros(2, 2)
    model.weight.grad = replacement
    assert model.weight.grad is replacement
    torch.optim.SGD(model.parameters(), lr=0.1).zero_grad()
    assert model.weight.grad is None
    import gc
    import weakref
    x = torch.ones(3, requires_grad=True)
    (x * 2).sum().backward()
    watcher = weakref.ref(x.grad)
    x.grad = None
    gc.collect()
    assert watcher() is None  # (the identity cache never keeps a gradient alive)
