"""trainrun.autograd.functional, as torch.autograd.functional: jacobian, hessian, vjp, jvp, vhp and hvp of a
function of tensors, built on autograd.grad (reverse mode; jvp by the double-backward trick). Inputs and outputs
may be one tensor or a tuple of them, and the results follow PyTorch's nesting: a jacobian of a tuple of
outputs by a tuple of inputs is a tuple (per output) of tuples (per input), each of shape output + input."""
from trainrun import _C
from trainrun._autograd import enable_grad


def _as_tuple(x, arg, fn):
    if _C._is_cpp_tensor(x):
        return (x,), False
    if isinstance(x, (tuple, list)) and all(_C._is_cpp_tensor(t) for t in x):
        return tuple(x), True
    raise TypeError(f"The {arg} given to {fn} must be either a Tensor or a tuple of Tensors but the value at "
                    f"index 0 has type {type(x).__name__}.")


def _prepared(inputs, create_graph):
    """Inputs that require grad: the same values, detached unless create_graph keeps their history."""
    return tuple(t.view_as(t) if create_graph and t.requires_grad else t.detach().requires_grad_() for t in inputs)


def _grad(outputs, inputs, grad_outputs, create_graph, strict, fn):
    """autograd.grad with zeros (or, strict, an error) for an input an output does not depend on."""
    from trainrun.autograd import grad
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        grads = (None,) * len(inputs)
    else:
        grads = grad([o for o, _ in pairs], list(inputs), [g for _, g in pairs], retain_graph=True,
                     create_graph=create_graph, allow_unused=True)
    result = []
    for i, (g, x) in enumerate(zip(grads, inputs)):
        if g is None:
            if strict:
                raise RuntimeError(f"{fn}: the output of the user-provided function is independent of input {i}. "
                                   "This is not allowed in strict mode.")
            g = _C.zeros(list(x.shape), dtype=x.dtype)
        result.append(g)
    return tuple(result)


def _vector(v, like, fn, what):
    """v as a tuple of tensors; None stands for ones where `like` (the outputs or inputs) are single elements."""
    if v is not None:
        return _as_tuple(v, "v", fn)[0]
    if any(t.numel() != 1 for t in like):
        raise RuntimeError(f"{fn}: v can only be None if the {what} has a single element")
    return tuple(_C.ones(list(t.shape), dtype=t.dtype) for t in like)


def _finish(values, create_graph):
    return tuple(v if create_graph else v.detach() for v in values)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product; v may be omitted for a one-element output."""
    inputs, in_tuple = _as_tuple(inputs, "inputs", "vjp")
    with enable_grad():
        xs = _prepared(inputs, create_graph)
        out = func(*xs)
        outs, out_tuple = _as_tuple(out, "outputs of the user-provided function", "vjp")
        vs = _vector(v, outs, "vjp", "output of the function")
        result = _grad(outs, xs, vs, create_graph, strict, "vjp")
    outs = _finish(outs, create_graph)
    return (outs if out_tuple else outs[0]), (_finish(result, create_graph) if in_tuple else
                                              _finish(result, create_graph)[0])


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product, by differentiating v^T J with respect to v."""
    inputs, in_tuple = _as_tuple(inputs, "inputs", "jvp")
    vs = _vector(v, inputs, "jvp", "input to the function")
    with enable_grad():
        xs = _prepared(inputs, create_graph)
        outs, out_tuple = _as_tuple(func(*xs), "outputs of the user-provided function", "jvp")
        dummies = tuple(_C.zeros(list(o.shape), dtype=o.dtype).requires_grad_() for o in outs)
        grads = _grad(outs, xs, dummies, True, strict, "jvp")
        result = _grad(grads, dummies, vs, create_graph, strict, "jvp")
    outs = _finish(outs, create_graph)
    result = _finish(result, create_graph)
    return (outs if out_tuple else outs[0]), (result if out_tuple else result[0])


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian, a row of vector-Jacobian products per output element: shape output.shape + input.shape."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(f"jacobian: strategy must be 'reverse-mode' or 'forward-mode', got {strategy!r}")
    inputs, in_tuple = _as_tuple(inputs, "inputs", "jacobian")
    with enable_grad():
        xs = _prepared(inputs, create_graph)
        outs, out_tuple = _as_tuple(func(*xs), "outputs of the user-provided function", "jacobian")
        per_output = []
        for o in outs:
            rows = [[] for _ in xs]
            flat = o.reshape(-1)
            for k in range(flat.numel()):
                one_hot = _C.zeros([flat.numel()], dtype=o.dtype)
                one_hot[k] = 1.0
                grads = _grad((flat,), xs, (one_hot,), create_graph, strict, "jacobian")
                for i, g in enumerate(grads):
                    rows[i].append(g)
            blocks = []
            for i, x in enumerate(xs):
                block = _C.stack(rows[i]) if rows[i] else _C.zeros([0] + list(x.shape), dtype=x.dtype)
                block = block.reshape(list(o.shape) + list(x.shape))
                blocks.append(block if create_graph else block.detach())
            per_output.append(tuple(blocks) if in_tuple else blocks[0])
    return tuple(per_output) if out_tuple else per_output[0]


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a function with one-element output: the Jacobian of its gradient."""
    inputs, in_tuple = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*xs):
        out = func(*xs)
        outs, _ = _as_tuple(out, "outputs of the user-provided function", "hessian")
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError("hessian: the function given to hessian should return a single Tensor with one "
                               "element")
        grads = _grad(outs, xs, (_C.ones(list(outs[0].shape), dtype=outs[0].dtype),), True, strict, "hessian")
        return grads if in_tuple else grads[0]
    return jacobian(gradient, inputs if in_tuple else inputs[0], create_graph=create_graph, strict=strict)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H) for a function with one-element output."""
    inputs, in_tuple = _as_tuple(inputs, "inputs", "vhp")
    vs = _vector(v, inputs, "vhp", "input to the function")
    with enable_grad():
        xs = _prepared(inputs, create_graph)
        outs, _ = _as_tuple(func(*xs), "outputs of the user-provided function", "vhp")
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError("vhp: the function given to vhp should return a single Tensor with one element")
        grads = _grad(outs, xs, (_C.ones(list(outs[0].shape), dtype=outs[0].dtype),), True, strict, "vhp")
        result = _grad(grads, xs, vs, create_graph, strict, "vhp")
    out = _finish(outs, create_graph)[0]
    result = _finish(result, create_graph)
    return out, (result if in_tuple else result[0])


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v): for the symmetric Hessian of a twice-differentiable function, v^T H transposed."""
    return vhp(func, inputs, v, create_graph, strict)
