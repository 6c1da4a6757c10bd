"""Modules at PyTorch's import paths whose contents live elsewhere in trainrun (`from torch.optim.adam import
Adam`, `import torch.autograd.profiler`): one call makes the module, registers it for import, and hangs it on its
parent package as PyTorch's are."""
import sys
import types


def module_at(name, doc, **attrs):
    """A module named `name` (e.g. "trainrun.optim.adam") holding `attrs`, importable and reachable as an
    attribute of its parent."""
    module = types.ModuleType(name, doc)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    parent, _, leaf = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], leaf, module)
    return module


def _legacy_profile_class():
    from trainrun import profiler

    class profile(profiler.profile):  # noqa: N801  (PyTorch's name)
        """torch.autograd.profiler.profile: the older spelling, whose first argument is `enabled`
        (`with profile(use_cuda=False) as prof: ...; prof.key_averages().table()`)."""

        def __init__(self, enabled=True, **kwargs):
            super().__init__(enabled=enabled, **kwargs)
    return profile


def install():
    """The paths of PyTorch modules whose contents trainrun keeps elsewhere. A module whose name PyTorch's parent
    package shadows with a function (torch.nn.utils.spectral_norm, torch.autograd.gradcheck) is importable but
    not attached, so the attribute stays the function, as in PyTorch."""
    import trainrun
    from trainrun import _gradcheck, nn, profiler
    from trainrun.profiler import _events
    module_at("trainrun.autograd.profiler", "torch.autograd.profiler: the older profiler entry points",
              profile=_legacy_profile_class(), record_function=profiler.record_function,
              EventList=_events.EventList, FunctionEvent=_events.FunctionEvent, DeviceType=_events.DeviceType,
              kineto_available=lambda: False)  # (trainrun records at its own dispatcher, not through Kineto)
    _attach_quietly("trainrun.autograd.gradcheck", "torch.autograd.gradcheck", gradcheck=_gradcheck.gradcheck,
                    gradgradcheck=_gradcheck.gradgradcheck, GradcheckError=_gradcheck.GradcheckError)
    module_at("trainrun.profiler.profiler", "torch.profiler.profiler",
              **{n: getattr(profiler, n) for n in ("profile", "ProfilerAction", "ProfilerActivity", "schedule",
                                                   "tensorboard_trace_handler", "record_function")})
    module_at("trainrun.storage", "torch.storage", UntypedStorage=trainrun.UntypedStorage,
              TypedStorage=trainrun.TypedStorage)
    module_at("trainrun.backends.cpu", "torch.backends.cpu",
              get_cpu_capability=lambda: "AVX2")  # (the eager kernels are built for x86-64-v3: AVX2 + FMA)
    module_at("trainrun.backends.opt_einsum", "torch.backends.opt_einsum: opt_einsum is not installed here, so "
              "einsum contracts left to right, as PyTorch does without it", is_available=lambda: False,
              get_opt_einsum=lambda: None, enabled=False, strategy=None)
    utils = nn.utils
    _attach_quietly("trainrun.nn.utils.spectral_norm", "torch.nn.utils.spectral_norm",
                    spectral_norm=utils.spectral_norm, remove_spectral_norm=utils.remove_spectral_norm)
    _attach_quietly("trainrun.nn.utils.weight_norm", "torch.nn.utils.weight_norm",
                    weight_norm=utils.weight_norm, remove_weight_norm=utils.remove_weight_norm)
    module_at("trainrun.nn.utils.init", "torch.nn.utils.init", skip_init=utils.skip_init)
    module_at("trainrun.nn.utils.memory_format", "torch.nn.utils.memory_format",
              convert_conv2d_weight_memory_format=utils.convert_conv2d_weight_memory_format,
              convert_conv3d_weight_memory_format=utils.convert_conv3d_weight_memory_format)
    module_at("trainrun.nn.utils.convert_parameters", "torch.nn.utils.convert_parameters",
              parameters_to_vector=utils.parameters_to_vector, vector_to_parameters=utils.vector_to_parameters)


def _attach_quietly(name, doc, **attrs):
    parent, _, leaf = name.rpartition(".")
    shadowing = getattr(sys.modules[parent], leaf)
    module_at(name, doc, **attrs)
    setattr(sys.modules[parent], leaf, shadowing)


def submodule_getattr(package_name):
    """A module __getattr__ (PEP 562) for package `package_name` that imports a submodule the first time it is read
    as an attribute (torch.distributed.tensor.parallel after import torch), as PyTorch's packages have theirs."""
    def __getattr__(name):
        import importlib
        import importlib.util
        if not name.startswith("__") and importlib.util.find_spec(f"{package_name}.{name}") is not None:
            return importlib.import_module(f"{package_name}.{name}")
        raise AttributeError(f"module '{package_name}' has no attribute '{name}'")
    return __getattr__
