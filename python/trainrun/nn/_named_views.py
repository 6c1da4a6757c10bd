"""module._modules, module._parameters and module._buffers as PyTorch's dicts: live views of the module's own
children, parameters and buffers by name (the registry stays in C++). Reading iterates the registry;
setting an entry registers it as assignment does (a parameter set to None reads back as None); deleting one
removes it."""
from collections.abc import MutableMapping


class NamedView(MutableMapping):
    def __init__(self, module, kind):
        self._module, self._kind = module, kind

    def _entries(self):
        m = self._module
        if self._kind == "modules":
            return dict(m.named_children())
        if self._kind == "parameters":
            entries = dict(m.named_parameters(recurse=False))
            entries.update({k: None for k, v in m.__dict__.items() if v is None and k not in entries and
                            k in m.__dict__.get("_none_parameters", ())})
            return entries
        return dict(m.named_buffers(recurse=False))

    def __getitem__(self, name):
        return self._entries()[name]

    def __setitem__(self, name, value):
        if self._kind == "parameters":
            if name in self._entries() and value is None:
                self._remove(name)
            self._module.register_parameter(name, value)
        elif self._kind == "buffers":
            self._module.register_buffer(name, value)
        else:
            setattr(self._module, name, value)

    def __delitem__(self, name):
        if name not in self._entries():
            raise KeyError(name)
        self._remove(name)

    def _remove(self, name):
        try:
            delattr(self._module, name)
        except AttributeError:
            raise NotImplementedError(f"{type(self._module).__name__}: '{name}' belongs to the C++ layer, which "
                                      "cannot drop it") from None

    def __iter__(self):
        return iter(list(self._entries()))

    def __len__(self):
        return len(self._entries())

    def __repr__(self):
        return f"OrderedDict({list(self._entries().items())!r})"


def install(module_class):
    module_class._modules = property(lambda self: NamedView(self, "modules"))
    module_class._parameters = property(lambda self: NamedView(self, "parameters"))
    module_class._buffers = property(lambda self: NamedView(self, "buffers"))
