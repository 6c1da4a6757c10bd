"""trainrun.ops: operators by namespace, as torch.ops. `trainrun.ops.mylib.mysin`
is the custom op "mylib::mysin" (trainrun.library), with `.default` its one
overload; `trainrun.ops.aten.<name>` reaches the built-in op of that name
(every overload, `.Tensor`, `.Scalar`, `.default`..., is the same function:
trainrun's functions take every form)."""
import types


class OpOverload:
    def __init__(self, packet, overload):
        self._packet, self._overloadname = packet, overload
        self._custom_op = packet._custom_op
        self._opname = packet._name  # as torch's: "addmm"; __name__ "addmm.default"
        self.__name__ = f"{packet._name}.{overload}"

    def name(self):
        """'aten::addmm' (the default overload), 'aten::add.Tensor' (another), as torch's."""
        qualified = self._packet._qualified
        return qualified if self._overloadname == "default" else f"{qualified}.{self._overloadname}"

    @property
    def _schema(self):
        return f"{self._packet._qualified}{self._custom_op._schema}" if self._custom_op else self._packet._qualified

    def __call__(self, *args, **kwargs):
        if self._packet._namespace == "aten" and self._custom_op is None:
            return _call_aten(self._packet._name, self._packet._fn, args, kwargs)
        return self._packet._fn(*args, **kwargs)

    def __repr__(self):
        return f"{self._packet._namespace}.{self._packet._name}.{self._overloadname}"


_SCHEMAS = {}


def _schema_of(name):
    """(positional argument count, keyword-only names, number of returns) of the op list's schema of `name`,
    or None for an op the list does not have."""
    if not _SCHEMAS:
        from trainrun import _C
        for entry in _C._op_list():
            _SCHEMAS[entry["name"]] = entry["schema"]
    schema = _SCHEMAS.get(name)
    if schema is None:
        return None
    inside = schema[schema.index("(") + 1:schema.index(") ->")]
    returns = schema[schema.index(") ->") + 4:].strip()
    positional, keyword, star = 0, [], False
    for part in [p.strip() for p in inside.split(",") if p.strip()]:
        if part == "*":
            star = True
        elif star:
            keyword.append(part.split()[-1].split("=")[0])
        else:
            positional += 1
    n_returns = returns.count(",") + 1 if returns.startswith("(") else 1
    return positional, keyword, n_returns


def _call_aten(name, fn, args, kwargs):
    """A node of a recorded program (its arguments in the dispatcher's order, all positional) as a call of
    trainrun's function for the op: the schema's keyword-only arguments by name; a function that returns fewer
    results than the schema (layer_norm's output without its mean and rstd) gives None for the others."""
    schema = _schema_of(name)
    if name in ("addmm", "baddbmm", "addbmm", "addmv") and args and args[0] is None:
        from trainrun import _C  # (recorded with beta=0 and no input: a zero to add)
        args = (_C.zeros([], dtype=args[1].dtype, device=args[1].device),) + tuple(args[1:])
    if schema is not None:
        positional, keyword, n_returns = schema
        if len(args) > positional:
            extra = dict(zip(keyword, args[positional:]))
            args, kwargs = args[:positional], {**extra, **kwargs}
        kwargs.pop("out", None)
        result = fn(*args, **kwargs)
        if n_returns > 1 and not isinstance(result, (tuple, list)):
            return (result,) + (None,) * (n_returns - 1)
        return result
    return fn(*args, **kwargs)


class OpOverloadPacket:
    def __init__(self, namespace, name, fn, custom_op=None):
        self._namespace, self._name, self._fn, self._custom_op = namespace, name, fn, custom_op
        self._qualified = f"{namespace}::{name}"
        self.default = OpOverload(self, "default")

    def __getattr__(self, overload):
        if overload.startswith("__"):
            raise AttributeError(overload)
        if self._custom_op is not None:
            raise AttributeError(f"The underlying op of '{self}' has no overload name '{overload}'")
        return OpOverload(self, overload)  # aten overloads: one trainrun function takes them all

    def overloads(self):
        return ["default"]

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __repr__(self):
        return f"{self._namespace}.{self._name}"


class HigherOrderOperator:
    """torch.ops.higher_order.<name>: an operator that takes functions (cond's branches), callable as the function
    trainrun has for it; the target of its node in a recorded program's graph."""
    _packet = None  # (named as an op: torch.ops.higher_order.<name>)

    def __init__(self, name, fn):
        self.__name__, self._fn = name, fn

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __repr__(self):
        return f"higher_order.{self.__name__}"


_HIGHER_ORDER = {"cond": lambda: __import__("trainrun").cond}


class _Namespace(types.ModuleType):
    def __init__(self, name):
        super().__init__(f"trainrun.ops.{name}")
        self._ns = name

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if self._ns == "aten":
            import trainrun
            import trainrun.nn.functional as F
            fn = getattr(trainrun, name, None) or getattr(F, name, None) or getattr(trainrun.Tensor, name, None)
            if fn is None:
                raise AttributeError(f"'_OpNamespace' 'aten' object has no attribute '{name}'")
            packet = OpOverloadPacket("aten", name, fn)
            setattr(self, name, packet)
            return packet
        if self._ns == "c10d_functional":
            from trainrun.distributed._c10d_functional_ops import OPS
            if name in OPS:
                packet = OpOverloadPacket("c10d_functional", name, OPS[name])
                setattr(self, name, packet)  # (one object per op: CommDebugMode's counts are keyed by it)
                return packet
        if self._ns == "higher_order" and name in _HIGHER_ORDER:
            op = HigherOrderOperator(name, _HIGHER_ORDER[name]())
            setattr(self, name, op)
            return op
        raise AttributeError(f"'_OpNamespace' '{self._ns}' object has no attribute '{name}' (no custom op "
                             f"'{self._ns}::{name}' is registered)")


class _Ops(types.ModuleType):
    def __init__(self):
        super().__init__("trainrun.ops")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        ns = _Namespace(name)
        setattr(self, name, ns)
        return ns


ops = _Ops()


def _add(custom_op):
    """Makes a custom op reachable as ops.<namespace>.<name>."""
    ns = getattr(ops, custom_op._namespace)
    setattr(ns, custom_op._name, OpOverloadPacket(custom_op._namespace, custom_op._name, custom_op, custom_op))


def _remove(custom_op):
    """Undoes _add (a Library's definitions leave with it)."""
    ns = getattr(ops, custom_op._namespace)
    if isinstance(ns.__dict__.get(custom_op._name), OpOverloadPacket):
        delattr(ns, custom_op._name)
