"""trainrun.autograd: backward, grad and Function, as torch.autograd's."""
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


class FunctionCtx:
    """What forward leaves for backward (ctx.save_for_backward, ctx.saved_tensors, any attribute)."""

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors


class Function:
    """A differentiable operation written in Python:

        class Cube(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x * x

            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return 3 * x * x * g

        y = Cube.apply(x)

    forward runs without recording a graph; backward gets one gradient per
    output and returns one per argument of forward (None for those that need
    none), as in PyTorch."""

    @classmethod
    def apply(cls, *args):
        ctx = FunctionCtx()
        with no_grad():
            result = cls.forward(ctx, *args)
        inputs = [a for a in args if isinstance(a, _C.Tensor)]
        if not _C.is_grad_enabled() or not any(t.requires_grad for t in inputs):
            return result
        single = not isinstance(result, tuple)
        outputs = [result] if single else list(result)
        positions = [i for i, a in enumerate(args) if isinstance(a, _C.Tensor)]

        def backward(*grads):
            result = cls.backward(ctx, *grads)
            result = result if isinstance(result, tuple) else (result,)
            if len(result) != len(args):
                raise ValueError(f"{cls.__name__}.backward returned {len(result)} gradients, but forward took "
                                 f"{len(args)} arguments (return None for those that need none)")
            return tuple(result[i] for i in positions)

        attached = _C._attach_function_node(cls.__name__, inputs, outputs, backward)
        return attached[0] if single else tuple(attached)

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError("subclasses of Function define forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("subclasses of Function define backward(ctx, *grads)")


class _unsafe_preserve_version_counter:
    """PyTorch's context manager: writes to `tensor` inside do not count as in-place modifications for
    autograd (its version is put back on exit). For buffers refilled with the same values, as FSDP does
    when it gathers freed parameters again before backward."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __enter__(self):
        self.version = self.tensor._version

    def __exit__(self, *exc):
        _C._unsafe_set_version(self.tensor, self.version)
