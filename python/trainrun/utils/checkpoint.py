"""trainrun.utils.checkpoint: activation checkpointing, as torch.utils.checkpoint.

checkpoint(function, *args) runs function without keeping its intermediate
activations; backward runs it again (with the random state it had the first
time, so dropout draws the same mask) and backpropagates through that
recomputation. Memory for activations drops to the inputs of each
checkpointed segment, for about one more forward's time."""
import warnings

import trainrun
from trainrun import _C
from trainrun.autograd import Function


def _detached_inputs(args):
    out = []
    for a in args:
        if isinstance(a, _C.Tensor):
            d = a.detach()
            d.requires_grad_(a.requires_grad)
            out.append(d)
        else:
            out.append(a)
    return out


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, kwargs, *args):
        ctx.run_function, ctx.kwargs = run_function, kwargs
        ctx.rng_state = trainrun.random.get_rng_state() if preserve_rng_state else None
        ctx.inputs = args
        ctx.autocast = [_C._get_autocast(d) for d in ("cpu", "cuda")]
        return run_function(*args, **kwargs)

    @staticmethod
    def backward(ctx, *grads):
        inputs = _detached_inputs(ctx.inputs)
        with trainrun.random.fork_rng(enabled=ctx.rng_state is not None):
            if ctx.rng_state is not None:
                trainrun.random.set_rng_state(ctx.rng_state)
            previous = [_C._get_autocast(d) for d in ("cpu", "cuda")]
            for device, state in zip(("cpu", "cuda"), ctx.autocast):  # the forward's autocast state
                _C._set_autocast(device, *state)
            try:
                with trainrun.enable_grad():
                    outputs = ctx.run_function(*inputs, **ctx.kwargs)
            finally:
                for device, state in zip(("cpu", "cuda"), previous):
                    _C._set_autocast(device, *state)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, _C.Tensor) and o.requires_grad and g is not None]
        if pairs:
            trainrun.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None, None) + tuple(i.grad if isinstance(i, _C.Tensor) and i.requires_grad else None
                                          for i in inputs)


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), its activations recomputed in backward instead of kept."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
                      "trainrun recomputes the same way either way.", UserWarning, stacklevel=2)
    if context_fn is not None:
        raise NotImplementedError("checkpoint(context_fn=...) is not supported")
    if not _C.is_grad_enabled():
        return function(*args, **kwargs)
    return _Checkpoint.apply(function, preserve_rng_state, kwargs, *args)


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
