"""torch._dynamo.exc: what trainrun.compile raises, under torch's names. Unsupported: a call that cannot be
recorded whole under fullgraph=True (trainrun's GraphBreakError); RecompileError: a new recording under the
"fail_on_recompile" stance."""
from trainrun._compile import GraphBreakError as Unsupported  # noqa: F401
from trainrun._compile import RecompileError  # noqa: F401

__all__ = ["RecompileError", "Unsupported"]
