"""Module backward hooks, as PyTorch's: register_full_backward_pre_hook(hook(module, grad_output)) runs when the
gradients of the module's outputs are known and may replace them; register_full_backward_hook(hook(module,
grad_input, grad_output)) runs when the gradients of its positional inputs are (None for an input that is not a
tensor or needs none) and may replace grad_input. Built as PyTorch builds them: the call's tensor inputs and
outputs pass through identity autograd functions whose backward passes see those gradients."""
import collections

from trainrun import _C
from trainrun.autograd import Function


class _CallState:
    """One call's view of its gradients, shared by the two identity functions."""

    def __init__(self, module, n_args, tensor_positions):
        self.module, self.n_args, self.tensor_positions = module, n_args, tensor_positions
        self.grad_output = None
        self.input_hooked = False


# Backward hooks on every module (register_module_full_backward_pre_hook / _hook): run before the module's own.
GLOBAL_HOOKS = {"_backward_pre_hooks_py": collections.OrderedDict(), "_backward_hooks_py": collections.OrderedDict()}


def _hooks(module, table):
    return list(GLOBAL_HOOKS[table].values()) + list(module.__dict__.get(table, {}).values())


def _replaced(result, expected, what):
    """A hook's return value as the gradients it replaces (None: keep them), checked against their count."""
    if result is None:
        return expected
    result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    if len(result) != len(expected):
        name = "grad_output" if what == "pre hook" else "grad_input"
        raise RuntimeError(f"backward {what} returned an invalid number of {name}, got {len(result)}, but expected "
                           f"{len(expected)}")
    return result


def _run_full_hooks(state, grad_input):
    for hook in _hooks(state.module, "_backward_hooks_py"):
        grad_input = _replaced(hook(state.module, grad_input, state.grad_output), grad_input, "hook")
    return grad_input


class _Identity(Function):
    """The call's tensors passed through as views, so that backward sees their gradients."""

    @staticmethod
    def forward(ctx, state, *tensors):
        ctx.state = state
        return tuple(t.view_as(t) for t in tensors)


class _OutputHook(_Identity):
    @staticmethod
    def backward(ctx, *grads):
        state = ctx.state
        for hook in _hooks(state.module, "_backward_pre_hooks_py"):
            grads = _replaced(hook(state.module, grads), grads, "pre hook")
        state.grad_output = grads
        if not state.input_hooked:  # no input needs a gradient: the full hooks run now, with grad_input all None
            _run_full_hooks(state, (None,) * state.n_args)
        return (None,) + tuple(grads)


class _InputHook(_Identity):
    @staticmethod
    def backward(ctx, *grads):
        state = ctx.state
        grad_input = [None] * state.n_args
        for position, g in zip(state.tensor_positions, grads):
            grad_input[position] = g
        grad_input = _run_full_hooks(state, tuple(grad_input))
        return (None,) + tuple(grad_input[p] for p in state.tensor_positions)


def has_backward_hooks(module):
    return bool(module.__dict__.get("_backward_hooks_py") or module.__dict__.get("_backward_pre_hooks_py")
                or GLOBAL_HOOKS["_backward_hooks_py"] or GLOBAL_HOOKS["_backward_pre_hooks_py"])


def wrap_inputs(module, args):
    """The call's state and its positional arguments, tensors passed through the input hook when grad mode is on
    and one of them requires grad."""
    positions = [i for i, a in enumerate(args) if _C._is_cpp_tensor(a) and a.requires_grad]
    state = _CallState(module, len(args), positions)
    if positions and _C.is_grad_enabled():
        wrapped = _InputHook.apply(state, *(args[i] for i in positions))
        args = list(args)
        for i, t in zip(positions, wrapped):
            args[i] = t
        args = tuple(args)
        state.input_hooked = True
    return state, args


def wrap_outputs(state, output):
    """output with its tensors that require grad passed through the output hook (a tensor, or a tuple or list of
    them; other structures are returned as they are)."""
    if not _C.is_grad_enabled():
        return output
    items = list(output) if isinstance(output, (tuple, list)) else [output]
    positions = [i for i, o in enumerate(items) if _C._is_cpp_tensor(o) and o.requires_grad]
    if not positions:
        return output
    wrapped = _OutputHook.apply(state, *(items[i] for i in positions))
    for i, t in zip(positions, wrapped):
        items[i] = t
    if isinstance(output, (tuple, list)):
        return type(output)(items) if not hasattr(output, "_fields") else type(output)(*items)
    return items[0]
