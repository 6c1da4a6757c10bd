"""trainrun.compile: a call is recorded once at the dispatcher (compile/,
below Python, so modules written in C++ or Python are seen alike) and later
calls that pass the same guards replay the recorded ops without running the
Python code again.

Guards, per compiled function: each tensor argument's shape, strides,
dtype, device and requires_grad; the other arguments' values; grad mode;
autocast's state (on or off, and its dtype, per device type);
the default dtype and device (what factories in the call make);
the plain Python values the code read from module attributes, globals and
closures (trainrun/_compile_guards.py; tensors reached that way are inputs);
which tensor arguments are the same object (f(x, x) is not f(x, y));
for a module, whether it is training, and its parameters and buffers, which
are inputs of the recording like the arguments (a replay reads the tensors
the module holds then: a replaced parameter, or the ones FSDP gathers each
step). A call that fails them is recorded anew (a new shape), up to
`trainrun._dynamo.config.cache_size_limit` recordings, then runs eagerly. A call whose recording
broke (it read a tensor's values into Python, ran a backward pass, or ran an
autograd.Function) runs eagerly for those guards from then on, with the same
results; `explain()` (or `explain=True`) tells which calls broke and why.
fullgraph=True makes a break an error instead.

With grad enabled and outputs that require grad, the backward is recorded
too, from the first call (compile/joint_graph.h): replays run the forward
without building autograd's graph, keep only what the backward formulas
read, and give the outputs one autograd node that runs the recorded
backward. Where it cannot be recorded (explain() says why), replays build
autograd's graph op by op, as the eager call does.

Both programs then lose their dead nodes and have their pointwise runs
fused into generated loops (compile/dead_code.h, compile/fusion.h).

backend= a callable instead: it is handed each recording as a GraphModule and
replays call what it returns (trainrun/_compile_backend.py).
trainrun._dynamo.utils.counters counts recordings, ops and graph breaks."""
import collections
import functools
import logging
import weakref

from trainrun import _C, _compile_backend
from trainrun._compile_guards import PythonGuard
from trainrun._compile_side_effects import python_side_effects_break
from trainrun._dynamo import config as _config
from trainrun._dynamo.utils import counters
from trainrun.nn._module import _handed_out

_compiled_functions = weakref.WeakSet()  # every CompiledFunction: trainrun.compiler.reset() clears them all
# trainrun.compiler.set_stance's: "default", "force_eager" (calls run as Python), "eager_on_recompile" (a call no
# recording fits runs as Python once one exists), "fail_on_recompile" (it raises then).
_stance = "default"
# What trainrun._logging.set_logs(graph_breaks=True, recompiles=True) turns on (debug records, off by default).
_graph_break_log = logging.getLogger("trainrun._dynamo.graph_breaks")
_recompile_log = logging.getLogger("trainrun._dynamo.recompiles")


class RecompileError(RuntimeError):
    """A call needed a new recording under set_stance("fail_on_recompile")."""


class GraphBreakError(RuntimeError):
    """fullgraph=True and the call could not be recorded whole."""


_NOTHING_REQUIRES_GRAD = "nothing the call reads requires grad"  # (JointGraph::record's reason, joint_graph.cc)


def _flatten(tree, tensors):
    """A spec to rebuild nested tuples, lists and dicts from their tensors, which go into `tensors` in order (the
    other leaves stay in the spec: constants of the recording, parts of the guards)."""
    if _C._is_cpp_tensor(tree):
        tensors.append(tree)
        return ("T",)
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return ("N", type(tree), tuple(_flatten(v, tensors) for v in tree))
    if isinstance(tree, (tuple, list)):
        return (type(tree).__name__, tuple(_flatten(v, tensors) for v in tree))
    if isinstance(tree, dict):
        return ("dict", tuple(tree.keys()), tuple(_flatten(v, tensors) for v in tree.values()))
    return ("C", tree)


def _unflatten(spec, tensors):
    kind = spec[0]
    if kind == "T":
        return next(tensors)
    if kind == "N":
        return spec[1](*(_unflatten(s, tensors) for s in spec[2]))
    if kind in ("tuple", "list"):
        items = [_unflatten(s, tensors) for s in spec[1]]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        return dict(zip(spec[1], (_unflatten(s, tensors) for s in spec[2])))
    return spec[1]


