"""trainrun.autograd: backward and grad, as torch.autograd's."""
from trainrun import _C
from trainrun._autograd import no_grad, enable_grad, set_grad_enabled  # noqa: F401


def backward(tensors, grad_tensors=None, retain_graph=False, create_graph=False):
    """Accumulates the gradients of `tensors` (one, or a list) into the leaves' .grad."""
    if not isinstance(tensors, (list, tuple)):
        tensors, grad_tensors = [tensors], [grad_tensors]
    grad_tensors = grad_tensors or [None] * len(tensors)
    for t, g in zip(tensors, grad_tensors):
        _C.backward(t, g, retain_graph or len(tensors) > 1, create_graph)


def grad(outputs, inputs, retain_graph=False, create_graph=False):
    """The gradients of `outputs` with respect to `inputs`, without touching .grad."""
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    single = not isinstance(inputs, (list, tuple))
    inputs = [inputs] if single else list(inputs)
    result = _C.grad(outputs, inputs, retain_graph, create_graph)
    return tuple(result)
