"""Tensor-parallel styles, as PyTorch's torch.distributed.tensor.parallel:
ColwiseParallel, RowwiseParallel, SequenceParallel, PrepareModuleInput,
PrepareModuleOutput. A style shards a module's parameters on a 1-D mesh
(the module's registry keeps its local shards, which C++ code and optimizers
update; `module.weight`, named_parameters and state_dict show the DTensors), and computes its
forward on the shards with the collectives Megatron-LM places: Colwise
takes a replicated input (its gradient is summed over the ranks) and gives
an output sharded on the last dim; Rowwise takes that sharded input and
all-reduces (or reduce-scatters) its partial output before adding the bias."""
from trainrun import _C
from trainrun._complex import ComplexTensor
from trainrun.distributed.tensor import _redistribute
from trainrun.distributed.tensor._dtensor import DTensor, DTensorSpec, distribute_tensor
from trainrun.distributed.tensor._module_views import set_view, sum_gradient_over
from trainrun.distributed.tensor.placement_types import Replicate, Shard
from trainrun.nn import functional as F
from trainrun.nn import utils as nn_utils
from trainrun.nn._module import _cpp_call



def _pairs_layout(layout):
    """A complex tensor's layout as its real pairs' (trainrun/_complex.py)."""
    return Shard(layout.dim - 1) if layout.is_shard() and layout.dim < 0 else layout


def _as_dtensor(x, mesh, layout):
    return x if isinstance(x, DTensor) else DTensor.from_local(x, mesh, [layout], run_check=False)


def _input_piece(x, mesh, input_layout, desired):
    """The local piece of an input in the desired layout, its gradient summed where it is replicated but the
    module's output is not."""
    d = _as_dtensor(x, mesh, input_layout).redistribute(placements=[desired])
    local = d.to_local()
    if desired.is_replicate() and local.requires_grad:
        local = _redistribute.SumGradientOver.apply(local, mesh, (0,))
    return local


def _output(local, mesh, layout, desired, use_local_output, global_size):
    """local (this rank's piece, sharded per layout on a dim of global_size) in the desired layout."""
    shape = list(local.shape)
    shape[layout.dim] = global_size
    out = DTensor(local, DTensorSpec(mesh, [layout], shape)).redistribute(placements=[desired])
    return out.to_local() if use_local_output else out


def _global_shape(local, mesh, layout):
    """The global shape of a piece sharded per layout, when nothing else knows it: the sizes are summed over
    the ranks (one small all-reduce)."""
    shape = list(local.shape)
    if isinstance(layout, Shard):
        size = _C.full([1], shape[layout.dim], dtype=_C.dtype.int64, device=local.device)
        shape[layout.dim] = int(_redistribute.all_reduced(size, mesh._group(0)).item())
    return shape


def _shard_parameter(module, name, mesh, placement):
    """Replaces parameter `name` by this rank's shard (placement on the 1-D mesh); records its DTensor."""
    full = module._param(name)
    dt = distribute_tensor(full.detach(), mesh, [placement], src_data_rank=None)
    local = dt.to_local().contiguous().clone()
    local.requires_grad_(full.requires_grad)
    module._replace_parameter(name, local)
    nn_utils.register_sharded_parameter(module._param(name), _redistribute.reducer_over(mesh, 0))
    set_view(module, name, DTensor(module._param(name), DTensorSpec(mesh, [placement], tuple(full.shape))))


def _has(module, name):
    return name in dict(module._named_local_parameters(False))


def _kind(module, style):
    from trainrun import nn
    if isinstance(module, nn.Linear):
        return "linear"
    if isinstance(module, nn.Embedding):
        return "embedding"
    raise NotImplementedError(f"{style}: {module.type_name} is not supported (nn.Linear and nn.Embedding are)")


def _check_1d(mesh, style):
    if mesh.ndim != 1:
        raise ValueError(f"{style} needs a 1-D mesh (slice the tensor-parallel dim: mesh['tp']), got {mesh}")


class ParallelStyle:
    def _apply(self, module, mesh):
        raise NotImplementedError


