"""torch._dynamo.config's settings that trainrun.compile reads (at each call, so a change takes effect at once).
Other settings PyTorch scripts set (suppress_errors, ...) are accepted as plain attributes: trainrun's recordings
have no compiler errors to suppress (a loop the system compiler refuses runs its ops one by one instead)."""
cache_size_limit = 8  # recordings kept per compiled function before calls with new guards run eagerly (PyTorch's)
# PyTorch's other settings scripts read or patch, at PyTorch's defaults; trainrun reads none of them.
suppress_errors = False
verbose = False
automatic_dynamic_shapes = True
assume_static_by_default = True
optimize_ddp = True
capture_scalar_outputs = False
capture_dynamic_output_shape_ops = False
inline_inbuilt_nn_modules = True

import sys as _sys  # noqa: E402
import types as _types  # noqa: E402


class _Config(_types.ModuleType):
    """recompile_limit (PyTorch 2.7's name) is cache_size_limit: setting either sets both."""

    @property
    def recompile_limit(self):
        return self.cache_size_limit

    @recompile_limit.setter
    def recompile_limit(self, value):
        self.cache_size_limit = value


_sys.modules[__name__].__class__ = _Config

from trainrun._config_patch import patcher as _patcher  # noqa: E402

patch = _patcher(_sys.modules[__name__])
