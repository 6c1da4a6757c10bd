"""trainrun.nn.utils: gradient clipping and parameter/vector conversion, as torch.nn.utils."""
import math

import trainrun


# Parameters that hold one shard of a larger tensor (tensor parallelism registers them): their gradient
# norms are combined over the ranks. _key(param) -> function reducing a float64 tensor in place (sum or max)
# over the ranks that share the tensor.
_SHARDED = {}


def _key(t):
    """The memory t is (data_ptr, shape), or on the meta device, where nothing has an address, t itself."""
    return ("meta", t._cdata) if t.is_meta else (t.data_ptr(), tuple(t.shape))


def register_sharded_parameter(param, reduce_over_shards):
    _SHARDED[_key(param)] = reduce_over_shards


# Modules that are one pipeline stage each (PipelineStage registers them): the gradient norm of their
# parameters is partial, its powers summed (or maxed) over the pipeline's ranks as well.
# (weak reference to the module, function reducing a float64 tensor in place over the pipeline group)
_PIPELINE_STAGES = []


def register_pipeline_stage(module, reduce_over_stages):
    import weakref
    if not hasattr(module, "parameters"):
        return  # a stage that is a plain callable: its parameters are not known here
    _PIPELINE_STAGES[:] = [(ref, r) for ref, r in _PIPELINE_STAGES if ref() is not None and ref() is not module]
    try:
        ref = weakref.ref(module)
    except TypeError:  # a C++ layer's handle without weak references: held (stage modules live for the job)
        ref = (lambda m: lambda: m)(module)
    _PIPELINE_STAGES.append((ref, reduce_over_stages))


def _pipeline_reducers(parameters):
    """The distinct pipeline reducers of the stages these parameters belong to."""
    keys = {_key(_local(p)) for p in parameters}
    found = {}
    for ref, reduce in _PIPELINE_STAGES:
        module = ref()
        if module is not None and any(_key(_local(q)) in keys for q in module.parameters()):
            found[id(reduce)] = reduce
    return list(found.values())


def _moved(old, new):
    """Module.to_empty replaced parameter `old` by `new`: a shard stays a shard."""
    reducer = _SHARDED.pop(_key(old), None)
    if reducer is not None:
        _SHARDED[_key(new)] = reducer


def _local(p):
    return p.to_local() if hasattr(p, "to_local") else p  # a DTensor: its local piece


def _with_grads(parameters):
    """The parameters (one tensor, or an iterable of them) that have a gradient, as a list."""
    if trainrun._C._is_cpp_tensor(parameters) or hasattr(parameters, "to_local"):
        parameters = [parameters]
    return [p for p in parameters if _local(p).grad is not None]


def _grads(parameters):
    return [_local(p).grad for p in _with_grads(parameters)]


