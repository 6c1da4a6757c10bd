"""Factories with PyTorch's calling conventions: sizes as varargs or one
tuple/list/Size (`zeros(2, 3)`, `zeros((2, 3))`), and the keywords dtype=,
device=, requires_grad= (and generator= where PyTorch takes one; only None
is accepted for the tensor draws, which use trainrun's generator)."""
import numbers

from trainrun import _C, _memory_format


def _size(args, where, size=None):
    """The size a factory was given: *ints, one sequence of ints, or size= (not both)."""
    if size is not None:
        if args:
            raise TypeError(f"{where}() got its size both positionally and as size=")
        args = (size,)
    if not args:
        raise TypeError(f"{where}() missing its size (ints, or one tuple of ints: () for a 0-dim tensor)")
    if len(args) == 1 and not isinstance(args[0], numbers.Integral):
        args = args[0]
    try:
        size = [int(s) for s in args]
    except (TypeError, ValueError):
        raise TypeError(f"{where}(): size must be ints or one tuple of ints, got {args!r}") from None
    for s, given in zip(size, args):
        if isinstance(given, bool) or not isinstance(given, numbers.Integral):
            raise TypeError(f"{where}(): size must be ints or one tuple of ints, got {args!r}")
        if s < 0:
            raise ValueError(f"{where}(): negative dimension {s} in size {tuple(size)}")
    return size


def _finish(t, requires_grad):
    if requires_grad:
        t.requires_grad_(True)
    return t


def _drawn(generator, fill, shape, dtype, device, default_dtype):
    """A new tensor filled by fill(tensor, C++ generator) from a trainrun.Generator (PyTorch's draws for its
    seed, as the default generator's)."""
    from trainrun._generator import _cpp_of
    t = _C.empty(shape, dtype if dtype is not None else default_dtype,
                 device if device is not None else _C._get_default_device())
    fill(t, _cpp_of(generator, "random factory"))
    return t


def zeros(*args, size=None, out=None, dtype=None, device=None, requires_grad=False):
    if out is not None:
        raise NotImplementedError("zeros(out=...) is not supported; use out.zero_()")
    return _finish(_C.zeros(_size(args, "zeros", size), dtype, device), requires_grad)


def ones(*args, size=None, out=None, dtype=None, device=None, requires_grad=False):
    if out is not None:
        raise NotImplementedError("ones(out=...) is not supported; use out.fill_(1)")
    return _finish(_C.ones(_size(args, "ones", size), dtype, device), requires_grad)


def empty(*args, size=None, out=None, dtype=None, device=None, requires_grad=False, pin_memory=False,
          memory_format=None):
    if out is not None:
        raise NotImplementedError("empty(out=...) is not supported")
    t = _memory_format.apply(_C.empty(_size(args, "empty", size), dtype, device), memory_format)
    if pin_memory:
        t = t.pin_memory()
    return _finish(t, requires_grad)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """An uninitialized tensor of `size` laid out with `stride` (its storage spans the furthest element)."""
    size, stride = [int(s) for s in size], [int(s) for s in stride]
    if len(size) != len(stride):
        raise RuntimeError(f"empty_strided: mismatch in length of strides and shape ({len(stride)} strides for "
                           f"{len(size)} dims)")
    if any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise RuntimeError(f"empty_strided: negative size or stride (size {size}, stride {stride})")
    extent = 0 if 0 in size else 1 + sum((s - 1) * st for s, st in zip(size, stride))
    base = _C.empty([extent], dtype, device)
    if pin_memory:
        base = base.pin_memory()
    return _finish(_C._ops.as_strided(base, size, stride, 0), requires_grad)


def full(size, fill_value, *, out=None, dtype=None, device=None, requires_grad=False):
    if out is not None:
        raise NotImplementedError("full(out=...) is not supported; use out.fill_(value)")
    if dtype is None and isinstance(fill_value, bool):
        dtype = _C.dtype.bool
    elif dtype is None and isinstance(fill_value, numbers.Integral):
        dtype = _C.dtype.int64  # PyTorch infers int64 from an int fill value
    return _finish(_C.full(_size((size,), "full"), fill_value, dtype, device), requires_grad)