def _autocast_state(device_type):
    """Autocast's dtype for the device type when it is on, else None (a dtype set while off changes nothing)."""
    enabled, dtype = _C._get_autocast(device_type)
    return dtype if enabled else None


def _aliasing(tensors):
    """None when the tensors are distinct objects, else each one's first position: a recording made with one
    tensor passed twice (f(x, x)) reads one input for both, so it must not replay f(x, y)."""
    ids = [id(t) for t in tensors]
    if len(set(ids)) == len(ids):
        return None
    return tuple(ids.index(i) for i in ids)


# passthrough: (output position, input position) of the outputs that are inputs, returned as the caller's objects
# joint: the forward and backward graph (a _JointGraph), or None (then joint_reason says why)
# custom: for a backend given as a callable, (what it returned, the number of outputs); None for trainrun's own.
# graph: what replays run (fused, numbers made once: see explain()); recorded: the ops as the call made them
_Recording = collections.namedtuple("_Recording", "graph joint joint_reason fusion_note out_spec passthrough custom "
                                    "recorded")


class _Eager:
    def __init__(self, reason):
        self.reason = reason


class CompiledFunction:
    """fn with its recordings, keyed by guards."""

    def __init__(self, fn, module=None, fullgraph=False, explain=False, backend="inductor"):
        self._fn, self._module, self._fullgraph, self._explain = fn, module, fullgraph, explain
        self._backend = backend  # a name (trainrun's recordings) or a callable (_compile_backend.py)
        self._python_guard = PythonGuard(fn, module)  # attributes, globals and closure values it bakes in
        self._cache = {}
        self._bound = weakref.WeakKeyDictionary()  # a decorated method: the instance's own compiled function
        self.calls = self.replays = 0
        functools.update_wrapper(self, fn)
        _compiled_functions.add(self)

    def __get__(self, obj, objtype=None):
        """@trainrun.compile on a method (a module's forward): per instance, the method bound to it, compiled
        with that instance's parameters and buffers as inputs, as compile(module) does."""
        if obj is None:
            return self
        bound = self._bound.get(obj)
        if bound is None:
            module = obj if isinstance(obj, _C.nn.Module) else None
            bound = CompiledFunction(functools.partial(self._fn, obj), module=module, fullgraph=self._fullgraph,
                                     explain=self._explain, backend=self._backend)
            self._bound[obj] = bound
        return bound

    def _module_tensors(self):
        """A module's parameters and buffers, passed to the recording as inputs after the arguments: a replay
        reads the tensors the module holds now (FSDP gathers new ones each step), guarded by their metadata."""
        m = self._module
        if m is None:
            return []
        return m._registry_tensors()

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if _stance == "force_eager":
            return self._fn(*args, **kwargs)
        if _C._capture_active():  # inside another recording (a compiled module exported, or called by a compiled
            return self._fn(*args, **kwargs)  # function): its ops join that recording, as torch inlines it
        # The arguments' tensors, in order (the rest is in the spec), then the module's, then those the code reaches
        # through globals, closures and module attributes.
        tensors = []
        in_spec = _flatten((args, kwargs), tensors)
        tensors += self._module_tensors()
        try:
            python_values = self._python_guard(tensors)
            key = (in_spec, _C._tensor_guards(tensors), _aliasing(tensors), _C.is_grad_enabled(),
                   self._module is not None and self._module.training,
                   _C._ops.get_default_dtype(), _C._get_default_device(),  # (what factories in the call make)
                   _autocast_state("cpu"), _autocast_state("cuda"),  # (the dtypes autocast gives the ops)
                   python_values)
            hash(key)
        except TypeError:  # an argument that cannot be a guard (unhashable): run it as it is
            return self._fn(*args, **kwargs)
        entry = self._cache.get(key)
        if isinstance(entry, _Recording):
            self.replays += 1
            return self._replay(entry, tensors)
        if isinstance(entry, _Eager):
            return self._fn(*args, **kwargs)
        if self._cache:
            if _stance == "fail_on_recompile":
                raise RecompileError(f"Detected recompile when torch.compile stance is 'fail_on_recompile': "
                                     f"{self._name()} was called with guards no recording of it fits (a new "
                                     "shape, dtype, grad mode or training mode)")
            if _stance == "eager_on_recompile":
                return self._fn(*args, **kwargs)
            _recompile_log.debug("Recompiling function %s: no recording of its %d fits the call's guards",
                                 self._name(), len(self._cache))
            counters["recompiles"]["total"] += 1
        limit = _config.cache_size_limit
        if len(self._cache) >= limit:
            self._cache[key] = _Eager(f"cache_size_limit ({limit}) reached: more guards than recordings "
                                      "kept")
            return self._fn(*args, **kwargs)
        return self._record(key, tensors, args, kwargs)

    @staticmethod
    def _replay(entry, tensors):
        if entry.custom is not None:
            outputs = _compile_backend.run_compiled(entry.custom[0], tensors, entry.custom[1])
        else:
            outputs = (entry.joint or entry.graph).run(tensors)
        for out, given in entry.passthrough:  # (a module's tensor: the object the module hands out for it)
            outputs[out] = _handed_out.get(tensors[given]._cdata, tensors[given])
        return _unflatten(entry.out_spec, iter(outputs))

    def _record(self, key, tensors, args, kwargs):
        graph = _C._CapturedGraph()
        capture = _C._GraphCapture(graph, tensors)
        with capture, python_side_effects_break(self._fn, self._module):
            result = self._fn(*args, **kwargs)
            out_leaves = []
            out_spec = _flatten(result, out_leaves)
            capture.finish(out_leaves)
            joint = None
            custom = callable(self._backend)
            if not capture.broken and _C.is_grad_enabled() and not custom:
                joint = capture.record_backward(out_leaves)
            joint_reason = capture.joint_reason
        fusion_note = joint.fusion_note if joint is not None else ""
        counters["frames"]["total"] += 1
        recorded = graph
        reason = capture.break_reason if capture.broken else None
        if reason is None and joint is None and not custom and _C.is_grad_enabled() and \
                joint_reason == _NOTHING_REQUIRES_GRAD and any(t.requires_grad for t in out_leaves):
            reason = ("an output requires grad through a tensor made in the call (requires_grad=True there), "
                      "which a replay would make without it")
        if reason is None and joint is None and not custom:
            graph, numbers = _C._hoist_scalars(graph)  # (a joint graph does this itself)
            # Under no_grad, or with nothing read or given requiring grad (a function of plain tensors): no
            # autograd graph to keep, so pointwise runs fuse.
            grad_free = _C.is_grad_enabled() and joint_reason == _NOTHING_REQUIRES_GRAD
            if grad_free or not _C.is_grad_enabled():
                graph, fusion_note, _ = _C._fuse_graph(graph, grad_free)
            fusion_note = f"{numbers} numbers made once" + (f"; {fusion_note}" if fusion_note else "")
        if reason is not None:
            if self._fullgraph:
                raise GraphBreakError(f"trainrun.compile(fullgraph=True): {self._name()} could not be recorded "
                                      f"whole: {reason}")
            self._cache[key] = _Eager(reason)
            counters["graph_break"][reason] += 1
            _graph_break_log.debug("Graph break in %s (it runs eagerly for these guards): %s", self._name(), reason)
            if self._explain:
                print(f"trainrun.compile: {self._name()} runs eagerly for these guards: {reason}")
            return result
        passthrough = [(j, i) for j, o in enumerate(out_leaves) for i, t in enumerate(tensors)
                       if o is t or o._cdata == t._cdata]
        counters["frames"]["ok"] += 1
        counters["stats"]["unique_graphs"] += 1
        counters["stats"]["calls_captured"] += recorded.num_nodes
        repeatable = False
        if custom:
            compiled, repeatable = _compile_backend.call_backend(self._backend, graph, tensors, self._module)
            custom = (compiled, len(out_leaves))
            fusion_note = f"compiled by the backend {getattr(self._backend, '__name__', type(self._backend).__name__)}"
        entry = self._cache[key] = _Recording(graph, joint, joint_reason, fusion_note, out_spec, passthrough,
                                              custom or None, recorded)
        if self._explain:
            print(f"trainrun.compile: {self._name()} recorded {recorded.num_nodes} ops "
                  f"({graph.num_inputs} inputs, {graph.num_constants} constant tensors); "
                  f"{self._backward_note(joint, joint_reason)}; {fusion_note or 'not fused'}")
        if repeatable:  # as PyTorch's, the first call's result is the backend's too (running the recording again
            return self._replay(entry, tensors)  # repeats no effect); else it stays the recorded eager one
        return result

    @staticmethod
    def _backward_note(joint, reason):
        if joint is not None:
            return f"backward recorded: {joint.backward_nodes} ops, reading {joint.num_saved} forward values"
        return f"no recorded backward ({reason})" if reason else "no recorded backward (grad disabled)"

    def _name(self):
        if self._module is not None:
            return type(self._module).__name__
        return getattr(self._fn, "__qualname__", None) or type(self._fn).__name__

    def explain(self):
        """What the cache holds: per set of guards, the recorded graph's size or why it runs eagerly."""
        lines = [f"{self._name()}: {self.calls} calls, {self.replays} replayed, {len(self._cache)} guard sets"]
        for i, entry in enumerate(self._cache.values()):
            if isinstance(entry, _Recording):
                note = f"{self._backward_note(entry.joint, entry.joint_reason)}; {entry.fusion_note or 'not fused'}"
                if entry.joint is not None:
                    lines.append(f"  [{i}] graph of {entry.graph.num_nodes} ops, {note}:\n{entry.joint}".rstrip())
                else:
                    lines.append(f"  [{i}] graph of {entry.graph.num_nodes} ops, {note}:\n{entry.graph}".rstrip())
            else:
                lines.append(f"  [{i}] graph break, runs eagerly: {entry.reason}")
        return "\n".join(lines)

    def reset(self):
        self._cache.clear()