class ColwiseParallel(ParallelStyle):
    """Linear: weight and bias split along the output features; Embedding: split along the embedding dim.
    input_layouts (default Replicate) says what a plain-tensor input is; output_layouts (default Shard(-1))."""

    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        self.input_layout = input_layouts if not isinstance(input_layouts, (tuple, list)) else input_layouts[0]
        self.input_layout = self.input_layout or Replicate()
        self.output_layout = output_layouts if not isinstance(output_layouts, (tuple, list)) else output_layouts[0]
        self.output_layout = self.output_layout or Shard(-1)
        self.use_local_output = use_local_output

    def _apply(self, module, mesh):
        _check_1d(mesh, "ColwiseParallel")
        kind = _kind(module, "ColwiseParallel")
        has_bias = _has(module, "bias")
        # The output's last dim is the weight's output features (Linear) or embedding dim (Embedding), whole.
        features = module._param("weight").shape[0 if kind == "linear" else 1]
        if kind == "linear":
            _shard_parameter(module, "weight", mesh, Shard(0))
            if has_bias:
                _shard_parameter(module, "bias", mesh, Shard(0))
        else:
            _shard_parameter(module, "weight", mesh, Shard(1))

        def forward(x):
            if kind == "linear":
                local_in = _input_piece(x, mesh, self.input_layout, Replicate())
                bias = module._param("bias") if has_bias else None
                local = F.linear(local_in, module._param("weight"), bias)
            else:
                local_in = _input_piece(x, mesh, self.input_layout, Replicate())
                local = _C.embedding(local_in, module._param("weight"))
            out_layout = Shard(local.ndim - 1)
            desired = self.output_layout if not isinstance(self.output_layout, Shard) or \
                self.output_layout.dim >= 0 else Shard(local.ndim + self.output_layout.dim)
            return _output(local, mesh, out_layout, desired, self.use_local_output, features)
        object.__setattr__(module, "_forward_override", forward)
        return module


class RowwiseParallel(ParallelStyle):
    """Linear: weight split along the input features, bias replicated; Embedding: split along the vocabulary.
    input_layouts default Shard(-1) (Linear) or Replicate (Embedding); output_layouts default Replicate."""

    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        self.input_layout = input_layouts if not isinstance(input_layouts, (tuple, list)) else input_layouts[0]
        self.output_layout = output_layouts if not isinstance(output_layouts, (tuple, list)) else output_layouts[0]
        self.output_layout = self.output_layout or Replicate()
        self.use_local_output = use_local_output

    def _apply(self, module, mesh):
        _check_1d(mesh, "RowwiseParallel")
        kind = _kind(module, "RowwiseParallel")
        n, me = mesh.size(0), mesh.get_local_rank(0)
        has_bias = _has(module, "bias")
        if kind == "linear":
            _shard_parameter(module, "weight", mesh, Shard(1))
            if has_bias:
                set_view(module, "bias", DTensor(module._param("bias"), DTensorSpec(
                    mesh, [Replicate()], tuple(module._param("bias").shape))))
        else:
            vocab = module._param("weight").shape[0]
            _shard_parameter(module, "weight", mesh, Shard(0))
        input_layout = self.input_layout or (Shard(-1) if kind == "linear" else Replicate())

        def forward(x):
            if kind == "linear":
                layout = input_layout
                if isinstance(layout, Shard) and layout.dim < 0:
                    layout = Shard((x.ndim if not isinstance(x, DTensor) else x.ndim) + layout.dim)
                local_in = _input_piece(x, mesh, layout, Shard(layout.dim if isinstance(layout, Shard) else
                                                               (x.ndim - 1)))
                partial = F.linear(local_in, module._param("weight"))
            else:
                local_in = _input_piece(x, mesh, input_layout, Replicate())
                from trainrun.distributed.tensor.placement_types import chunk_offsets, chunk_sizes
                start, count = chunk_offsets(vocab, n)[me], chunk_sizes(vocab, n)[me]
                mine = (local_in >= start) & (local_in < start + count)
                zero = _C.zeros([], dtype=local_in.dtype, device=local_in.device)
                index = _C.where(mine, local_in - start, zero)
                partial = _C.embedding(index, module._param("weight")) * mine.unsqueeze(-1).to(
                    module._param("weight").dtype)
            desired = self.output_layout
            if isinstance(desired, Shard) and desired.dim < 0:
                desired = Shard(partial.ndim + desired.dim)
            from trainrun.distributed.tensor.placement_types import Partial
            out = DTensor(partial, DTensorSpec(mesh, [Partial()], tuple(partial.shape))).redistribute(
                placements=[desired])
            if kind == "linear" and has_bias:
                bias = module._param("bias")
                if not desired.is_replicate() and bias.requires_grad:
                    bias = _redistribute.SumGradientOver.apply(bias, mesh, (0,))
                out = DTensor(out.to_local() + bias, out._spec)
            return out.to_local() if self.use_local_output else out
        object.__setattr__(module, "_forward_override", forward)
        return module