def rand(*args, size=None, generator=None, out=None, dtype=None, device=None, requires_grad=False):
    if generator is not None:
        return _finish(_drawn(generator, lambda t, g: _C._ops.uniform_(t, 0.0, 1.0, g), _size(args, "rand", size),
                              dtype, device, _C._ops.get_default_dtype()), requires_grad)
    return _finish(_C.rand(_size(args, "rand", size), dtype, device), requires_grad)


def randn(*args, size=None, generator=None, out=None, dtype=None, device=None, requires_grad=False):
    if generator is not None:
        return _finish(_drawn(generator, lambda t, g: _C._ops.normal_(t, 0.0, 1.0, g), _size(args, "randn", size),
                              dtype, device, _C._ops.get_default_dtype()), requires_grad)
    return _finish(_C.randn(_size(args, "randn", size), dtype, device), requires_grad)


def randint(*args, size=None, generator=None, dtype=None, device=None, requires_grad=False):
    """randint(high, size) or randint(low, high, size), as PyTorch's."""
    if size is not None:
        args = args + (size,)
    if len(args) == 2:
        low, (high, size) = 0, args
    elif len(args) == 3:
        low, high, size = args
    else:
        raise TypeError("randint(): expected (high, size) or (low, high, size)")
    if generator is not None:
        return _finish(_drawn(generator, lambda t, g: _C._ops.random_(t, int(low), int(high), g),
                              _size((size,), "randint"), dtype, device, _C.dtype.int64), requires_grad)
    return _finish(_C.randint(int(low), int(high), _size((size,), "randint"), dtype, device), requires_grad)


def _like(maker, t, dtype, device, requires_grad, memory_format, *extra):
    """maker's tensor of t's shape, dtype and device (unless given), laid out as t (preserve_format, the default)
    or as memory_format says."""
    made = maker(list(t.shape), *extra, dtype if dtype is not None else t.dtype,
                 device if device is not None else t.device)
    layout = _memory_format.preserve_format if memory_format is None else memory_format
    return _finish(_memory_format.apply(made, layout, t), requires_grad)


def zeros_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):  # noqa: A002
    return _like(_C.zeros, input, dtype, device, requires_grad, memory_format)


def ones_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):  # noqa: A002
    return _like(_C.ones, input, dtype, device, requires_grad, memory_format)


def empty_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):  # noqa: A002
    return _like(_C.empty, input, dtype, device, requires_grad, memory_format)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False, memory_format=None):  # noqa: A002
    return _like(_C.full, input, dtype, device, requires_grad, memory_format, fill_value)


def rand_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):  # noqa: A002
    return _like(_C.rand, input, dtype, device, requires_grad, memory_format)


def randn_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):  # noqa: A002
    return _like(_C.randn, input, dtype, device, requires_grad, memory_format)


def linspace(start, end, steps, *, out=None, dtype=None, device=None, requires_grad=False):
    if out is not None:
        raise NotImplementedError("linspace(out=...) is not supported")
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 0:
        raise ValueError(f"linspace(): steps must be a non-negative int, got {steps!r}")
    return _finish(_C.linspace(float(start), float(end), int(steps), dtype, device), requires_grad)


def arange(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """Values from start (0 when only one bound is given) up to end, step apart; PyTorch's keywords."""
    if out is not None:
        raise NotImplementedError("arange(out=...) is not supported; assign the result")
    return _finish(_C.arange(start, end, step, dtype, device), requires_grad)


def eye(n, m=None, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The n x m (m = n by default) identity; PyTorch's keywords."""
    if out is not None:
        raise NotImplementedError("eye(out=...) is not supported; assign the result")
    return _finish(_C.eye(n, m, dtype, device), requires_grad)
