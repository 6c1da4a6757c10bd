"""trainrun.autograd: backward, grad and Function, as torch.autograd's."""
from trainrun import _C
from trainrun._autograd import no_grad, enable_grad, set_grad_enabled  # noqa: F401
from trainrun import _anomaly_mode
from trainrun._anomaly_mode import (detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled,  # noqa: F401
                                    set_detect_anomaly)


def _as_list(tensors):
    return [tensors] if _C._is_cpp_tensor(tensors) else list(tensors)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None, inputs=None):
    """Accumulates the gradients of `tensors` (one, or a list: one pass over the graph) into the leaves' .grad;
    with inputs=, into those tensors' .grad only."""
    tensors = _as_list(tensors)
    grad_tensors = grad_tensors if grad_tensors is not None else grad_variables
    grad_tensors = [None] * len(tensors) if grad_tensors is None else _as_list(grad_tensors)
    if len(grad_tensors) != len(tensors):
        raise RuntimeError(f"backward: got {len(tensors)} tensors but {len(grad_tensors)} gradients")
    retain = create_graph if retain_graph is None else retain_graph
    _anomaly_mode.check_roots(tensors, "backward")
    if inputs is None:
        _C._backward_roots(tensors, grad_tensors, retain, create_graph)
        return
    inputs = _as_list(inputs)
    grads = _C.grad(tensors, inputs, grad_tensors, retain, create_graph, True)
    _anomaly_mode.check_gradients(grads, "backward")
    with no_grad():
        for t, g in zip(inputs, grads):
            if g is not None:
                t.grad = g if t.grad is None else t.grad + g


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of `outputs` with respect to `inputs`, without touching .grad (only the part of the graph
    between them runs). An input the outputs do not depend on is an error unless allow_unused (then None, or
    zeros with materialize_grads)."""
    if is_grads_batched:
        raise NotImplementedError("grad(is_grads_batched=True) is not supported")
    outputs = _as_list(outputs)
    inputs = _as_list(inputs)
    grad_outputs = [None] * len(outputs) if grad_outputs is None else _as_list(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(f"grad: got {len(outputs)} outputs but {len(grad_outputs)} grad_outputs")
    retain = create_graph if retain_graph is None else retain_graph
    _anomaly_mode.check_roots(outputs, "grad")
    result = _C.grad(outputs, inputs, grad_outputs, retain, create_graph, bool(allow_unused) or materialize_grads)
    _anomaly_mode.check_gradients(result, "grad")
    if materialize_grads:
        result = [_C.zeros(list(i.shape), dtype=i.dtype, device=i.device) if g is None else g
                  for g, i in zip(result, inputs)]
    return tuple(result)


class FunctionCtx:
    """What forward leaves for backward: ctx.save_for_backward(*tensors) (ctx.saved_tensors in backward), any
    attribute, and the marks PyTorch's ctx takes (mark_dirty, mark_non_differentiable, set_materialize_grads).
    ctx.needs_input_grad: per argument of forward, whether it is a tensor that requires grad."""

    def save_for_backward(self, *tensors):
        self.saved_tensors = self.to_save = tensors

    def mark_dirty(self, *tensors):
        """The inputs forward modified in place (and returns): they take the function's history."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors):
        """Outputs with no gradient (indices, masks): they do not require grad."""
        self._non_differentiable = tensors

    def set_materialize_grads(self, value):
        """False: backward may be handed None for an output whose gradient is not computed (here a tensor of
        zeros is handed either way, which a backward that checks for None treats alike)."""
        self.materialize_grads = bool(value)

    @property
    def saved_variables(self):
        return self.saved_tensors


class _FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        # forward(*args) with a separate setup_context(ctx, inputs, output): PyTorch 2.0's style
        cls._new_style = any("setup_context" in vars(k) for k in cls.__mro__
                             if k.__module__ != __name__ or k.__name__ != "Function")


