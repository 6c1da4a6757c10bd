"""How a module shows its sharded parameters: tensor parallelism and
fully_shard keep each parameter's local shard in the module's registry (so
optimizers, state_dict and C++ code see ordinary tensors) and record the
DTensor over it here; `module.weight` then returns that DTensor."""
from trainrun import _C

DTENSOR_PARAMS = "_dtensor_params"
VIEWS_OFF = "_dtensor_views_off"  # set while fully_shard has the full parameters in place (in forward)


def set_view(module, name, dtensor):
    table = module.__dict__.get(DTENSOR_PARAMS)
    if table is None:
        table = {}
        object.__setattr__(module, DTENSOR_PARAMS, table)
    table[name] = dtensor


def views_off(module, off):
    object.__setattr__(module, VIEWS_OFF, off)


_original_getattr = _C.nn.Module.__getattr__


def _getattr(self, name):
    table = self.__dict__.get(DTENSOR_PARAMS)
    if table is not None and name in table and not self.__dict__.get(VIEWS_OFF):
        return table[name]
    return _original_getattr(self, name)


_C.nn.Module.__getattr__ = _getattr
