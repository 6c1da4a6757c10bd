"""trainrun.optim: SGD, Adam, AdamW (fused one-pass update) and LR schedulers,
as PyTorch's: params may be tensors or a list of param-group dicts whose keys
override the constructor's defaults, and `param_groups` is a list of
dict-like groups whose options ('lr', 'momentum', 'betas', ...) can be read
and set while training, as schedulers and scripts do."""
from collections.abc import MutableMapping

import collections.abc

from trainrun import _C
from trainrun.optim import _state_dict_hooks, _step_hooks
from trainrun.optim._local_params import local_params, local_state, state_as_dtensors

# PyTorch's option names that trainrun's C++ optimizers keep under other names.
_BETAS = ("beta1", "beta2")
_BOOLEAN = {"nesterov", "amsgrad", "maximize", "fused"}
# Options PyTorch's optimizers have and trainrun's C++ ones do not (not kept as a group's own keys on load).
_PYTORCH_ONLY_OPTIONS = {"foreach", "capturable", "differentiable", "fused", "maximize", "dampening"}


def _group_extras(optimizer, index):
    """The keys of param group `index` that are not options of the C++ optimizer ('initial_lr' that
    schedulers add, a script's own 'name' or 'lr_scale'): kept here, in the group as PyTorch keeps them."""
    extras = optimizer.__dict__.setdefault("_group_extras", [])
    while len(extras) <= index:
        extras.append({})
    return extras[index]


class _ParamGroup(MutableMapping):
    """One param group: 'params' and its options, read and written through to the optimizer; keys the C++
    optimizer does not have are kept beside it."""

    def __init__(self, optimizer, index):
        self._optimizer, self._index = optimizer, index

    def _options(self):
        return _C.optim.Optimizer._group_options(self._optimizer, self._index)

    def _extras(self):
        return _group_extras(self._optimizer, self._index)

    def __getitem__(self, key):
        if key == "params":
            return _C.optim.Optimizer._group_params(self._optimizer, self._index)
        options = self._options()
        if key == "betas" and all(b in options for b in _BETAS):
            return (options["beta1"], options["beta2"])
        if key not in options:
            return self._extras()[key]
        return bool(options[key]) if key in _BOOLEAN else options[key]

    def __setitem__(self, key, value):
        if key == "params":
            raise KeyError("'params' of a param group cannot be replaced; use add_param_group")
        if key == "betas":
            if not all(b in self._options() for b in _BETAS):
                raise KeyError(f"param group {self._index} has no option 'betas'")
            for name, v in zip(_BETAS, value):
                _C.optim.Optimizer._set_group_option(self._optimizer, self._index, name, float(v))
            return
        if key in self._options():
            _C.optim.Optimizer._set_group_option(self._optimizer, self._index, key, float(value))
        else:
            self._extras()[key] = value

    def __delitem__(self, key):
        if key in self._extras():
            del self._extras()[key]
            return
        raise KeyError(f"options of a param group cannot be deleted ({key!r})")

    def _keys(self):
        keys = ["params"]
        for k in self._options():
            if k in _BETAS:
                if "betas" not in keys:
                    keys.append("betas")
            else:
                keys.append(k)
        return keys + list(self._extras())

    def __iter__(self):
        return iter(self._keys())

    def __len__(self):
        return len(self._keys())

    def __repr__(self):
        return repr({k: (f"[{len(self['params'])} tensors]" if k == "params" else self[k]) for k in self})


class _StateByParam(collections.abc.Mapping):
    """A C++ optimizer's state by parameter. Keyed by the tensor, not the Python handle: C++ hands out a new
    handle per access, so model.weight and the handle in param_groups must find the same entry."""

    def __init__(self, params, states):
        self._entries = {p._cdata: (p, _as_pytorchs(s)) for p, s in zip(params, states) if s}

    def __getitem__(self, param):
        try:
            return self._entries[local_params(param)[0]._cdata][1]
        except (KeyError, AttributeError):
            raise KeyError(param) from None

    def __iter__(self):
        return (p for p, _ in self._entries.values())

    def __len__(self):
        return len(self._entries)


def _as_pytorchs(state):
    """A parameter's state as PyTorch shows it: 'step' first, a 0-dim tensor of PyTorch's scalar dtype (float32
    unless the default dtype is float64; the C++ optimizers count in float64, exact for any run)."""
    out = {}
    if "step" in state:
        scalar = _C.dtype.float64 if _C._ops.get_default_dtype() == _C.dtype.float64 else _C.dtype.float32
        out["step"] = state["step"].to(scalar)
    out.update((k, v) for k, v in state.items() if k != "step")
    return out