class Function(metaclass=_FunctionMeta):
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

    or, as PyTorch 2.0 allows, forward(x) without ctx and setup_context(ctx, inputs, output) saving what
    backward needs. forward runs without recording a graph; backward gets one gradient per output and returns
    one per argument of forward (None for those that need none), as in PyTorch."""

    @classmethod
    def apply(cls, *args, **kwargs):
        if kwargs or cls._new_style:  # (bound to forward's parameters, defaults too, as PyTorch's apply does)
            args = cls._bind(args, kwargs)
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(_C._is_cpp_tensor(a) and a.requires_grad for a in args)
        with no_grad():
            if cls._new_style:
                result = cls.forward(*args)
                cls.setup_context(ctx, args, result)
            else:
                result = cls.forward(ctx, *args)
        inputs = [a for a in args if _C._is_cpp_tensor(a)]
        if not _C.is_grad_enabled() or not any(t.requires_grad for t in inputs):
            return result
        single = not isinstance(result, tuple)
        outputs = [result] if single else list(result)
        positions = [i for i, a in enumerate(args) if _C._is_cpp_tensor(a)]
        non_differentiable = getattr(ctx, "_non_differentiable", ())
        differentiable = [k for k, o in enumerate(outputs) if _C._is_cpp_tensor(o) and
                          not any(o is n for n in non_differentiable)]
        dirty = list(getattr(ctx, "_dirty", ()))
        # The gradients backward gets for the outputs without one: zeros of their shapes (only their shapes are
        # kept: a backward holding the outputs would make a cycle through C++ that keeps them alive).
        others = {k: (list(o.shape), o.dtype, o.device) if _C._is_cpp_tensor(o) else None
                  for k, o in enumerate(outputs) if k not in differentiable}

        def backward(*grads):
            if others:  # (a gradient for every output: zeros for the others)
                given = dict(zip(differentiable, grads))
                grads = tuple(given[k] if k in given else
                              None if others[k] is None else
                              _C.zeros(others[k][0], dtype=others[k][1], device=others[k][2])
                              for k in range(len(given) + len(others)))
            result = cls.backward(ctx, *grads)
            result = result if isinstance(result, tuple) else (result,)
            if len(result) != len(args):
                raise ValueError(f"{cls.__name__}.backward returned {len(result)} gradients, but forward took "
                                 f"{len(args)} arguments (return None for those that need none)")
            return tuple(result[i] for i in positions)

        attached = _C._attach_function_node(cls.__name__, inputs, [outputs[k] for k in differentiable], backward,
                                            dirty)
        for k, t in zip(differentiable, attached):
            # (a dirty input comes back as the caller's own tensor object, which now has the history)
            outputs[k] = next((d for d in dirty if d._cdata == t._cdata), t)
        return outputs[0] if single else tuple(outputs)

    @classmethod
    def _bind(cls, args, kwargs):
        import inspect
        parameters = list(inspect.signature(cls.forward).parameters.values())
        if not cls._new_style:
            parameters = parameters[1:]  # (ctx)
        bound = inspect.Signature(parameters).bind(*args, **kwargs)
        bound.apply_defaults()
        return tuple(bound.arguments.values())

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError("subclasses of Function define forward(ctx, ...)")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context(ctx, inputs, output) goes with a forward(*args) without ctx")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("subclasses of Function define backward(ctx, *grads)")

    vjp = backward  # (as PyTorch's: the two names are one method)


def once_differentiable(fn):
    """A backward that is differentiated no further: it runs without recording a graph (a gradient of it would
    be wrong), as PyTorch's decorator."""
    import functools

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            return fn(ctx, *args)
    return wrapper


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


from trainrun._gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: E402,F401
from trainrun import profiler  # noqa: E402,F401  (torch.autograd.profiler.record_function)
from trainrun.profiler import DeviceType  # noqa: E402,F401
from trainrun import _autograd_functional as functional  # noqa: E402
import sys as _sys  # noqa: E402
_sys.modules[__name__ + ".functional"] = functional  # (import trainrun.autograd.functional as a submodule)
from trainrun import _autograd_graph as graph  # noqa: E402
_sys.modules[__name__ + ".graph"] = graph  # (import trainrun.autograd.graph)
# torch.autograd.function: the Function API's module
import types as _types  # noqa: E402
function = _types.ModuleType(__name__ + ".function", "torch.autograd.function: Function, FunctionCtx, "
                                                     "once_differentiable")
function.Function, function.FunctionCtx, function.once_differentiable = Function, FunctionCtx, once_differentiable
function.InplaceFunction = Function
_sys.modules[function.__name__] = function

from trainrun import _forward_ad as forward_ad  # noqa: E402
_sys.modules[__name__ + ".forward_ad"] = forward_ad
from trainrun._tensor_extras import inference_mode  # noqa: E402,F401


class _VariableMeta(type):
    def __instancecheck__(cls, obj):
        return _C._is_cpp_tensor(obj)


class Variable(metaclass=_VariableMeta):
    """The pre-0.4 wrapper, kept as PyTorch keeps it: Variable(t) is a tensor (with requires_grad as asked) and
    every tensor is a Variable."""

    def __new__(cls, data=None, requires_grad=False, volatile=False):
        if data is None:
            data = _C.empty([0])
        if requires_grad and not data.requires_grad:
            return data.detach().requires_grad_(True)
        return data


# torch.autograd.grad_mode / anomaly_mode / variable: the modules PyTorch scripts import these from
grad_mode = _types.ModuleType(__name__ + ".grad_mode", "torch.autograd.grad_mode")
grad_mode.no_grad, grad_mode.enable_grad, grad_mode.set_grad_enabled = no_grad, enable_grad, set_grad_enabled
grad_mode.inference_mode = inference_mode
anomaly_mode = _types.ModuleType(__name__ + ".anomaly_mode", "torch.autograd.anomaly_mode")
anomaly_mode.detect_anomaly, anomaly_mode.set_detect_anomaly = detect_anomaly, set_detect_anomaly
variable = _types.ModuleType(__name__ + ".variable", "torch.autograd.variable")
variable.Variable = Variable
for _module in (grad_mode, anomaly_mode, variable):
    _sys.modules[_module.__name__] = _module


class set_multithreading_enabled:  # noqa: N801  (PyTorch's name)
    """PyTorch's switch for running backward on several threads per device; trainrun's engine runs a graph on the
    calling thread either way, so this records the choice only."""
    _enabled = [True]

    def __init__(self, mode):
        self.previous = set_multithreading_enabled._enabled[0]
        set_multithreading_enabled._enabled[0] = bool(mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        set_multithreading_enabled._enabled[0] = self.previous


def is_multithreading_enabled():
    return set_multithreading_enabled._enabled[0]
