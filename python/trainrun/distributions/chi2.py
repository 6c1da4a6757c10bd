"""torch.distributions.Chi2(df): Gamma(df / 2, 1 / 2)."""
import trainrun
from trainrun.distributions.distribution import broadcast_all
from trainrun.distributions.gamma import Gamma


class Chi2(Gamma):
    arg_constraints = {"df": "positive"}

    def __init__(self, df, validate_args=None):
        df, = broadcast_all(df)
        super().__init__(0.5 * df, trainrun.full_like(df, 0.5), validate_args=validate_args)

    @property
    def df(self):
        return self.concentration * 2
