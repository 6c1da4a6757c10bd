"""trainrun.utils.checkpoint: activation checkpointing, as torch.utils.checkpoint.

checkpoint(function, *args) runs function without keeping its intermediate
activations; backward runs it again (with the random state it had the first
time, so dropout draws the same mask) and backpropagates through that
recomputation. Memory for activations drops to the inputs of each
checkpointed segment, for about one more forward's time."""
import contextlib
import enum
import functools
import warnings

import trainrun
from trainrun import _C
from trainrun.autograd import Function


def _detached_inputs(args):
    out = []
    for a in args:
        if _C._is_cpp_tensor(a):
            d = a.detach()
            d.requires_grad_(a.requires_grad)
            out.append(d)
        else:
            out.append(a)
    return out


# Layers above nn register here what a recomputation needs put back as the forward had it: each entry is called
# with the modules the checkpointed function reaches, at forward time, and returns a context manager (or None)
# that backward enters around the recomputation (fully_shard's: the gathered parameters, in their modules).
RECOMPUTE_CONTEXTS = []


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, kwargs, recompute_contexts, num_args, *args_and_weights):
        # The weights after the arguments are inputs of the node (so the output requires grad through them);
        # backward returns their gradients, which autograd then passes on (to .grad, or to the node that made
        # them: fully_shard's gathered parameters reduce-scatter from there).
        args = args_and_weights[:num_args]
        ctx.weights = args_and_weights[num_args:]
        ctx.recompute_contexts = recompute_contexts
        ctx.run_function, ctx.kwargs = run_function, kwargs
        ctx.rng_state = trainrun.random._all_states() if preserve_rng_state else None
        ctx.inputs = args
        ctx.autocast = [_C._get_autocast(d) for d in ("cpu", "cuda")]
        return run_function(*args, **kwargs)

    @staticmethod
    def backward(ctx, *grads):
        inputs = _detached_inputs(ctx.inputs)
        with trainrun.random.fork_rng(enabled=ctx.rng_state is not None):
            if ctx.rng_state is not None:
                trainrun.random._set_all_states(ctx.rng_state)
            previous = [_C._get_autocast(d) for d in ("cpu", "cuda")]
            for device, state in zip(("cpu", "cuda"), ctx.autocast):  # the forward's autocast state
                _C._set_autocast(device, *state)
            try:
                with trainrun.enable_grad(), contextlib.ExitStack() as restored:
                    for context in ctx.recompute_contexts:
                        restored.enter_context(context)
                    outputs = ctx.run_function(*inputs, **ctx.kwargs)
            finally:
                for device, state in zip(("cpu", "cuda"), previous):
                    _C._set_autocast(device, *state)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if _C._is_cpp_tensor(o) and o.requires_grad and g is not None]
        none = (None, None, None, None, None)
        if not ctx.weights:  # reentrant: the recomputation's own backward accumulates the weights' gradients
            if pairs:
                trainrun.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
            return none + tuple(i.grad if _C._is_cpp_tensor(i) and i.requires_grad else None for i in inputs)
        wanted = [t for t in list(inputs) + list(ctx.weights) if _C._is_cpp_tensor(t) and t.requires_grad]
        found = trainrun.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs], allow_unused=True) \
            if pairs and wanted else [None] * len(wanted)
        by_id = {id(t): g for t, g in zip(wanted, found)}
        return none + tuple(by_id.get(id(t)) for t in list(inputs) + list(ctx.weights))


