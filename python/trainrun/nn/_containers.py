"""Containers, as torch.nn's: Sequential, ModuleList, ModuleDict,
ParameterList, ParameterDict. Their entries are registered as children or
parameters under their index or key, so state_dict keys read as PyTorch's
("0.weight", "layers.fc.bias")."""
import collections

from trainrun import _C
from trainrun.nn._module import Module
from trainrun.nn.parameter import Parameter


class Sequential(Module):
    """Modules run in order, each on the previous one's output. Children are named "0", "1", ..., or by the
    keys of an OrderedDict."""

    def __init__(self, *args):
        super().__init__()
        object.__setattr__(self, "_order", [])
        if len(args) == 1 and isinstance(args[0], collections.OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def add_module(self, name, module):
        setattr(self, name, module)
        if name not in self._order:
            self._order.append(name)

    def append(self, module):
        self.add_module(str(len(self._order)), module)
        return self

    def extend(self, sequential):
        for module in sequential:
            self.append(module)
        return self

    def _renumber(self, modules):
        """The children as `modules`, named "0", "1", ... again (after insert/pop)."""
        for name in list(self._order):
            self._unregister(name)
            self._children_py.pop(name, None)
        self._order.clear()
        for module in modules:
            self.append(module)

    def insert(self, index, module):
        n = len(self._order)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        modules = [self._children_py[name] for name in self._order]
        modules.insert(index % (n + 1) if index < 0 else index, module)
        self._renumber(modules)
        return self

    def pop(self, key):
        modules = [self._children_py[name] for name in self._order]
        popped = modules.pop(key)
        self._renumber(modules)
        return popped

    def forward(self, input):  # noqa: A002
        for name in self._order:
            input = self._children_py[name](input)  # noqa: A001
        return input

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Sequential(collections.OrderedDict((n, self._children_py[n]) for n in self._order[i]))
        return self._children_py[self._order[i]]

    def __setitem__(self, i, module):
        """model[i] = module: the i-th child replaced, under its name."""
        self.add_module(self._order[_int_index(i, len(self._order), "Sequential")], module)

    def __delitem__(self, i):
        """The children at i removed; the rest renamed "0", "1", ..., as PyTorch's."""
        names = self._order[i] if isinstance(i, slice) else [self._order[_int_index(i, len(self._order),
                                                                                      "Sequential")]]
        self._renumber([self._children_py[n] for n in self._order if n not in names])

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        return Sequential(*self, *other)

    def __iadd__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        return self.extend(other)

    def __len__(self):
        return len(self._order)

    def __iter__(self):
        return (self._children_py[n] for n in self._order)


def _int_index(i, n, where):
    if isinstance(i, bool) or not hasattr(i, "__index__"):
        raise TypeError(f"{where} indices must be integers, not {type(i).__name__}")
    i = int(i)
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of range")
    return i % n


class ModuleList(Module):
    """Modules held in a list and registered as children "0", "1", ...; it has no forward. The children are the
    list: layers[i] = m, register_module("3", m) and setattr(layers, "3", m) all replace entry 3."""

    def __init__(self, modules=None):
        super().__init__()
        for m in modules or []:
            self.append(m)

    def _entries(self):
        return [self._children_py[str(i)] for i in range(len(self))]

    def append(self, module):
        setattr(self, str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, i):
        if isinstance(i, slice):
            return ModuleList(self._entries()[i])
        return self._children_py[str(_int_index(i, len(self), "ModuleList"))]

    def __setitem__(self, i, module):
        """layers[i] = module: the i-th child replaced, under its name (checkpoint wrappers, swapped blocks)."""
        setattr(self, str(_int_index(i, len(self), "ModuleList")), module)

    def __len__(self):
        return len(self.__dict__.get("_children_py", ()))

    def __iter__(self):
        return iter(self._entries())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList(self._entries() + list(other))

    def _renumber(self, modules):
        for name in range(len(self)):
            self._unregister(str(name))
            self._children_py.pop(str(name), None)
        self.extend(modules)

    def insert(self, index, module):
        modules = self._entries()
        modules.insert(index, module)
        self._renumber(modules)

    def pop(self, key):
        modules = self._entries()
        popped = modules.pop(key)
        self._renumber(modules)
        return popped

    def __delitem__(self, index):
        modules = self._entries()
        del modules[index]
        self._renumber(modules)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward: call its modules")


class _Keyed:
    """The mapping methods ModuleDict and ParameterDict share; entries keep insertion order in _keys."""

    def __contains__(self, key):
        return key in self._keys

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(list(self._keys))

    def keys(self):
        return list(self._keys)

    def values(self):
        return [self[k] for k in self._keys]

    def items(self):
        return [(k, self[k]) for k in self._keys]

    def update(self, entries):
        for k, v in (entries.items() if hasattr(entries, "items") else entries):
            self[k] = v

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward: use its entries")


class ModuleDict(_Keyed, Module):
    """Modules held by name (insertion order), registered as children under their keys."""

    def __init__(self, modules=None):
        Module.__init__(self)
        object.__setattr__(self, "_keys", [])
        if modules is not None:
            self.update(modules)

    def __setitem__(self, key, module):
        setattr(self, key, module)
        if key not in self._keys:
            self._keys.append(key)

    def __getitem__(self, key):
        return self._children_py[key]

    def __delitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        delattr(self, key)
        self._keys.remove(key)

    def pop(self, key):
        module = self[key]
        del self[key]
        return module


def _as_parameter(value):
    return value if isinstance(value, Parameter) else Parameter(value)


class ParameterList(Module):
    """Parameters held in a list, registered as "0", "1", ..."""

    def __init__(self, values=None):
        super().__init__()
        object.__setattr__(self, "_size", 0)
        for v in values or []:
            self.append(v)

    def append(self, value):
        p = _as_parameter(value)
        self.register_parameter(str(self._size), p, p.requires_grad)
        object.__setattr__(self, "_size", self._size + 1)
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(self._size)[i]]
        if not -self._size <= i < self._size:
            raise IndexError(f"ParameterList index {i} out of range ({self._size} parameters)")
        return getattr(self, str(i % self._size))  # (a Parameter, or the DTensor of a sharded one)

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(self._size))

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterList has no forward")


class ParameterDict(_Keyed, Module):
    """Parameters held by name (insertion order)."""

    def __init__(self, parameters=None):
        Module.__init__(self)
        object.__setattr__(self, "_keys", [])
        if parameters is not None:
            self.update(parameters)

    def __setitem__(self, key, value):
        p = _as_parameter(value)
        self.register_parameter(key, p, p.requires_grad)
        if key not in self._keys:
            self._keys.append(key)

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)  # (a Parameter)


del _C
