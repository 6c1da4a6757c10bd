"""torch.func.grad, grad_and_value, vjp and jacrev over trainrun's autograd: each call differentiates a fresh
graph (inputs detached and made to require grad), and keeps the graph of the result when grad mode is on, so the
transforms compose (grad(grad(f)), vmap(grad(f)))."""
import trainrun
from trainrun import _C


def _flatten(tree):
    if _C._is_cpp_tensor(tree):
        return [tree], lambda leaves: leaves[0]
    if isinstance(tree, (tuple, list)):
        parts = [_flatten(t) for t in tree]
        sizes = [len(p[0]) for p in parts]

        def rebuild(leaves, parts=parts, sizes=sizes, kind=type(tree)):
            out, i = [], 0
            for (_, build), n in zip(parts, sizes):
                out.append(build(leaves[i:i + n]))
                i += n
            return kind(out)
        return [leaf for p in parts for leaf in p[0]], rebuild
    if isinstance(tree, dict):
        keys = list(tree)
        leaves, build = _flatten([tree[k] for k in keys])
        return leaves, lambda ls: dict(zip(keys, build(ls)))
    raise TypeError(f"expected tensors, or tuples, lists or dicts of them, got {type(tree).__name__}")


def _detached(tree):
    """aux with its tensors detached (what func returned beside the output, seen from outside the transform)."""
    if _C._is_cpp_tensor(tree):
        return tree.detach()
    if isinstance(tree, (tuple, list)):
        return type(tree)(_detached(t) for t in tree)
    if isinstance(tree, dict):
        return {k: _detached(v) for k, v in tree.items()}
    return tree


def _flatten_or_empty(tree):
    try:
        return _flatten(tree)[0]
    except TypeError:  # (a non-tensor argument)
        return []


def _track(args, argnums):
    """args with the ones argnums names replaced by copies that require grad, and those copies' leaves."""
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    args = list(args)
    tracked = []
    for n in nums:
        if not -len(args) <= n < len(args):
            raise RuntimeError(f"Got argnums={argnums}, but only {len(args)} positional inputs")
        leaves, build = _flatten(args[n])
        # A leaf that already requires grad (an outer grad's input) is aliased, so the outer graph sees through
        # this one; any other becomes a fresh leaf.
        fresh = [(leaf.view_as(leaf) if leaf.requires_grad else leaf.detach().requires_grad_(True))
                 if leaf.is_floating_point() else leaf for leaf in leaves]
        args[n] = build(fresh)
        tracked.append((fresh, build))
    return args, tracked, single


def grad_and_value(func, argnums=0, has_aux=False):
    """The gradient of func's scalar output with respect to the arguments argnums names, and the output (with
    has_aux: func returns (output, aux), and the value is (output, aux))."""
    def wrapper(*args, **kwargs):
        with trainrun.enable_grad():
            tracked_args, tracked, single = _track(args, argnums)
            result = func(*tracked_args, **kwargs)
            output, aux = (result if has_aux else (result, None))
            if has_aux and not (isinstance(result, tuple) and len(result) == 2):
                raise RuntimeError("grad_and_value(f)(*args): output of function f should be a tuple: (output, aux) "
                                   "if has_aux is True")
            if not _C._is_cpp_tensor(output) or output.numel() != 1:
                raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                                   f"{type(output).__name__}" + (f" of shape {list(output.shape)}"
                                                                 if _C._is_cpp_tensor(output) else ""))
            leaves = [leaf for fresh, _ in tracked for leaf in fresh]
            outer = any(leaf.requires_grad for a in args for leaf in _flatten_or_empty(a))  # (a transform above)
            grads = trainrun.autograd.grad(output, leaves, create_graph=outer, allow_unused=True)
        grads = [g if g is not None else trainrun.zeros_like(leaf) for g, leaf in zip(grads, leaves)]
        out, i = [], 0
        for fresh, build in tracked:
            out.append(build(grads[i:i + len(fresh)]))
            i += len(fresh)
        gradient = out[0] if single else tuple(out)
        value = output if outer else output.detach()
        if has_aux and not outer:
            aux = _detached(aux)
        return gradient, ((value, aux) if has_aux else value)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """torch.func.grad: the gradient of func's scalar output (with has_aux, (gradient, aux))."""
    both = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        gradient, value = both(*args, **kwargs)
        return (gradient, value[1]) if has_aux else gradient
    return wrapper


def vjp(func, *primals, has_aux=False):
    """torch.func.vjp: (func(*primals), vjp_fn), where vjp_fn(cotangents) gives the vector-Jacobian products for
    each primal."""
    with trainrun.enable_grad():
        args, tracked, _ = _track(primals, tuple(range(len(primals))))
        result = func(*args)
        output, aux = (result if has_aux else (result, None))
    out_leaves, _ = _flatten(output)
    leaves = [leaf for fresh, _ in tracked for leaf in fresh]

    def vjp_fn(cotangents):
        cot_leaves, _ = _flatten(cotangents)
        if len(cot_leaves) != len(out_leaves):
            raise RuntimeError(f"Expected {len(out_leaves)} cotangents, got {len(cot_leaves)}")
        grads = trainrun.autograd.grad(out_leaves, leaves, grad_outputs=cot_leaves, retain_graph=True,
                                       allow_unused=True)
        grads = [g if g is not None else trainrun.zeros_like(leaf) for g, leaf in zip(grads, leaves)]
        out, i = [], 0
        for fresh, build in tracked:
            out.append(build(grads[i:i + len(fresh)]))
            i += len(fresh)
        return tuple(out)

    detached = _flatten(output)[1]([t.detach() for t in out_leaves])
    return (detached, vjp_fn, aux) if has_aux else (detached, vjp_fn)


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """torch.func.jacrev: the Jacobian of func's (tensor) output with respect to argument argnums, of shape
    output.shape + input.shape, a row at a time by vector-Jacobian products (so chunk_size, PyTorch's bound on
    the rows computed at once, holds for any value)."""
    if not isinstance(argnums, int):
        raise NotImplementedError("jacrev: argnums as a tuple is not supported; pass one argument index")

    def wrapper(*args):
        def bound(x):
            full = list(args)
            full[argnums] = x
            return func(*full)
        result = vjp(bound, args[argnums], has_aux=has_aux)
        output, fn = result[0], result[1]
        if not _C._is_cpp_tensor(output):
            raise NotImplementedError("jacrev: func must return one tensor")
        rows = []
        flat = output.reshape(-1)
        for i in range(flat.numel()):
            basis = trainrun.zeros_like(flat)
            basis[i] = 1.0
            rows.append(fn(basis.reshape(output.shape))[0])
        x = args[argnums]
        jac = trainrun.stack(rows).reshape(tuple(output.shape) + tuple(x.shape)) if rows else \
            trainrun.zeros(tuple(output.shape) + tuple(x.shape), dtype=x.dtype)
        return (jac, result[2]) if has_aux else jac
    return wrapper