def _weights_reached(function, args):
    """The tensors requiring grad that `function` reaches other than through args: a module's parameters (the
    function is a module, a module's bound method, or closes over one), or tensors it closes over directly;
    and the modules it reaches."""
    found, seen, given, modules = [], set(), {id(a) for a in args}, []

    def add(t):
        if _C._is_cpp_tensor(t) and t.requires_grad and id(t) not in seen and id(t) not in given:
            seen.add(id(t))
            found.append(t)

    def visit(obj, depth=0):
        if depth > 3:
            return
        if isinstance(obj, _C.nn.Module):
            modules.append(obj)
            for p in obj.parameters():
                add(p)
        elif _C._is_cpp_tensor(obj):
            add(obj)
        elif isinstance(obj, functools.partial):
            for o in (obj.func, *obj.args, *obj.keywords.values()):
                visit(o, depth + 1)
        elif isinstance(obj, (list, tuple)):
            for o in obj:
                visit(o, depth + 1)
        else:
            owner = getattr(obj, "__self__", None)  # a bound method
            if owner is not None and not isinstance(owner, type):
                visit(owner, depth + 1)
            for cell in getattr(obj, "__closure__", None) or ():
                try:
                    visit(cell.cell_contents, depth + 1)
                except ValueError:  # (an empty cell)
                    pass
            code, namespace = getattr(obj, "__code__", None), getattr(obj, "__globals__", None)
            if code is not None and namespace is not None:  # the globals its code names (a module-level model)
                for name in code.co_names:
                    value = namespace.get(name)
                    if isinstance(value, _C.nn.Module) or _C._is_cpp_tensor(value):
                        visit(value, depth + 1)

    visit(function)
    return found, modules


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), its activations recomputed in backward instead of kept. use_reentrant=False:
    the output requires grad when the weights function reaches do (its module's parameters, or tensors it
    closes over), even if no input does, as PyTorch's non-reentrant checkpoint; use_reentrant=True (or None)
    takes only the inputs into account, as PyTorch's reentrant one (whose weights get no gradient then)."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
                      "use_reentrant=False is recommended: with True (the default), weights get no gradient when "
                      "no input requires grad.", UserWarning, stacklevel=2)
        use_reentrant = True
    if use_reentrant and (context_fn is not None or debug):
        raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
    forward_context, recompute_context = context_fn() if context_fn is not None else (None, None)
    if not _C.is_grad_enabled():
        with forward_context if forward_context is not None else contextlib.nullcontext():
            return function(*args, **kwargs)
    hidden, modules = _weights_reached(function, args)
    if use_reentrant:
        hidden = []
        if not any(_C._is_cpp_tensor(a) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", UserWarning,
                          stacklevel=2)
    contexts = [c for c in (make(modules) for make in RECOMPUTE_CONTEXTS) if c is not None]
    if recompute_context is not None:  # (context_fn's second context: around the recomputation)
        contexts.append(recompute_context)
    with forward_context if forward_context is not None else contextlib.nullcontext():
        return _Checkpoint.apply(function, preserve_rng_state, kwargs, contexts, len(args), *args, *hidden)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):  # noqa: A002
    """A Sequential (or list of modules) in `segments` checkpointed chunks; the last runs normally."""
    functions = list(functions.children()) if isinstance(functions, _C.nn.Module) else list(functions)
    size = max(1, len(functions) // segments)

    def run(start, end):
        def forward(x):
            for f in functions[start:end]:
                x = f(x)
            return x
        return forward

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end + 1), input, use_reentrant=use_reentrant, **kwargs)
    return run(end + 1, len(functions))(input)


class CheckpointError(RuntimeError):
    """PyTorch's error for a recomputation that differs from the forward."""


class CheckpointPolicy(enum.Enum):
    """What selective activation checkpointing does with an op's output: save it or recompute it."""
    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3


class SelectiveCheckpointContext:
    """What a policy function is handed (is_recompute: whether the op runs in the recomputation)."""

    def __init__(self, *, is_recompute):
        self.is_recompute = is_recompute


def create_selective_checkpoint_contexts(policy_fn_or_list, allow_cache_entry_mutation=False):
    """The (forward, recompute) contexts of selective activation checkpointing, for
    checkpoint(..., use_reentrant=False, context_fn=partial(create_selective_checkpoint_contexts, policy)).
    trainrun's checkpoint recomputes every op of the segment: the policy's saves are not kept (ops run below
    Python here, out of a Python policy's reach), so the values and gradients are the same and the memory is
    that of full checkpointing."""
    if isinstance(policy_fn_or_list, (list, tuple)):
        ops = list(policy_fn_or_list)

        def policy_fn(ctx, op, *args, **kwargs):
            return CheckpointPolicy.MUST_SAVE if op in ops else CheckpointPolicy.PREFER_RECOMPUTE
    elif callable(policy_fn_or_list):
        policy_fn = policy_fn_or_list
    else:
        raise TypeError("policy_fn_or_list must be either a function or a list of ops.")
    forward, recompute = contextlib.nullcontext(), contextlib.nullcontext()
    forward.policy_fn = recompute.policy_fn = policy_fn
    return forward, recompute


@contextlib.contextmanager
def set_checkpoint_early_stop(enable):
    """PyTorch's switch for stopping a recomputation once the needed tensors exist; trainrun's recomputation
    runs the segment whole, so this only records the choice."""
    yield


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled):
    """PyTorch's switch for printing the ops of a forward and its recomputation when they differ (a
    CheckpointError then carries them); trainrun's recomputation replays the segment whole, so this only
    records the choice (None restores the default)."""
    previous = _DEBUG[0]
    _DEBUG[0] = enabled
    try:
        yield
    finally:
        _DEBUG[0] = previous


_DEBUG = [None]


def noop_context_fn():
    """checkpoint's default context_fn: nothing around the forward or the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


def detach_variable(inputs):
    """The tensors of a tuple detached, each keeping its requires_grad (what reentrant checkpointing feeds the
    recomputation); other values pass through."""
    if not isinstance(inputs, tuple):
        raise RuntimeError(f"Only tuple of tensors is supported. Got Unsupported input type: {type(inputs).__name__}")
    return tuple(_detached_inputs(inputs))


def check_backward_validity(inputs):
    if not any(_C._is_cpp_tensor(i) and i.requires_grad for i in inputs):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None")


def get_device_states(*args):
    """(devices, their random states) of the CUDA devices the tensors in args are on (none on the CPU)."""
    devices = sorted({a.device.index or 0 for a in args if _C._is_cpp_tensor(a) and a.device.type == "cuda"})
    return devices, [trainrun.cuda.get_rng_state(d) for d in devices]


def set_device_states(devices, states, *, device_type=None):
    for device, state in zip(devices, states):
        trainrun.cuda.set_rng_state(state, device)


CheckpointFunction = _Checkpoint  # (PyTorch's name for the reentrant checkpoint's autograd Function)
