"""What an optimizer holds for a parameter it is given, and how its state shows for a DTensor parameter."""
from trainrun import _C


def _is_dtensor(p):
    return not _C._is_cpp_tensor(p) and not isinstance(p, dict) and hasattr(p, "to_local")


def local_params(params, layouts=None):
    """The tensors an optimizer updates: a DTensor parameter (tensor parallelism, fully_shard) is its local
    piece, the tensor its module holds, so updating it updates the module. layouts: a dict that records, by
    local tensor, the DTensor spec it came from (state_dict() shows that parameter's state as DTensors)."""
    if _C._is_cpp_tensor(params) or hasattr(params, "to_local"):
        params = [params]
    out = []
    for p in params:
        if _is_dtensor(p):
            local = p.to_local()
            if layouts is not None:
                layouts[local._cdata] = p._spec
            out.append(local)
        else:
            out.append(p)
    return out


def state_as_dtensors(state, params, layouts):
    """state_dict()'s {index: {key: value}}: a state tensor shaped as its DTensor parameter's local piece
    (exp_avg, momentum_buffer) becomes a DTensor laid out as the parameter, as PyTorch's optimizers keep it
    (so dcp.save of optimizer.state_dict() writes each rank's piece)."""
    if not layouts:
        return state
    from trainrun.distributed.tensor._dtensor import DTensor
    for index, entry in state.items():
        p = params[index]
        spec = layouts.get(p._cdata)
        if spec is None:
            continue
        for key, value in entry.items():
            if _C._is_cpp_tensor(value) and value.ndim > 0 and tuple(value.shape) == tuple(p.shape):
                entry[key] = DTensor(value, spec)
    return state


def local_state(value, param, layouts):
    """load_state_dict's value for `param`: a DTensor as this rank's piece in the parameter's layout."""
    if not _is_dtensor(value):
        return value
    spec = (layouts or {}).get(param._cdata)
    if spec is None:
        return value.full_tensor()
    if tuple(value.placements) != tuple(spec.placements):
        value = value.redistribute(spec.mesh, spec.placements)
    return value.to_local()
