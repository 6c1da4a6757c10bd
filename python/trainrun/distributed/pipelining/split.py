"""pipeline(): a model split into pipeline stages at split points, as
PyTorch's `pipeline(module, mb_args, split_spec={"layers.4":
SplitPoint.BEGINNING})`, for models whose forward runs their blocks one after
another (nn.Sequential, a transformer's blocks in a ModuleList, with any glue
code between them).

trainrun has no graph tracer yet, so the split works at module granularity.
One forward on meta tensors (shapes only, nothing computed) records when each
submodule is entered and left; the split points cut that sequence into
stages. A stage owns the submodules called wholly inside its part, under
their original names (`layers.4.weight` stays `layers.4.weight`, so the
stages' checkpoints join into the model's). It runs the model's own forward:
the part before its first split point on meta tensors (the glue code there
runs, at no cost), its own part for real from the tensors it received, and
stops at its last split point, returning the tensors that cross it: the
tensor arguments of the module split at its BEGINNING, or the output of one
split at its END.

What a traced graph would handle and this does not: a value computed before
a split point that reaches a later stage other than through the split
module's arguments (a skip connection around it, a weight tied across
stages). Such a stage fails at its first step with an error that says so;
split such models by hand (PipelineStage on a module with the other stages'
layers deleted)."""
import bisect
import contextvars
import copy
import enum
import itertools

from trainrun import _C
from trainrun.distributed.pipelining.stage import PipelineStage
from trainrun.nn._module import Module
from trainrun.nn.parameter import Parameter


class SplitPoint(enum.Enum):
    BEGINNING = 1  # the stage boundary is just before the module runs: its arguments cross
    END = 2  # just after: its output crosses


_running = contextvars.ContextVar("trainrun_pipeline_stage_running", default=None)
_tracing = contextvars.ContextVar("trainrun_pipeline_tracing", default=None)  # the _Trace's pipe_split recorder


def pipe_split():
    """PyTorch's marker in a model's forward: pipeline() splits there. Here it stands for the beginning of the
    next submodule the forward calls after it (what crosses is that call's tensor arguments); outside
    pipeline()'s trace it does nothing."""
    record = _tracing.get()
    if record is not None:
        record()


class _Reached(Exception):
    """Raised at a stage's last split point to stop the model's forward there, carrying what crosses it."""

    def __init__(self, value):
        super().__init__("pipeline stage boundary")
        self.value = value


def _key(t):
    return ("trainrun.tensor", t._cdata)  # how deepcopy's memo knows a tensor (_tensor_pickling)


def _meta_like(t):
    m = _C.empty(list(t.shape), dtype=t.dtype, device="meta")
    return Parameter(m, requires_grad=t.requires_grad) if isinstance(t, Parameter) else m


