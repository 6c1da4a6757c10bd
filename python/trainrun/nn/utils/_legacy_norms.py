"""torch.nn.utils.weight_norm / spectral_norm (the forms before parametrizations, still common in audio and
GAN code), with their parameter names: weight_g and weight_v; weight_orig with the buffers weight_u and
weight_v. The module's weight is a property of a class derived for it (parametrize.derive_class), computed at
each read; spectral_norm's power iteration runs once per training forward (a forward pre-hook)."""
from trainrun._autograd import no_grad
import trainrun
from trainrun import _C
from trainrun.nn import functional as F
from trainrun.nn.parameter import Parameter
from trainrun.nn.utils import parametrize
from trainrun.nn.utils.parametrizations import _norm_except_dim


def weight_norm(module, name="weight", dim=0):
    """module.name = name_g * name_v / ||name_v||, with name_g and name_v the module's parameters."""
    if isinstance(vars(type(module)).get(name), property):
        raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
    weight = getattr(module, name)
    dim = -1 if dim is None else dim
    with no_grad():
        g, v = _norm_except_dim(weight.detach(), dim).clone(), weight.detach().clone()
    parametrize.unregister(module, name)
    module.register_parameter(name + "_g", Parameter(g))
    module.register_parameter(name + "_v", Parameter(v))
    parametrize.derive_class(module, "WeightNormed")

    def compute(self):
        v_ = getattr(self, name + "_v")
        return v_ * (getattr(self, name + "_g") / _norm_except_dim(v_, dim))
    setattr(type(module), name, property(compute))
    module.__dict__.setdefault("_legacy_norms", {})[name] = ("weight_norm", dim)
    return module


def _remove(module, name, kind, registered):
    """The computed weight back as a plain parameter; the tensors it was computed from unregistered."""
    entry = module.__dict__.get("_legacy_norms", {}).get(name)
    if entry is None or entry[0] != kind:
        raise ValueError(f"{kind} of '{name}' not found in {module}")
    if kind == "spectral_norm":
        entry[1].remove()  # (its power-iteration hook)
    with no_grad():
        weight = getattr(module, name).detach().clone()
    delattr(type(module), name)
    for suffix in registered:
        parametrize.unregister(module, name + suffix)
    del module.__dict__["_legacy_norms"][name]
    parametrize.restore_class(module)
    module.register_parameter(name, Parameter(weight))
    return module


def remove_weight_norm(module, name="weight"):
    return _remove(module, name, "weight_norm", ("_g", "_v"))


def _as_matrix(weight, dim):
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.ndim) if d != dim))
    return weight.flatten(1)


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """module.name = name_orig / sigma, sigma its largest singular value estimated with the buffers name_u
    and name_v (n_power_iterations steps before each training forward)."""
    if isinstance(vars(type(module)).get(name), property):
        raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
    if n_power_iterations <= 0:
        raise ValueError(f"Expected n_power_iterations to be positive, but got n_power_iterations="
                         f"{n_power_iterations}")
    if dim is None:
        dim = 1 if parametrize.type_before_parametrizations(module).__name__.startswith("ConvTranspose") else 0
    weight = getattr(module, name)
    with no_grad():
        matrix = _as_matrix(weight.detach(), dim)
        u = F.normalize(_C.randn([matrix.shape[0]], dtype=weight.dtype), dim=0, eps=eps)
        v = F.normalize(_C.randn([matrix.shape[1]], dtype=weight.dtype), dim=0, eps=eps)
        original = weight.detach().clone()
    parametrize.unregister(module, name)
    module.register_parameter(name + "_orig", Parameter(original))
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    parametrize.derive_class(module, "SpectralNormed")

    def power_iteration(self, inputs):
        if self.training:
            with no_grad():
                m = _as_matrix(getattr(self, name + "_orig"), dim)
                u_, v_ = getattr(self, name + "_u"), getattr(self, name + "_v")
                for _ in range(n_power_iterations):
                    v_.copy_(F.normalize(trainrun.mv(m.t(), u_), dim=0, eps=eps))
                    u_.copy_(F.normalize(trainrun.mv(m, v_), dim=0, eps=eps))

    def compute(self):
        w = getattr(self, name + "_orig")
        u_, v_ = getattr(self, name + "_u").clone(), getattr(self, name + "_v").clone()
        return w / (u_ * trainrun.mv(_as_matrix(w, dim), v_)).sum()
    setattr(type(module), name, property(compute))
    handle = module.register_forward_pre_hook(power_iteration)
    module.__dict__.setdefault("_legacy_norms", {})[name] = ("spectral_norm", handle)
    return module


def remove_spectral_norm(module, name="weight"):
    return _remove(module, name, "spectral_norm", ("_orig", "_u", "_v"))
