"""torch.distributions.constraint_registry: biject_to(constraint) and transform_to(constraint) give a transform
from unconstrained reals onto the constraint's set (biject_to: a bijection, for HMC-style reparameterization;
transform_to: any such map, for constrained optimization), with PyTorch's registrations; register more with
`@transform_to.register(MyConstraint)`."""
from trainrun.distributions import constraints, transforms

__all__ = ["ConstraintRegistry", "biject_to", "transform_to"]


class ConstraintRegistry:
    def __init__(self):
        self._registry = {}

    def register(self, constraint, factory=None):
        """Registers factory(constraint) -> Transform for a constraint class or singleton; usable as a decorator."""
        if factory is None:
            return lambda factory: self.register(constraint, factory)
        if isinstance(constraint, constraints.Constraint):
            constraint = type(constraint)
        if not isinstance(constraint, type) or not issubclass(constraint, constraints.Constraint):
            raise TypeError(f"Expected constraint to be either a Constraint subclass or instance, but got {constraint}")
        self._registry[constraint] = factory
        return factory

    def __call__(self, constraint):
        for cls in type(constraint).__mro__:
            if cls in self._registry:
                return self._registry[cls](constraint)
        raise NotImplementedError(f"Cannot transform {type(constraint).__name__} constraints")


biject_to = ConstraintRegistry()
transform_to = ConstraintRegistry()


def _real(constraint):
    return transforms.identity_transform


def _independent(registry):
    def factory(constraint):
        return transforms.IndependentTransform(registry(constraint.base_constraint),
                                               constraint.reinterpreted_batch_ndims)
    return factory


def _positive(constraint):
    return transforms.ExpTransform()


def _greater_than(constraint):
    return transforms.ComposeTransform([transforms.ExpTransform(),
                                        transforms.AffineTransform(constraint.lower_bound, 1)])


def _less_than(constraint):
    return transforms.ComposeTransform([transforms.ExpTransform(),
                                        transforms.AffineTransform(constraint.upper_bound, -1)])


def _interval(constraint):
    lower_is_0 = isinstance(constraint.lower_bound, (int, float)) and constraint.lower_bound == 0
    upper_is_1 = isinstance(constraint.upper_bound, (int, float)) and constraint.upper_bound == 1
    if lower_is_0 and upper_is_1:
        return transforms.SigmoidTransform()
    return transforms.ComposeTransform([transforms.SigmoidTransform(), transforms.AffineTransform(
        constraint.lower_bound, constraint.upper_bound - constraint.lower_bound)])


for _registry in (biject_to, transform_to):
    _registry.register(constraints._Real, _real)
    _registry.register(constraints._IndependentConstraint, _independent(_registry))
    _registry.register(constraints._GreaterThan, lambda c: _positive(c) if (
        isinstance(c.lower_bound, (int, float)) and c.lower_bound == 0) else _greater_than(c))
    _registry.register(constraints._GreaterThanEq, lambda c: _positive(c) if (
        isinstance(c.lower_bound, (int, float)) and c.lower_bound == 0) else _greater_than(c))
    _registry.register(constraints._LessThan, _less_than)
    _registry.register(constraints._Interval, _interval)
    _registry.register(constraints._HalfOpenInterval, _interval)
    _registry.register(constraints._LowerCholesky, lambda c: transforms.LowerCholeskyTransform())
    _registry.register(constraints._CorrCholesky, lambda c: transforms.CorrCholeskyTransform())
    _registry.register(constraints._PositiveDefinite, lambda c: transforms.PositiveDefiniteTransform())
    _registry.register(constraints._PositiveSemidefinite, lambda c: transforms.PositiveDefiniteTransform())
biject_to.register(constraints._Simplex, lambda c: transforms.StickBreakingTransform())
transform_to.register(constraints._Simplex, lambda c: transforms.SoftmaxTransform())