@functools.lru_cache(maxsize=None)  # one class: isinstance(m, torch._dynamo.eval_frame.OptimizedModule)
def _optimized_module_class():
    from trainrun import nn

    class OptimizedModule(nn.Module):
        """What compile(module) returns: calls go through the recordings; `_orig_mod` is the module (its state
        dict keys start with "_orig_mod.", as PyTorch's)."""

        def __init__(self, mod, compiled):
            super().__init__()
            self._orig_mod = mod
            object.__setattr__(self, "_compiled", compiled)

        def forward(self, *args, **kwargs):
            return self._compiled(*args, **kwargs)

        def explain(self):
            return self._compiled.explain()

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self._orig_mod, name)

    return OptimizedModule


# torch.compile's modes and backend names: all run trainrun's recordings (there are no CUDA graphs to capture and
# no autotuning to do), so they are accepted for PyTorch scripts and checked for typos.
_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
_BACKENDS = {"inductor", "eager", "aot_eager", "aot_eager_decomp_partition", "cudagraphs"}


def _check_options(mode, backend, options):
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(m for m in _MODES if m)}")
    if callable(backend):  # handed each recording as a GraphModule (trainrun/_compile_backend.py)
        return
    if backend not in _BACKENDS:
        raise RuntimeError(f"compile: backend={backend!r} cannot be found; the backends are {sorted(_BACKENDS)} "
                           "(each runs trainrun's recordings)")