def _grad_norm(p, reducer, norm_type):
    """p's gradient norm (float64, shape [1]). A registered shard's is its local piece's (the caller combines them
    over the ranks); any other DTensor parameter's is its whole gradient's, which the DTensor's own norm reduces
    over the mesh (a parameter sharded by hand, not by fully_shard or tensor parallelism)."""
    if reducer is None and hasattr(p, "to_local") and not all(q.is_replicate() for q in p.placements):
        return p.grad.detach().norm(norm_type, dtype=trainrun.float64).full_tensor().reshape(1)
    return _local(p).grad.detach().to(trainrun.float64).norm(norm_type).reshape(1)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales the gradients so that their joint norm is at most max_norm;
    returns that norm (before clipping) as a tensor."""
    if max_norm < 0:
        raise ValueError(f"clip_grad_norm_: max_norm must be non-negative, got {max_norm}")
    norm_type = float(norm_type)  # (PyTorch takes "inf" too)
    single = trainrun._C._is_cpp_tensor(parameters) or hasattr(parameters, "to_local")  # (a tensor or a DTensor)
    parameters = [parameters] if single else list(parameters)
    with_grads = _with_grads(parameters)
    if not with_grads:
        return trainrun.tensor(0.0)
    grads = [_local(p).grad for p in with_grads]
    reducers = [_SHARDED.get(_key(_local(p))) for p in with_grads]
    over_stages = _pipeline_reducers(parameters)
    with trainrun.no_grad():
        norms = [_grad_norm(p, r, norm_type) for p, r in zip(with_grads, reducers)]
        if math.isinf(norm_type):
            parts = [n for n, r in zip(norms, reducers) if r is None]
            for r in {id(r): r for r in reducers if r is not None}.values():  # a shard's max, over its ranks
                m = trainrun.stack([n for n, rr in zip(norms, reducers) if rr is r], 0).amax().reshape(1)
                parts.append(r(m, "max"))
            total = trainrun.cat(parts, 0).amax().reshape(1)
            for r in over_stages:  # every pipeline stage's maximum
                total = r(total, "max")
            total = total.reshape(())
        else:
            p = float(norm_type)
            powered = [n ** p for n, r in zip(norms, reducers) if r is None]
            for r in {id(r): r for r in reducers if r is not None}.values():  # shards' powers add up over ranks
                s = trainrun.stack([n ** p for n, rr in zip(norms, reducers) if rr is r], 0).sum().reshape(1)
                powered.append(r(s, "sum"))
            summed = trainrun.cat(powered, 0).sum().reshape(1)
            for r in over_stages:  # every pipeline stage's powers
                summed = r(summed, "sum")
            total = summed.reshape(()) ** (1.0 / p)
        total_value = total.item()
        if error_if_nonfinite and not math.isfinite(total_value):
            raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} is {total_value}")
        coef = max_norm / (total_value + 1e-6)
        if coef < 1:
            for g in grads:
                g.mul_(coef)
    return _as_parameters_kind(total.to(grads[0].dtype), parameters)


def _as_parameters_kind(total, parameters):
    """The total norm (of the list `parameters`) as PyTorch returns it: a DTensor when the gradients are DTensors (FSDP2, tensor
    parallel), replicated over the first one's mesh (every rank holds the whole norm), else a plain tensor."""
    first = next((p for p in parameters if hasattr(p, "to_local")), None)
    if first is None:
        return total
    from trainrun.distributed.tensor import Replicate
    mesh = first.device_mesh
    return type(first).from_local(total, mesh, [Replicate()] * mesh.ndim)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of the norms of tensors (PyTorch 2.6's first half of clip_grad_norm_), as a tensor."""
    tensors = [tensors] if trainrun._C._is_cpp_tensor(tensors) else [t for t in tensors if t is not None]
    norm_type = float(norm_type)  # (PyTorch takes "inf" too)
    if not tensors:
        return trainrun.tensor(0.0)
    with trainrun.no_grad():
        norms = trainrun.stack([t.detach().to(trainrun.float64).norm(float(norm_type)) for t in tensors])
        total = norms.amax() if math.isinf(norm_type) else norms.norm(float(norm_type))
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(f"get_total_norm: the total norm of order {norm_type} is {total.item()}")
    return total.to(tensors[0].dtype)


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scales the gradients by max_norm / (total_norm + 1e-6) when that is below 1 (PyTorch 2.6's second half of
    clip_grad_norm_)."""
    grads = _grads(parameters)
    coef = max_norm / (float(total_norm) + 1e-6)
    if coef < 1:
        with trainrun.no_grad():
            for g in grads:
                g.mul_(coef)


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs) with its parameters and buffers allocated but not initialized (made on the meta
    device, then given empty memory on `device`)."""
    device = kwargs.pop("device", "cpu")
    return module_cls(*args, device="meta", **kwargs).to_empty(device=device)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every gradient element to [-clip_value, clip_value] (foreach: PyTorch's choice of kernel,
    accepted)."""
    with trainrun.no_grad():
        for g in _grads(parameters):
            g.copy_(g.clamp(-clip_value, clip_value))


def parameters_to_vector(parameters):
    return trainrun.cat([p.reshape(-1) for p in parameters], 0)


def vector_to_parameters(vec, parameters):
    offset = 0
    with trainrun.no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[offset:offset + n].view(*p.shape))
            offset += n
from trainrun.nn.utils import rnn  # noqa: E402,F401
from trainrun.nn.utils import parametrize, parametrizations  # noqa: E402,F401
from trainrun.nn.utils import fusion, prune, stateless  # noqa: E402,F401
from trainrun.nn.utils.fusion import (fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval,  # noqa: E402,F401
                                      fuse_linear_bn_weights)
from trainrun.nn.utils._legacy_norms import (remove_spectral_norm, remove_weight_norm, spectral_norm,  # noqa: E402,F401
                                             weight_norm)


def convert_conv2d_weight_memory_format(module, memory_format):
    """PyTorch's helper to put Conv2d weights in channels_last; trainrun keeps one layout, so the module comes
    back as it is (its results do not depend on the layout)."""
    return module


convert_conv3d_weight_memory_format = convert_conv2d_weight_memory_format
# torch.nn.utils.clip_grad (the module PyTorch's clip functions live in)
import sys as _sys  # noqa: E402
import types as _types  # noqa: E402
clip_grad = _types.ModuleType(__name__ + ".clip_grad", "torch.nn.utils.clip_grad")
clip_grad.clip_grad_norm_, clip_grad.clip_grad_value_ = clip_grad_norm_, clip_grad_value_
clip_grad.get_total_norm, clip_grad.clip_grads_with_norm_ = get_total_norm, clip_grads_with_norm_
clip_grad.clip_grad_norm = clip_grad_norm = clip_grad_norm_  # (the deprecated name)
_sys.modules[clip_grad.__name__] = clip_grad