class SequenceParallel(ParallelStyle):
    """For norms and dropout between Rowwise and Colwise regions: runs on the sequence shard (dim
    sequence_dim), parameters replicated with their gradients summed over the ranks."""

    def __init__(self, *, sequence_dim=1, use_local_output=False):
        self.sequence_dim, self.use_local_output = sequence_dim, use_local_output

    def _apply(self, module, mesh):
        _check_1d(mesh, "SequenceParallel")
        group = mesh.get_group(0)  # (a ProcessGroup, the world's too: None would read as "no sum" below)
        for name, p in module._named_local_parameters(False):
            if p.requires_grad:
                p.register_hook(lambda g, group=group: _redistribute.all_reduced(g, group))
                sum_gradient_over(module, name, group)
            set_view(module, name, DTensor(p, DTensorSpec(mesh, [Replicate()], tuple(p.shape))))
        layout = Shard(self.sequence_dim)
        inner = module.__dict__.get("_forward_override")

        def forward(x):
            # (norms and dropout keep shapes: the sequence length is the input's when it is a DTensor)
            seq_len = x.shape[layout.dim] if isinstance(x, DTensor) else None
            local = x.redistribute(placements=[layout]).to_local() if isinstance(x, DTensor) else x
            if inner is not None:
                out = inner(local)
            elif type(module).forward is _C.nn.Module.forward:
                out = _cpp_call(module, local)  # a C++ layer (LayerNorm, RMSNorm, Dropout)
            else:
                out = module.forward(local)
            shape = _global_shape(out, mesh, layout) if seq_len is None else \
                list(out.shape[:layout.dim]) + [seq_len] + list(out.shape[layout.dim + 1:])
            result = DTensor(out, DTensorSpec(mesh, [layout], shape))
            return result.to_local() if self.use_local_output else result
        object.__setattr__(module, "_forward_override", forward)
        return module


class PrepareModuleInput(ParallelStyle):
    """Converts the module's positional inputs from input_layouts to desired_input_layouts (None entries are
    left alone) before its forward."""

    def __init__(self, *, input_layouts=None, desired_input_layouts=None, input_kwarg_layouts=None,
                 desired_input_kwarg_layouts=None, use_local_output=False):
        self.input_layouts = _as_tuple(input_layouts)
        self.desired = _as_tuple(desired_input_layouts)
        if len(self.input_layouts) != len(self.desired):
            raise ValueError("PrepareModuleInput: input_layouts and desired_input_layouts differ in length")
        self.kwarg_layouts = input_kwarg_layouts or {}
        self.desired_kwargs = desired_input_kwarg_layouts or {}
        self.use_local_output = use_local_output

    def _convert(self, x, mesh, layout, desired):
        if isinstance(x, ComplexTensor) and layout is not None and desired is not None:
            # (a rotary table: its real pairs carry one more dim, last, that a negative Shard dim skips)
            pairs = self._convert(x._pairs, mesh, _pairs_layout(layout), _pairs_layout(desired))
            return ComplexTensor(pairs)
        if layout is None or desired is None or not isinstance(x, (DTensor, _C.Tensor)):
            return x
        d = _as_dtensor(x, mesh, layout).redistribute(placements=[desired])
        return d.to_local() if self.use_local_output else d

    def _apply(self, module, mesh):
        def hook(mod, args, kwargs):
            new_args = tuple(self._convert(a, mesh, l, d) for a, l, d in
                             zip(args, self.input_layouts + (None,) * len(args), self.desired + (None,) * len(args)))
            new_kwargs = {k: self._convert(v, mesh, self.kwarg_layouts.get(k), self.desired_kwargs.get(k))
                          for k, v in kwargs.items()}
            return new_args, new_kwargs
        module.register_forward_pre_hook(hook, with_kwargs=True)
        return module


class PrepareModuleOutput(ParallelStyle):
    def __init__(self, *, output_layouts, desired_output_layouts, use_local_output=True):
        self.layouts, self.desired = _as_tuple(output_layouts), _as_tuple(desired_output_layouts)
        self.use_local_output = use_local_output

    def _apply(self, module, mesh):
        def hook(mod, args, output):
            single = not isinstance(output, tuple)
            outs = (output,) if single else output
            converted = []
            for o, l, d in zip(outs, self.layouts + (None,) * len(outs), self.desired + (None,) * len(outs)):
                if l is None or d is None:
                    converted.append(o)
                    continue
                dt = _as_dtensor(o, mesh, l).redistribute(placements=[d])
                converted.append(dt.to_local() if self.use_local_output else dt)
            return converted[0] if single else tuple(converted)
        module.register_forward_hook(hook)
        return module


class PrepareModuleInputOutput(ParallelStyle):
    """PrepareModuleInput and PrepareModuleOutput on one module (PyTorch 2.7's): its inputs converted on the
    way in (use_local_input: handed over as local pieces), its outputs on the way out."""

    def __init__(self, *, input_layouts=None, desired_input_layouts=None, input_kwarg_layouts=None,
                 desired_input_kwarg_layouts=None, use_local_input=False, output_layouts, desired_output_layouts,
                 use_local_output=True):
        self.prepare_module_input = PrepareModuleInput(
            input_layouts=input_layouts, desired_input_layouts=desired_input_layouts,
            input_kwarg_layouts=input_kwarg_layouts, desired_input_kwarg_layouts=desired_input_kwarg_layouts,
            use_local_output=use_local_input)
        self.prepare_module_output = PrepareModuleOutput(output_layouts=output_layouts,
                                                         desired_output_layouts=desired_output_layouts,
                                                         use_local_output=use_local_output)

    def _apply(self, module, mesh):
        self.prepare_module_input._apply(module, mesh)
        self.prepare_module_output._apply(module, mesh)
        return module


def _as_tuple(x):
    if x is None:
        return ()
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)