def _to_options(group):
    options = {}
    for key, value in group.items():
        if key == "params":
            continue
        if key == "betas":
            options["beta1"], options["beta2"] = (float(b) for b in value)
        else:
            options[key] = float(value)
    return options


class _GroupsMixin:
    """param_groups and add_param_group over the C++ optimizer's groups; step(closure) and step hooks."""

    def __repr__(self):
        from trainrun.optim.optimizer import optimizer_repr
        return optimizer_repr(self)

    @_step_hooks.with_hooks
    def step(self, closure=None):
        """One update; closure (re-evaluating the loss, with gradients) runs first and its loss is returned."""
        loss = None
        if closure is not None:
            from trainrun._autograd import enable_grad
            with enable_grad():
                loss = closure()
        super().step()
        return loss

    register_step_pre_hook = _step_hooks.register_step_pre_hook
    register_step_post_hook = _step_hooks.register_step_post_hook

    def _layouts(self):
        """local piece -> DTensor spec, for the DTensor parameters given (state_dict() shows their state so)."""
        return self.__dict__.setdefault("_dtensor_layouts", {})

    def _init_groups(self, params, init):
        params = local_params(params, self._layouts())
        if params and isinstance(params[0], dict):
            first, rest = params[0], params[1:]
            init(local_params(first["params"], self._layouts()))
            self._remember_defaults()  # the constructor's options, before the first group's own
            view = _ParamGroup(self, 0)
            for key, value in first.items():
                if key != "params":
                    view[key] = value
            for group in rest:
                self.add_param_group(group)
        else:
            init(params)
            self._remember_defaults()

    def _remember_defaults(self):
        first = _ParamGroup(self, 0)
        self.__dict__["_defaults"] = {k: first[k] for k in first if k != "params"}

    @property
    def param_groups(self):
        return [_ParamGroup(self, i) for i in range(_C.optim.Optimizer._group_count(self))]

    @property
    def defaults(self):
        """The options a group gets when add_param_group does not give them (the constructor's)."""
        if "_defaults" not in self.__dict__:
            self._remember_defaults()
        return self.__dict__["_defaults"]

    @property
    def state(self):
        """optimizer.state[p]: parameter p's state ({'step', 'exp_avg', ...}), for parameters that have one."""
        state, _ = _C.optim.Optimizer._state_dict(self)
        params = [p for group in self.param_groups for p in group["params"]]
        return _StateByParam(params, state)

    def state_dict(self):
        """PyTorch's layout: {'state': {index: {'step', 'exp_avg', ...}} for parameters that have state,
        'param_groups': [{options..., 'params': [indices]}]}, indices counting through the groups."""
        state, groups = _C.optim.Optimizer._state_dict(self)
        out_groups, start = [], 0
        for i, _ in enumerate(groups):
            view = _ParamGroup(self, i)
            group = {k: view[k] for k in view if k != "params"}
            count = len(view["params"])
            group["params"] = list(range(start, start + count))
            start += count
            out_groups.append(group)
        params = [p for group in self.param_groups for p in group["params"]]
        by_index = {i: _as_pytorchs(s) for i, s in enumerate(state) if s}
        return {"state": state_as_dtensors(by_index, params, self._layouts()), "param_groups": out_groups}

    def load_state_dict(self, state_dict):
        """Takes what state_dict() (here or in PyTorch) gave for an optimizer over the same parameters."""
        groups = state_dict["param_groups"]
        current = [_C.optim.Optimizer._group_options(self, i) for i in range(_C.optim.Optimizer._group_count(self))]
        if len(groups) != len(current):
            raise ValueError(f"load_state_dict: the state dict has {len(groups)} parameter groups, this optimizer "
                             f"{len(current)}")
        options = []
        for given, mine in zip(groups, current):
            merged = dict(mine)  # options this optimizer has, updated from the state dict where present
            plain = {k: v for k, v in given.items() if k != "params" and (k == "betas" or
                                                                           isinstance(v, (bool, int, float)))}
            for key, value in _to_options(plain).items():  # PyTorch-only keys (foreach, ...) are not ours
                if key in merged:
                    merged[key] = value
            options.append(merged)
        for i, (given, mine) in enumerate(zip(groups, current)):  # the groups' own keys ('initial_lr', ...)
            extras = _group_extras(self, i)
            extras.clear()
            extras.update({k: v for k, v in given.items() if k not in mine and k not in ("params", "betas") and
                           k not in _PYTORCH_ONLY_OPTIONS})
        total = sum(len(g["params"]) for g in groups)
        index_of = [i for g in groups for i in g["params"]]
        saved = state_dict["state"]
        per_param = [dict(saved.get(index, saved.get(str(index), {}))) for index in index_of]
        if len(per_param) != total:
            raise ValueError("load_state_dict: param_groups and state do not agree")
        params = [p for group in self.param_groups for p in group["params"]]
        for entry, param in zip(per_param, params):
            for key, value in list(entry.items()):
                value = entry[key] = local_state(value, param, self._layouts())
                if not _C._is_cpp_tensor(value):
                    entry[key] = _C.full([], float(value), dtype=_C.dtype.float64)
                elif key == "step":
                    entry[key] = value.to(_C.dtype.float64)
        _C.optim.Optimizer._load_state_dict(self, per_param, options)

    def add_param_group(self, param_group):
        if "params" not in param_group:
            raise ValueError("add_param_group: the group needs a 'params' entry")
        known = set(_ParamGroup(self, 0)._options()) | {"betas"}
        options = {k: v for k, v in param_group.items() if k in known}
        _C.optim.Optimizer._add_param_group(self, local_params(param_group["params"], self._layouts()),
                                            _to_options(options))
        _group_extras(self, _C.optim.Optimizer._group_count(self) - 1).update(
            {k: v for k, v in param_group.items() if k not in known and k != "params"})


