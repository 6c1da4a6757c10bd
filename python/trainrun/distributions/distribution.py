"""torch.distributions.Distribution: a batch of distributions of one family, with PyTorch's shapes: batch_shape
(independent distributions side by side) and event_shape (the shape of one draw); sample(sample_shape) gives
sample_shape + batch_shape + event_shape. rsample draws with the reparameterization trick, so gradients flow to
the parameters; sample draws without them."""
import trainrun
from trainrun import Size


class Distribution:
    has_rsample = False
    has_enumerate_support = False
    arg_constraints = {}
    support = None
    _validate_args_default = True  # (PyTorch's default under `python` without -O)

    @staticmethod
    def set_default_validate_args(value):
        if value not in (True, False):
            raise ValueError("set_default_validate_args: expected True or False")
        Distribution._validate_args_default = value

    def __init_subclass__(cls, **kwargs):
        """A family may name its constraints by string ("positive"); they become constraints objects, so
        `Normal.support` is constraints.real as in PyTorch. A family outside this package gets PyTorch's automatic
        check of its arg_constraints at construction (trainrun's own check theirs where they are built)."""
        super().__init_subclass__(**kwargs)
        from trainrun.distributions import constraints
        if isinstance(cls.__dict__.get("support"), str):
            cls.support = constraints.from_name(cls.__dict__["support"])
        if "arg_constraints" in cls.__dict__ and isinstance(cls.__dict__["arg_constraints"], dict):
            cls.arg_constraints = {k: constraints.from_name(v) for k, v in cls.__dict__["arg_constraints"].items()}
        cls._checks_own_parameters = cls.__module__.startswith("trainrun.distributions.")

    def __init__(self, batch_shape=Size(), event_shape=Size(), validate_args=None):
        self._batch_shape, self._event_shape = Size(batch_shape), Size(event_shape)
        self._validate_args = Distribution._validate_args_default if validate_args is None else validate_args
        if self._validate_args and not getattr(type(self), "_checks_own_parameters", True):
            self._check_arg_constraints()

    def _check_arg_constraints(self):
        from trainrun.distributions import constraints
        arg_constraints = self.arg_constraints if isinstance(self.arg_constraints, dict) else {}
        for name, constraint in arg_constraints.items():
            if constraints.is_dependent(constraint) or name not in self.__dict__:
                continue
            value = self.__dict__[name]
            if not trainrun._C._is_cpp_tensor(value):
                continue
            if not bool(constraint.check(value).all()):
                raise ValueError(f"Expected parameter {name} ({type(value).__name__} of shape {tuple(value.shape)}) "
                                 f"of distribution {self!r} to satisfy the constraint {constraint!r}, but found "
                                 f"invalid values:\n{value}")

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    def _extended_shape(self, sample_shape=Size()):
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def expand(self, batch_shape, _instance=None):
        """The same distribution over a larger batch: every parameter (each tensor whose leading dims are the
        batch, and each inner distribution) expanded, as views, to batch_shape; the event is unchanged."""
        batch_shape = Size(batch_shape)
        old = tuple(self._batch_shape)
        new = type(self).__new__(type(self)) if _instance is None else _instance
        new.__dict__.update(self.__dict__)
        for name, value in self.__dict__.items():
            if trainrun._C._is_cpp_tensor(value) and tuple(value.shape[:len(old)]) == old:
                new.__dict__[name] = value.expand(list(batch_shape) + list(value.shape[len(old):]))
            elif isinstance(value, Distribution) and tuple(value.batch_shape) == old:
                new.__dict__[name] = value.expand(batch_shape)
        new._batch_shape = batch_shape
        return new

    def sample(self, sample_shape=Size()):
        with trainrun.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()):
        raise NotImplementedError(f"{type(self).__name__} has no reparameterized sampling (rsample)")

    def sample_n(self, n):
        return self.sample(Size((n,)))

    def log_prob(self, value):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def perplexity(self):
        return trainrun.exp(self.entropy())

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return self.variance.sqrt()

    def _support_ok(self, value):
        """A bool tensor: which elements of value lie in the support (None: any value does)."""
        from trainrun.distributions import constraints
        support = self.support
        if isinstance(support, constraints.Constraint) and not constraints.is_dependent(support):
            return support.check(value)
        return None

    def _check_sample(self, value):
        """With validate_args: value must broadcast with batch_shape + event_shape and lie in the support."""
        if not self._validate_args:
            return
        if not trainrun._C._is_cpp_tensor(value):
            raise ValueError(f"The value argument to log_prob must be a Tensor, got {type(value).__name__}")
        shape = tuple(self._batch_shape) + tuple(self._event_shape)
        actual = tuple(value.shape)
        for a, b in zip(reversed(actual), reversed(shape)):
            if a != 1 and b != 1 and a != b:
                raise ValueError(f"The value argument must be within the support and broadcastable with batch and "
                                 f"event shape {list(shape)}; got shape {list(actual)}")
        ok = self._support_ok(value)
        if ok is not None and not bool(ok.all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {actual}) to be within the "
                             f"support ({self.support}) of the distribution {self!r}, but found invalid values:\n"
                             f"{value}")

    def _check_parameter(self, name, ok, constraint):
        if self._validate_args and not bool(ok.all()):
            value = getattr(self, name)
            raise ValueError(f"Expected parameter {name} ({type(value).__name__} of shape {tuple(value.shape)}) of "
                             f"distribution {self!r} to satisfy the constraint {constraint}, but found invalid "
                             f"values:\n{value}")

    def __repr__(self):
        params = ", ".join(f"{k}: {getattr(self, k).shape if getattr(self, k).numel() > 1 else getattr(self, k)}"
                           for k in self.arg_constraints if k in self.__dict__)
        return f"{type(self).__name__}({params})"


class LocScale(Distribution):
    """A family parameterized by loc (any real) and scale (positive), broadcast together (Normal, Laplace,
    LogNormal)."""
    arg_constraints = {"loc": "real", "scale": "positive"}

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, Size(), validate_args)
        self._check_parameter("scale", self.scale > 0, "GreaterThan(lower_bound=0.0)")


def broadcast_all(*values):
    """The values as tensors of one broadcast shape (numbers become tensors of the default dtype, or of the first
    tensor's dtype and device)."""
    like = next((v for v in values if trainrun._C._is_cpp_tensor(v)), None)
    tensors = [v if trainrun._C._is_cpp_tensor(v) else
               trainrun.tensor(float(v), dtype=like.dtype if like is not None else None,
                               device=like.device if like is not None else None) for v in values]
    return trainrun.broadcast_tensors(*tensors)