def compiled_call(module, call, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
                  disable=False, explain=False):
    """module.compile(**options)'s compiled call: `call` (the module's own, uncompiled) recorded with the module's
    parameters and buffers as inputs, as compile(module) records. None when disable=True."""
    _check_options(mode, backend, options)
    if disable:
        return None
    return CompiledFunction(call, module=module, fullgraph=fullgraph, explain=explain, backend=backend)


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,  # noqa: A001
            disable=False, explain=False):
    """torch.compile's signature: a function or module whose calls are recorded and replayed (the module
    docstring says how). Usable as a decorator (on functions and methods), with or without arguments."""
    _check_options(mode, backend, options)
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                 options=options, disable=disable, explain=explain)
    if disable or getattr(model, "_trainrun_compile_disabled", False):  # (trainrun.compiler.disable's)
        return model
    if isinstance(model, _C.nn.Module):  # Python modules and C++ layers (nn.Linear) alike
        compiled = CompiledFunction(model.__call__, module=model, fullgraph=fullgraph, explain=explain,
                                    backend=backend)
        return _optimized_module_class()(model, compiled)
    if not callable(model):
        raise TypeError(f"compile: expected a function or an nn.Module, got {type(model).__name__}")
    return CompiledFunction(model, fullgraph=fullgraph, explain=explain, backend=backend)
