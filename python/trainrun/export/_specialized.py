"""Non-tensor inputs of export (an int, float, bool, str or None the forward takes): as torch.export does, the
program is specialized to the example's value. The recording sees a forward of the tensor inputs alone (the value
goes back into each call), and calling the program with another value is refused, naming the input."""
from trainrun import _C

_SPECIALIZABLE = (bool, int, float, str, type(None))


def _specialized_inputs(names, given, num_args):
    """[(position, or None for a keyword input; name; value)] of the non-tensor inputs. TypeError for an input
    that is neither a tensor nor such a value."""
    out = []
    for i, (name, value) in enumerate(zip(names, given)):
        if _C._is_cpp_tensor(value):
            continue
        if not isinstance(value, _SPECIALIZABLE):
            raise TypeError(f"export: input '{name}' is a {type(value).__name__}; inputs must be tensors or numbers, "
                            "strings, bools and None (which the program is specialized to)")
        out.append((i if i < num_args else None, name, value))
    return out


def _without_specialized(dynamic_shapes, names, specialized):
    """dynamic_shapes with the specialized inputs' entries left out (each must be None: a number has no dims)."""
    if dynamic_shapes is None:
        return None
    fixed = {name for _, name, _ in specialized}
    if isinstance(dynamic_shapes, dict):
        entries = dynamic_shapes.items()
    elif isinstance(dynamic_shapes, (tuple, list)) and len(dynamic_shapes) == len(names):
        entries = list(zip(names, dynamic_shapes))
    else:
        return dynamic_shapes  # (one entry per tensor input already, or wrong: _dynamic_dims says which)
    for name, spec in entries:
        if name in fixed and spec is not None:
            raise ValueError(f"export: dynamic_shapes gives {spec!r} for input '{name}', which is not a tensor; "
                             "give None")
    kept = [(name, spec) for name, spec in entries if name not in fixed]
    return dict(kept) if isinstance(dynamic_shapes, dict) else type(dynamic_shapes)(spec for _, spec in kept)


class _SpecializedCall:
    """mod called with the tensor inputs alone: the specialized values go back in their places."""

    def __init__(self, mod, args, kwargs, specialized):
        self._mod, self._num_args = mod, len(args)
        self._positional = {pos: value for pos, _, value in specialized if pos is not None}
        self._keywords = {name: value for pos, name, value in specialized if pos is None}
        self.__name__ = type(mod).__name__

    def __call__(self, *tensor_args, **tensor_kwargs):
        it = iter(tensor_args)
        args = [self._positional[i] if i in self._positional else next(it) for i in range(self._num_args)]
        return self._mod(*args, **self._keywords, **tensor_kwargs)

    def buffers(self):
        return self._mod.buffers() if hasattr(self._mod, "buffers") else iter(())


def _check_specialized(specialized, args, kwargs):
    """(args, kwargs) of a call without its specialized inputs, each checked against its exported value."""
    args, kwargs = list(args), dict(kwargs)
    for pos, name, value in sorted(specialized, key=lambda s: -1 if s[0] is None else s[0], reverse=True):
        if pos is not None and pos < len(args):
            given = args.pop(pos)
        elif name in kwargs:
            given = kwargs.pop(name)
        else:
            raise TypeError(f"ExportedProgram: input '{name}' is missing (the program was exported with "
                            f"{name}={value!r})")
        if type(given) is not type(value) or given != value:
            raise RuntimeError(f"ExportedProgram: input '{name}' is {given!r}; the program was exported with "
                               f"{name}={value!r} (a non-tensor input is specialized: export again for another)")
    return tuple(args), kwargs