def _set_defaults(optimizer, params, defaults):
    """Options the C++ constructor does not take (dampening, maximize): set on every group that did not
    give its own."""
    params = list(params) if not _C._is_cpp_tensor(params) else [params]
    given = [g if isinstance(g, dict) else {} for g in params] if params and isinstance(params[0], dict) else [{}]
    for i, group in enumerate(optimizer.param_groups):
        own = given[i] if i < len(given) else {}
        for key, value in defaults.items():
            if key not in own:
                group[key] = value


# foreach/capturable/differentiable/fused choose PyTorch's implementation, not the result: accepted, unused.
_state_dict_hooks.install(_GroupsMixin)


class SGD(_GroupsMixin, _C.optim.SGD):
    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening")
        params = list(params) if not _C._is_cpp_tensor(params) else [params]
        self._init_groups(params, lambda p: _C.optim.SGD.__init__(self, p, lr, momentum, weight_decay, nesterov))
        _set_defaults(self, params, {"dampening": dampening, "maximize": maximize})


class Adam(_GroupsMixin, _C.optim.Adam):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None):
        params = list(params) if not _C._is_cpp_tensor(params) else [params]
        self._init_groups(params, lambda p: _C.optim.Adam.__init__(self, p, lr, tuple(betas), eps, weight_decay,
                                                                   amsgrad))
        _set_defaults(self, params, {"maximize": maximize})


class AdamW(_GroupsMixin, _C.optim.AdamW):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        params = list(params) if not _C._is_cpp_tensor(params) else [params]
        self._init_groups(params, lambda p: _C.optim.AdamW.__init__(self, p, lr, tuple(betas), eps, weight_decay,
                                                                    amsgrad))
        _set_defaults(self, params, {"maximize": maximize})


from trainrun.optim.optimizer import Optimizer  # noqa: E402,F401
from trainrun.optim.rmsprop_adagrad import Adagrad, RMSprop  # noqa: E402,F401
from trainrun.optim.adam_variants import Adamax, NAdam, RAdam  # noqa: E402,F401
from trainrun.optim import lr_scheduler  # noqa: E402,F401
from trainrun.optim.adadelta_rprop_asgd import ASGD, Adadelta, Rprop  # noqa: E402,F401
from trainrun.optim.lbfgs import LBFGS  # noqa: E402,F401
from trainrun.optim.adafactor import Adafactor  # noqa: E402,F401


def _optimizer_module_paths():
    """torch.optim.adam, torch.optim.sgd, ...: the per-optimizer modules PyTorch scripts import classes from."""
    from trainrun._module_paths import module_at
    for module, cls in (("adadelta", "Adadelta"), ("adagrad", "Adagrad"), ("adam", "Adam"), ("adamax", "Adamax"),
                        ("adamw", "AdamW"), ("asgd", "ASGD"), ("lbfgs", "LBFGS"), ("nadam", "NAdam"),
                        ("radam", "RAdam"), ("rmsprop", "RMSprop"), ("rprop", "Rprop"), ("sgd", "SGD"),
                        ("_adafactor", "Adafactor")):
        module_at(f"{__name__}.{module}", f"torch.optim.{module}", **{cls: globals()[cls], "Optimizer": Optimizer})


_optimizer_module_paths()
from trainrun.optim import swa_utils  # noqa: E402,F401
