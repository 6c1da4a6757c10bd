"""torch.func: grad, grad_and_value, vjp, jacrev (trainrun/func/_grad.py), jvp, linearize, jacfwd and hessian
(_forward.py, by double backward), vmap (_vmap.py: one call per slice, stacked) and functional_call
(_functional_call.py)."""
from trainrun.func._forward import (functionalize, hessian, jacfwd, jvp, linearize,  # noqa: F401
                                   replace_all_batch_norm_modules_)
from trainrun.func._functional_call import functional_call, stack_module_state
from trainrun.func._grad import grad, grad_and_value, jacrev, vjp
from trainrun.func._vmap import vmap

__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp", "linearize",
           "stack_module_state", "vjp", "vmap"]
