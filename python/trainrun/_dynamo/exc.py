"""torch._dynamo.exc: what trainrun.compile and export raise, under torch's names. Unsupported: a call that cannot
be recorded whole under fullgraph=True (trainrun's GraphBreakError); RecompileError: a new recording under the
"fail_on_recompile" stance; UserError: export's refusal of its dynamic_shapes (a size outside a Dim's range, two
sizes one Dim cannot both be), a ValueError and a RuntimeError both."""
from trainrun._compile import GraphBreakError as Unsupported  # noqa: F401
from trainrun._compile import RecompileError  # noqa: F401

__all__ = ["RecompileError", "Unsupported", "UserError"]


class UserError(ValueError, RuntimeError):
    """What the user asked of export cannot hold (its dynamic_shapes against the example inputs or the model)."""
