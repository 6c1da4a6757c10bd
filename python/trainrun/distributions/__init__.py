"""torch.distributions: the families training code uses most (policy heads, VAEs, noise, priors), with PyTorch's
shapes (batch_shape, event_shape), sampling (rsample: reparameterized, gradients flow to the parameters; the
gamma-based families sample only), log_prob, entropy, moments, and kl_divergence in closed form. Each family is
its own file; constraints.py holds the sets parameters and draws live in, constraint_registry.py the transforms
onto them (biject_to, transform_to)."""
from trainrun.distributions.bernoulli import Bernoulli
from trainrun.distributions.beta import Beta
from trainrun.distributions.binomial import Binomial
from trainrun.distributions.categorical import Categorical
from trainrun.distributions.dirichlet import Dirichlet
from trainrun.distributions.distribution import Distribution
from trainrun.distributions.exponential import Exponential
from trainrun.distributions.gamma import Gamma
from trainrun.distributions.independent import Independent
from trainrun.distributions.kl import kl_divergence, register_kl
from trainrun.distributions.laplace import Laplace
from trainrun.distributions.log_normal import LogNormal
from trainrun.distributions.multivariate_normal import MultivariateNormal
from trainrun.distributions.normal import Normal
from trainrun.distributions.one_hot_categorical import OneHotCategorical
from trainrun.distributions.poisson import Poisson
from trainrun.distributions.transformed_distribution import TransformedDistribution
from trainrun.distributions.uniform import Uniform
from trainrun.distributions import transforms  # noqa: F401
from trainrun.distributions import constraint_registry, constraints, utils  # noqa: F401
from trainrun.distributions.cauchy import Cauchy, HalfCauchy
from trainrun.distributions.chi2 import Chi2
from trainrun.distributions.constraint_registry import biject_to, transform_to
from trainrun.distributions.geometric import Geometric
from trainrun.distributions.gumbel import Gumbel
from trainrun.distributions.half_normal import HalfNormal
from trainrun.distributions.inverse_gamma import InverseGamma
from trainrun.distributions.lowrank_multivariate_normal import LowRankMultivariateNormal
from trainrun.distributions.mixture_same_family import MixtureSameFamily
from trainrun.distributions.multinomial import Multinomial
from trainrun.distributions.negative_binomial import NegativeBinomial
from trainrun.distributions.relaxed import RelaxedBernoulli, RelaxedOneHotCategorical
from trainrun.distributions.student_t import StudentT
from trainrun.distributions.transforms import (AbsTransform, AffineTransform, CatTransform,  # noqa: F401
                                               ComposeTransform, StackTransform,
                                               CorrCholeskyTransform, CumulativeDistributionTransform, ExpTransform,
                                               IndependentTransform, LowerCholeskyTransform,
                                               PositiveDefiniteTransform, PowerTransform, ReshapeTransform,
                                               SigmoidTransform, SoftmaxTransform, SoftplusTransform,
                                               StickBreakingTransform, TanhTransform, Transform, identity_transform)
from trainrun.distributions.weibull import Pareto, Weibull
from trainrun.distributions.continuous_bernoulli import ContinuousBernoulli  # noqa: E402
from trainrun.distributions.exp_family import ExponentialFamily  # noqa: E402
from trainrun.distributions.fishersnedecor import FisherSnedecor  # noqa: E402
from trainrun.distributions.kumaraswamy import Kumaraswamy  # noqa: E402
from trainrun.distributions.lkj_cholesky import LKJCholesky  # noqa: E402
from trainrun.distributions.logistic_normal import LogisticNormal  # noqa: E402
from trainrun.distributions.von_mises import VonMises  # noqa: E402
from trainrun.distributions.wishart import Wishart  # noqa: E402
from trainrun.distributions.one_hot_categorical import OneHotCategoricalStraightThrough  # noqa: E402
from trainrun.distributions import _kl_pairs  # noqa: E402,F401  (registers the remaining KL pairs)

__all__ = ["Bernoulli", "Beta", "Binomial", "Categorical", "Dirichlet", "Distribution", "Exponential", "Gamma",
           "Independent", "Laplace", "LogNormal", "MultivariateNormal", "Normal", "OneHotCategorical", "Poisson",
           "TransformedDistribution", "Uniform", "kl_divergence", "register_kl", "Cauchy", "HalfCauchy", "Chi2",
           "Geometric", "Gumbel", "HalfNormal", "InverseGamma", "MixtureSameFamily", "Multinomial",
           "NegativeBinomial", "RelaxedBernoulli", "RelaxedOneHotCategorical", "StudentT", "Pareto", "Weibull",
           "biject_to", "transform_to", "constraints",
           "LowRankMultivariateNormal", "ContinuousBernoulli", "FisherSnedecor", "Kumaraswamy",
           "OneHotCategoricalStraightThrough", "ExponentialFamily", "LogisticNormal", "VonMises", "Wishart", "LKJCholesky"]


def _module_paths():
    """PyTorch's module names for the families kept in files of other names here."""
    from trainrun._module_paths import module_at
    from trainrun.distributions import cauchy, relaxed, student_t, weibull
    module_at(__name__ + ".half_cauchy", "torch.distributions.half_cauchy", HalfCauchy=cauchy.HalfCauchy)
    module_at(__name__ + ".pareto", "torch.distributions.pareto", Pareto=weibull.Pareto)
    module_at(__name__ + ".relaxed_bernoulli", "torch.distributions.relaxed_bernoulli",
              RelaxedBernoulli=relaxed.RelaxedBernoulli, LogitRelaxedBernoulli=relaxed.LogitRelaxedBernoulli)
    module_at(__name__ + ".relaxed_categorical", "torch.distributions.relaxed_categorical",
              RelaxedOneHotCategorical=relaxed.RelaxedOneHotCategorical,
              ExpRelaxedCategorical=relaxed.ExpRelaxedCategorical)
    module_at(__name__ + ".studentT", "torch.distributions.studentT", StudentT=student_t.StudentT)


_module_paths()
