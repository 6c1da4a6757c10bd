"""trainrun.optim.Optimizer: PyTorch's base class for optimizers written in
Python (subclass it: __init__(params, defaults), step() over
self.param_groups and self.state). param_groups are plain dicts, state a
dict per parameter; state_dict()/load_state_dict() have PyTorch's layout.
The built-in SGD/Adam/AdamW run in C++ with the same interface."""
import abc
import collections
import functools

from trainrun import _C
from trainrun._autograd import no_grad
from trainrun.optim import _state_dict_hooks, _step_hooks
from trainrun.optim._local_params import local_params, local_state, state_as_dtensors
from trainrun.optim._step_hooks import register_optimizer_step_post_hook, register_optimizer_step_pre_hook  # noqa


def _eager_step(step):
    """step, as a graph break inside trainrun.compile's recording (the built-in optimizers' is too): a replay would
    read the recording's .grad tensors (each backward makes new ones), its options (a scheduler changes lr) and
    the state as it was then (the first step creates it), so it would silently be wrong."""
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        if _C._capture_active():
            _C._note_graph_break(f"{type(self).__name__}.step() runs eagerly: it reads each parameter's current "
                                 ".grad, its options and its state, which a replay would not see")
        return step(self, *args, **kwargs)
    return wrapper


def optimizer_repr(optimizer):
    """PyTorch's: the class name, then each group's options in sorted order."""
    text = type(optimizer).__name__ + " ("
    for i, group in enumerate(optimizer.param_groups):
        text += f"\nParameter Group {i}\n"
        text += "".join(f"    {key}: {group[key]}\n" for key in sorted(group.keys()) if key != "params")
    return text + ")"


class _StateByParameter(collections.defaultdict):
    """optimizer.state: a dict per parameter, keyed by the parameter. The optimizer holds a DTensor parameter's
    local piece (local_params); asking with the DTensor itself (model.parameters() under fully_shard) finds
    that piece's entry, as PyTorch's state keyed by the DTensor would."""

    def __init__(self, default_factory=dict, *args):
        super().__init__(default_factory, *args)

    @staticmethod
    def _local(key):
        return key._local_tensor if hasattr(key, "to_local") and hasattr(key, "_local_tensor") else key

    def __getitem__(self, key):
        return super().__getitem__(self._local(key))

    def __setitem__(self, key, value):
        super().__setitem__(self._local(key), value)

    def __contains__(self, key):
        return super().__contains__(self._local(key))

    def get(self, key, default=None):
        return super().get(self._local(key), default)


class Optimizer(metaclass=abc.ABCMeta):
    """The base class (an ABC: the built-in C++ optimizers, which derive from _C.optim.Optimizer, are registered
    as its subclasses, so isinstance(torch.optim.Adam(...), torch.optim.Optimizer) holds as in PyTorch)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = _step_hooks.with_hooks(_eager_step(cls.__dict__["step"]))
        _state_dict_hooks.wrap_overrides(cls)

    register_step_pre_hook = _step_hooks.register_step_pre_hook
    register_step_post_hook = _step_hooks.register_step_post_hook

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.state = _StateByParameter()
        self.param_groups = []
        self._layouts = {}  # local piece -> DTensor spec, for the DTensor parameters given
        params = local_params(params, self._layouts)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        for group in (params if isinstance(params[0], dict) else [{"params": params}]):
            self.add_param_group(group)

    def add_param_group(self, param_group):
        if "params" not in param_group:
            raise ValueError("add_param_group: the group needs a 'params' entry")
        group = dict(param_group)
        params = group["params"]
        group["params"] = local_params(params, self.__dict__.setdefault("_layouts", {}))
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in group["params"]):
            raise ValueError("add_param_group: some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        p.grad.zero_()

    def step(self, closure=None):
        raise NotImplementedError(f"{type(self).__name__} must define step()")

    def __repr__(self):
        return optimizer_repr(self)

    def _params(self):
        return [p for g in self.param_groups for p in g["params"]]

    def state_dict(self):
        index = {id(p): i for i, p in enumerate(self._params())}
        groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": [index[id(p)] for p in g["params"]]}
                  for g in self.param_groups]
        state = {index[id(p)]: dict(s) for p, s in self._state_items() if s}
        return {"state": state_as_dtensors(state, self._params(), self.__dict__.get("_layouts")),
                "param_groups": groups}

    def _state_items(self):
        """(parameter, its state) in the groups' order, for the parameters self.state has (keyed by the
        parameter itself, as PyTorch's: a subclass's step writes self.state[p])."""
        return [(p, self.state[p]) for p in self._params() if p in self.state]

    def load_state_dict(self, state_dict):
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups) or any(len(a["params"]) != len(b["params"]) for a, b in
                                                        zip(groups, self.param_groups)):
            raise ValueError("load_state_dict: the state dict's parameter groups do not match this optimizer's")
        params = self._params()
        order = [i for g in groups for i in g["params"]]
        self.state = _StateByParameter()
        for position, saved_index in enumerate(order):
            saved = state_dict["state"].get(saved_index, state_dict["state"].get(str(saved_index)))
            if saved:
                param = params[position]
                values = {k: local_state(v, param, self.__dict__.get("_layouts")) for k, v in saved.items()}
                self.state[param] = {k: (v.clone() if _C._is_cpp_tensor(v) else v) for k, v in values.items()}
        for mine, given in zip(self.param_groups, groups):
            for key, value in given.items():
                if key != "params":
                    mine[key] = value

    def _state_of(self, p):
        return self.state[p]


class _PerParameterOptimizer(Optimizer):
    """step(): self._update(p, grad, state, group) on every parameter with a gradient, without a graph."""

    def step(self, closure=None):
        loss = None
        if closure is not None:
            from trainrun._autograd import enable_grad
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = -p.grad if group.get("maximize", False) else p.grad
                    self._update(p, grad, self._state_of(p), group)
        return loss


Optimizer.register(_C.optim.Optimizer)


_state_dict_hooks.install(Optimizer)
