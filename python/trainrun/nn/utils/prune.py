"""torch.nn.utils.prune: zeroing a module's parameter entries (or whole channels) by a mask.

prune.l1_unstructured(module, "weight", amount=0.3) keeps the parameter as `weight_orig` (trained as before) and
the mask as the buffer `weight_mask`; `module.weight` is weight_orig * weight_mask at every read, so the pruned
entries stay zero through training. Pruning a parameter again prunes among the entries still kept (the masks
multiply); prune.remove(module, "weight") makes the pruned tensor the parameter again. The module gets a class
of its own (parametrize.derive_class) where the `weight` property lives; a C++ layer then runs its functional
form over it, as a parametrized one does."""
import numbers
from abc import ABC, abstractmethod

import trainrun
from trainrun._autograd import no_grad
from trainrun.nn.parameter import Parameter
from trainrun.nn.utils import parametrize

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured",
           "l1_unstructured", "random_structured", "ln_structured", "global_unstructured", "custom_from_mask",
           "remove", "is_pruned"]


def _hooks(module):
    return module.__dict__.setdefault("_pruning_methods", {})


def _masked_property(name):
    def get(self):
        return getattr(self, name + "_orig") * getattr(self, name + "_mask")
    return property(get)


class BasePruningMethod(ABC):
    """A way of choosing the entries to prune: compute_mask(t, default_mask) gives the new mask."""

    PRUNING_TYPE = "unstructured"
    _tensor_name = None

    def __call__(self, module, inputs):
        """(As PyTorch's forward pre-hook form: module.<name> is computed at each read here, nothing to do.)"""

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The mask (same shape as t) that prunes what this method chooses, on top of default_mask."""

    def apply_mask(self, module):
        return getattr(module, self._tensor_name + "_orig") * getattr(module, self._tensor_name + "_mask")

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prunes module.<name> by this method (combined with an earlier pruning of it); returns the method."""
        method = cls(*args, **kwargs)
        method._tensor_name = name
        hooks = _hooks(module)
        previous = hooks.get(name)
        if previous is not None:
            container = previous if isinstance(previous, PruningContainer) else PruningContainer(previous)
            container.add_pruning_method(method)
            method = container
        orig = getattr(module, name + "_orig") if previous is not None else getattr(module, name)
        if not trainrun._C._is_cpp_tensor(orig):
            raise AttributeError(f"Parameter '{name}' of module {module} has to be a tensor to be pruned")
        scores = importance_scores if importance_scores is not None else orig
        if tuple(scores.shape) != tuple(orig.shape):
            raise ValueError(f"importance_scores should have the same shape as parameter {name} of {module}")
        with no_grad():
            if previous is None:
                default_mask = trainrun.ones_like(orig)
            else:
                default_mask = getattr(module, name + "_mask").detach().clone()
            mask = method.compute_mask(scores.detach(), default_mask=default_mask)
        if previous is None:
            parametrize.unregister(module, name)
            module.register_parameter(name + "_orig", orig if isinstance(orig, Parameter) else Parameter(orig))
            module.register_buffer(name + "_mask", mask)
            parametrize.derive_class(module, prefix="Pruned")
            setattr(type(module), name, _masked_property(name))
        else:  # (a new mask tensor, as PyTorch's: one read before keeps its values)
            module.register_buffer(name + "_mask", mask)
        hooks[name] = method
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """t with this method's mask applied (the tensor alone, no module)."""
        scores = importance_scores if importance_scores is not None else t
        mask = self.compute_mask(scores, default_mask if default_mask is not None else trainrun.ones_like(t))
        return t * mask

    def remove(self, module):
        """module.<name> becomes a plain parameter holding the pruned values; _orig and _mask go."""
        name = self._tensor_name
        with no_grad():
            weight = self.apply_mask(module).detach().clone()
        requires_grad = getattr(module, name + "_orig").requires_grad
        delattr(type(module), name)
        parametrize.unregister(module, name + "_orig")  # (a C++ layer's registry entries too)
        parametrize.unregister(module, name + "_mask")
        parametrize.restore_class(module)
        module.register_parameter(name, Parameter(weight, requires_grad))
        _hooks(module).pop(name, None)


class PruningContainer(BasePruningMethod):
    """Prunings applied one after another to one parameter: each chooses among the entries the earlier left."""

    def __init__(self, *methods):
        self._pruning_methods = ()
        for m in methods:
            self.add_pruning_method(m)

    def add_pruning_method(self, method):
        if not isinstance(method, BasePruningMethod):
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if self._tensor_name is None:
            self._tensor_name = method._tensor_name
        elif method._tensor_name != self._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named '{self._tensor_name}' to "
                             f"PruningContainer. Found '{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, i):
        return self._pruning_methods[i]

    def compute_mask(self, t, default_mask):
        """The last method's mask over the entries (or, structured, the slices) default_mask keeps."""
        method = self._pruning_methods[-1]
        if method.PRUNING_TYPE == "unstructured":
            kept = default_mask.reshape(-1) == 1
            new = default_mask.clone().reshape(-1)
            values = t.reshape(-1)[kept]
            partial = method.compute_mask(values, default_mask=trainrun.ones_like(values))
            new[kept] = partial.to(new.dtype)
            return new.reshape(default_mask.shape)
        return default_mask * method.compute_mask(t * default_mask, default_mask=default_mask)