def _map_tensors(value, fn):
    if _C._is_cpp_tensor(value):
        return fn(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_map_tensors(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _map_tensors(v, fn) for k, v in value.items()}
    return value


def _crossing(args, kwargs):
    """The tensors among a module's arguments, in order (positional, then keyword)."""
    return [a for a in list(args) + list(kwargs.values()) if _C._is_cpp_tensor(a)]


def _own_tensors(module):
    return list(module._named_local_parameters("", False)), list(module.named_buffers("", False))


def _child(module, name):
    py = module.__dict__.get("_children_py", {})
    return py[name] if name in py else dict(module.named_children())[name]


def _submodule(module, path):
    for part in path.split(".") if path else []:
        module = _child(module, part)
    return module


def _copy_model(module, memo):
    """copy.deepcopy(module) with memo's choices (tensors to share or replace, modules to keep); layers built
    in the copy allocate on meta, their weights being replaced anyway."""
    with _C.device("meta"):
        return copy.deepcopy(module, memo)


class _Trace:
    """When each submodule (by path) was entered and left, in one forward of the model on meta tensors."""

    def __init__(self, module, mb_args, mb_kwargs):
        memo = {}
        for m in module.modules():
            params, buffers = _own_tensors(m)
            for _, t in params + buffers:
                memo.setdefault(_key(t), _meta_like(t))
        shadow = _copy_model(module, memo)
        self.args = _map_tensors(tuple(mb_args), lambda t: _C.empty(list(t.shape), dtype=t.dtype, device="meta"))
        self.kwargs = _map_tensors(dict(mb_kwargs or {}), lambda t: _C.empty(list(t.shape), dtype=t.dtype,
                                                                            device="meta"))
        self.enters, self.leaves, self.outputs = {}, {}, {}
        clock, handles = itertools.count(), []

        def enter(path):
            return lambda mod, args, kwargs: self.enters.setdefault(path, []).append(next(clock))

        def leave(path):
            def hook(mod, args, output):
                self.leaves.setdefault(path, []).append(next(clock))
                self.outputs[path] = output
            return hook
        self.paths = [path for path, _ in shadow.named_modules()]
        for path, m in shadow.named_modules():
            handles.append(m.register_forward_pre_hook(enter(path), with_kwargs=True))
            handles.append(m.register_forward_hook(leave(path)))
        self.pipe_splits = []
        token = _tracing.set(lambda: self.pipe_splits.append(next(clock)))
        try:
            shadow(*self.args, **self.kwargs)
        finally:
            _tracing.reset(token)
            for h in handles:
                h.remove()

    def pipe_split_points(self):
        """{path: SplitPoint.BEGINNING} of the first submodule entered after each pipe_split() call."""
        out = {}
        for tick in self.pipe_splits:
            after = [(ticks[0], path) for path, ticks in self.enters.items() if path and ticks[0] > tick]
            if not after:
                raise ValueError("pipeline(): pipe_split() is called after the forward's last submodule call; "
                                 "place it between two submodule calls")
            out[min(after)[1]] = SplitPoint.BEGINNING
        return out


def _boundary_positions(trace, split_spec):
    """(position, path, point) per split point, in forward order; a position lies between two clock ticks."""
    out = []
    for path, point in split_spec.items():
        if not isinstance(point, SplitPoint):
            raise TypeError(f"pipeline(): split_spec[{path!r}] must be a SplitPoint, got {point!r}")
        if path not in trace.paths:
            raise ValueError(f"pipeline(): split point {path!r} is not a submodule of the model")
        calls = len(trace.enters.get(path, []))
        if calls != 1:
            raise ValueError(f"pipeline(): split point {path!r} runs {calls} times in one forward; a split point "
                             "must run exactly once (a module of the model's own forward, not inside a C++ layer)")
        pos = trace.enters[path][0] - 0.5 if point == SplitPoint.BEGINNING else trace.leaves[path][0] + 0.5
        out.append((pos, path, point))
    out.sort()
    for (p0, a, _), (p1, b, _) in zip(out, out[1:]):
        if p1 - p0 < 1:
            raise ValueError(f"pipeline(): split points {a!r} and {b!r} leave an empty stage between them")
    return out


def _owners(module, trace, positions):
    """path -> the stage that owns the submodule (called wholly inside its part), or None for a module that spans
    split points; a module never called directly (inside a C++ layer, or unused) goes with its parent."""
    cuts = [p for p, _, _ in positions]
    owners = {}
    for path, m in module.named_modules():
        if path in trace.enters:
            first = bisect.bisect(cuts, trace.enters[path][0])
            last = bisect.bisect(cuts, trace.leaves[path][-1])
            owners[path] = first if first == last else None
        else:
            owners[path] = owners.get(path.rpartition(".")[0]) if path else None
        params, _ = _own_tensors(m)
        if owners[path] is None and params:
            raise ValueError(f"pipeline(): module {path or '(the root)'!r} has parameters of its own "
                             f"({', '.join(n for n, _ in params)}) but runs across split points, so no one stage "
                             "owns them; move them into a submodule, or split the model by hand")
    return owners


def _build_stage_module(module, trace, positions, owners, stage):
    """The module stage `stage` runs: its submodules under their original paths, sharing the model's tensors."""
    n_stages = len(positions) + 1
    memo, kept, shared_buffers = {}, [], []
    for path, m in module.named_modules():
        parent = path.rpartition(".")[0]
        params, buffers = _own_tensors(m)
        if owners[path] == stage and (not path or owners[parent] != stage):
            memo[id(m)] = m  # the runner calls the model's own module: the same weights
            kept.append((path, m))
        elif owners[path] is None:  # spans split points: its buffers (rope tables, say) serve every stage
            for name, b in buffers:
                memo[_key(b)] = b
                shared_buffers.append((path, name, b))
        else:
            for _, t in params + buffers:
                memo.setdefault(_key(t), _meta_like(t))
    runner = _copy_model(module, memo)

    class Stage(Module):
        def forward(self, *args, **kwargs):
            return _run_stage(self, args, kwargs)
    Stage.__name__ = Stage.__qualname__ = f"{type(module).__name__}Stage{stage}"
    out = Stage()
    for path, m in kept:
        if path:
            _attach(out, path, m)
        else:  # one stage: the whole model, its children and tensors on the stage module itself
            for name, child in m.named_children():
                _attach(out, name, _child(m, name))
            params, buffers = _own_tensors(m)
            for name, p in params:
                out.register_parameter(name, p, p.requires_grad)
            for name, b in buffers:
                out.register_buffer(name, b)
    for path, name, b in shared_buffers:
        holder = _attach(out, path, None)
        holder.register_buffer(name, b)
    # The spanning modules' buffers in the runner: meta while the stage replays what comes before its part, the
    # real ones from its first split point on.
    spanning = [(_submodule(runner, path), name, b, _C.empty(list(b.shape), dtype=b.dtype, device="meta"))
                for path, name, b in shared_buffers]
    object.__setattr__(out, "_pipe", {"runner": runner, "stage": stage, "n_stages": n_stages, "trace": trace,
                                      "start": positions[stage - 1] if stage > 0 else None,
                                      "end": positions[stage] if stage < n_stages - 1 else None,
                                      "spanning_buffers": spanning})
    _install_boundary_hooks(out)
    return out


def _attach(root, path, module):
    """Puts `module` at `path` under root, making plain containers on the way; returns the module at path."""
    node = root
    parts = path.split(".") if path else []
    for i, part in enumerate(parts):
        children = node.__dict__.get("_children_py", {})
        if i == len(parts) - 1 and module is not None:
            setattr(node, part, module)
            return module
        if part not in children:
            setattr(node, part, _Container())
        node = _child(node, part)
    return node


class _Container(Module):
    """Holds a stage's submodules under their original paths (the stage's forward runs the model's)."""

    def forward(self, *args, **kwargs):
        raise RuntimeError("a pipeline stage's container is not called itself; call the stage module")


def _use_buffers(info, real):
    for holder, name, b, meta in info["spanning_buffers"]:
        holder._replace_buffer(name, b if real else meta)


def _install_boundary_hooks(stage_module):
    info = stage_module._pipe
    runner, trace = info["runner"], info["trace"]

    def active():
        return _running.get() is stage_module

    if info["start"] is not None:
        _, path, point = info["start"]
        target = _submodule(runner, path)
        if point == SplitPoint.BEGINNING:
            def take_received(mod, args, kwargs):
                if not active():
                    return None
                received = list(info["received"])
                expected = len(_crossing(args, kwargs))
                if len(received) != expected:
                    raise ValueError(f"pipeline stage {info['stage']}: {path!r} takes {expected} tensors at its split "
                                     f"point, but the stage was given {len(received)}")
                info["started"] = True
                _use_buffers(info, real=True)
                take = lambda v: received.pop(0) if _C._is_cpp_tensor(v) else v  # noqa: E731
                return tuple(take(a) for a in args), {k: take(v) for k, v in kwargs.items()}
            target.register_forward_pre_hook(take_received, with_kwargs=True, prepend=True)
        else:
            def give_received(mod, args, output):
                if not active():
                    return None
                info["started"] = True
                _use_buffers(info, real=True)
                received = tuple(info["received"])
                return received[0] if _C._is_cpp_tensor(trace.outputs[path]) and len(received) == 1 else received
            target.register_forward_hook(give_received)
    if info["end"] is not None:
        _, path, point = info["end"]
        target = _submodule(runner, path)

        def stop(value):
            tensors = [value] if _C._is_cpp_tensor(value) else \
                [v for v in (value if isinstance(value, (tuple, list)) else []) if _C._is_cpp_tensor(v)]
            raise _Reached(tensors[0] if len(tensors) == 1 else tuple(tensors))
        if point == SplitPoint.BEGINNING:
            target.register_forward_pre_hook(lambda mod, args, kwargs: stop(tuple(_crossing(args, kwargs)))
                                             if active() else None, with_kwargs=True)
        else:
            target.register_forward_hook(lambda mod, args, output: stop(output) if active() else None)


def _run_stage(stage_module, args, kwargs):
    info = stage_module._pipe
    stage, runner = info["stage"], info["runner"]
    info["started"] = stage == 0
    if stage > 0:
        info["received"] = args
        args, kwargs = info["trace"].args, info["trace"].kwargs
        _use_buffers(info, real=False)
    token = _running.set(stage_module)
    try:
        out = runner(*args, **kwargs)
        if info["end"] is not None:
            raise RuntimeError(f"pipeline stage {stage}: the forward ended without reaching its split point "
                               f"{info['end'][1]!r}")
    except _Reached as reached:
        out = reached.value
    except (RuntimeError, TypeError) as e:  # a device mismatch: "expected all tensors on one device, ... meta"
        if "meta" not in str(e):
            raise
        raise RuntimeError(f"pipeline stage {stage}: its part of the forward uses a tensor of another stage ({e}); "
                           "pipeline() passes only the tensors that cross a split point (a split module's "
                           "arguments or output): a value that skips past it, or a weight tied across stages, needs "
                           "the model split by hand") from e
    finally:
        _running.reset(token)
        info.pop("received", None)
    if not info["started"]:
        raise RuntimeError(f"pipeline stage {stage}: the forward never reached its split point {info['start'][1]!r}")
    if any(_C._is_cpp_tensor(t) and t.is_meta for t in (out if isinstance(out, tuple) else (out,))):
        raise RuntimeError(f"pipeline stage {stage}: its output was computed from another stage's tensors (a value "
                           "that skips past a split point); split the model by hand")
    return out


class Pipe:
    """What pipeline() returns: num_stages, get_stage_module(i), build_stage(i, device, group), and split_gm
    (a module holding the stage modules as submod_0, submod_1, ...)."""

    def __init__(self, stage_modules, split_points):
        self.num_stages = len(stage_modules)
        self.split_points = split_points  # [(path, SplitPoint)] in forward order
        self.split_gm = _Container()
        for i, m in enumerate(stage_modules):
            setattr(self.split_gm, f"submod_{i}", m)
        self._stages = stage_modules

    def get_stage_module(self, stage_idx):
        if not 0 <= stage_idx < self.num_stages:
            raise ValueError(f"get_stage_module: stage {stage_idx} is not in [0, {self.num_stages})")
        return self._stages[stage_idx]

    def info(self):
        return self

    def build_stage(self, stage_index, device, group=None):
        return PipelineStage(self.get_stage_module(stage_index), stage_index, self.num_stages, device, group=group)

    def __repr__(self):
        cuts = ", ".join(f"{p} {s.name}" for p, s in self.split_points)
        return f"Pipe({self.num_stages} stages, split at {cuts or 'nothing'})"


def build_stage(stage_module, stage_index, pipe_info, device, group=None):
    """PyTorch's build_stage(stage_module, stage_index, pipe.info(), device, group)."""
    return PipelineStage(stage_module, stage_index, pipe_info.num_stages, device, group=group)


def pipeline(module, mb_args, mb_kwargs=None, split_spec=None, split_policy=None):
    """Splits `module` into stages at split_spec's points ({submodule path: SplitPoint}); mb_args (and
    mb_kwargs) are one microbatch's inputs, used only for their shapes."""
    if split_policy is not None:
        raise NotImplementedError("pipeline(): split_policy is not supported; give split_spec")
    if not isinstance(mb_args, tuple):
        mb_args = (mb_args,)
    trace = _Trace(module, mb_args, mb_kwargs)
    positions = _boundary_positions(trace, {**trace.pipe_split_points(), **dict(split_spec or {})})
    owners = _owners(module, trace, positions)
    stages = [_build_stage_module(module, trace, positions, owners, s) for s in range(len(positions) + 1)]
    return Pipe(stages, [(path, point) for _, path, point in positions])