def _check_amount(amount):
    """amount is a fraction in [0, 1] or a non-negative count (a ValueError or TypeError otherwise)."""
    _count_to_prune(amount, amount if isinstance(amount, numbers.Integral) and amount > 0 else 1)


def _count_to_prune(amount, size):
    """How many of `size` entries (or channels) `amount` (a fraction or a count) prunes."""
    if isinstance(amount, bool) or not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if isinstance(amount, numbers.Integral):
        if amount < 0:
            raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative "
                             "integer")
        if amount > size:
            raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={size}")
        return int(amount)
    if not 0.0 <= amount <= 1.0:
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")
    return round(amount * size)


def _without_top(scores, default_mask, amount, largest):
    """default_mask with the entries of the `amount` largest (or smallest) scores zeroed."""
    k = _count_to_prune(amount, scores.numel())
    mask = default_mask.clone()
    if k:
        chosen = trainrun.topk(scores.reshape(-1), k=k, largest=largest).indices
        mask.reshape(-1)[chosen] = 0
    return mask


class Identity(BasePruningMethod):
    """Prunes nothing (a mask of ones): the module gets weight_orig and weight_mask all the same."""

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


class RandomUnstructured(BasePruningMethod):
    """`amount` entries chosen at random."""

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        return _without_top(trainrun.rand_like(t), default_mask, self.amount, largest=True)

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """The `amount` entries of smallest magnitude."""

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        return _without_top(trainrun.abs(t), default_mask, self.amount, largest=False)

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


def _channel_mask(t, dim, keep, default_mask):
    """default_mask with every slice along `dim` not in `keep` zeroed."""
    dim = dim % t.dim()
    kept = trainrun.zeros(t.shape[dim], dtype=default_mask.dtype, device=t.device)
    kept[keep] = 1
    shape = [1] * t.dim()
    shape[dim] = t.shape[dim]
    return default_mask * kept.reshape(shape)


class RandomStructured(BasePruningMethod):
    """`amount` whole slices along `dim` (output channels for dim=0), chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _check_amount(amount)
        self.amount, self.dim = amount, dim

    def compute_mask(self, t, default_mask):
        n = t.shape[self.dim]
        k = _count_to_prune(self.amount, n)
        keep = trainrun.topk(trainrun.rand(n), k=n - k).indices
        return _channel_mask(t, self.dim, keep, default_mask)

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """The `amount` slices along `dim` of smallest L`n` norm."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        _check_amount(amount)
        self.amount, self.n, self.dim = amount, n, dim

    def compute_mask(self, t, default_mask):
        dim = self.dim % t.dim()
        count = t.shape[dim]
        k = _count_to_prune(self.amount, count)
        others = [d for d in range(t.dim()) if d != dim]
        norms = trainrun.linalg.vector_norm(t, ord=self.n, dim=others) if others else t.abs()
        keep = trainrun.topk(norms, k=count - k, largest=True).indices
        return _channel_mask(t, dim, keep, default_mask)

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """A mask given by the caller."""

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise ValueError(f"the mask's shape {tuple(self.mask.shape)} is not the parameter's "
                             f"{tuple(default_mask.shape)}")
        return default_mask * self.mask.to(default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


def identity(module, name):
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module, name, mask):
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prunes (module, name) pairs together: pruning_method (an unstructured method class, with its kwargs
    such as amount) chooses among all their entries at once, as if they were one tensor."""
    parameters = list(parameters)
    if not parameters:
        raise TypeError("global_unstructured: parameters is empty")
    importance_scores = importance_scores or {}
    scores, masks = [], []
    for module, name in parameters:
        pruned = name in _hooks(module)
        tensor = importance_scores.get((module, name), getattr(module, name + "_orig" if pruned else name))
        scores.append(tensor.detach().reshape(-1))
        masks.append(getattr(module, name + "_mask").detach().reshape(-1) if pruned else
                     trainrun.ones_like(tensor).reshape(-1))
    method = pruning_method(**kwargs)
    if getattr(method, "PRUNING_TYPE", "unstructured") != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                        f"{pruning_method} of type {method.PRUNING_TYPE}")
    container = PruningContainer(method)
    container._tensor_name = "global"
    with no_grad():
        mask = container.compute_mask(trainrun.cat(scores), default_mask=trainrun.cat(masks))
    offset = 0
    for (module, name), s in zip(parameters, scores):
        n = s.numel()
        shape = getattr(module, name + "_orig" if name in _hooks(module) else name).shape
        piece = mask[offset:offset + n].reshape(shape)
        offset += n
        if name in _hooks(module):  # (its mask is the new one: masks multiply, the old is part of it)
            module.register_buffer(name + "_mask", piece.clone())
        else:
            CustomFromMask.apply(module, name, mask=piece)


def remove(module, name):
    """module.<name> keeps its pruned values as a plain parameter; the pruning (its _orig and _mask) goes."""
    method = _hooks(module).get(name)
    if method is None:
        raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")
    method.remove(module)
    return module


def is_pruned(module):
    """Whether module or any of its submodules has a pruned parameter."""
    return any(_hooks(m) for m in module.modules())
