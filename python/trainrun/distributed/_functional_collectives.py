"""torch.distributed._functional_collectives: collectives that return a new tensor and leave their input as
it is (what DTensor and compiled code call). `group` is a ProcessGroup (None: the default group), a 1-D
DeviceMesh, (mesh, mesh dim), or a list of default-group ranks that a mesh made a group for. They complete
before returning, so wait_tensor is the identity; `tag` is accepted and unused, as in PyTorch."""
import trainrun
from trainrun import distributed as dist

_REDUCE_OPS = {"sum": "SUM", "avg": "AVG", "product": "PRODUCT", "min": "MIN", "max": "MAX", "band": "BAND",
               "bor": "BOR", "bxor": "BXOR"}


def _group(group, where):
    from trainrun.distributed.device_mesh import DeviceMesh, _group_for
    if isinstance(group, DeviceMesh):
        if group.ndim != 1:
            raise ValueError(f"{where}: a {group.ndim}-D DeviceMesh needs a mesh dim: pass (mesh, dim)")
        return group.get_group(0)
    if isinstance(group, tuple) and len(group) == 2 and isinstance(group[0], DeviceMesh):
        return group[0].get_group(group[1])
    if isinstance(group, (list, tuple)):
        return _group_for(group)
    return group


def _reduce_op(op, where):
    if isinstance(op, dist.ReduceOp):
        return op
    name = _REDUCE_OPS.get(str(op).lower())
    if name is None:
        raise ValueError(f"{where}: unknown reduce op {op!r} (one of {sorted(_REDUCE_OPS)} or a ReduceOp)")
    return getattr(dist.ReduceOp, name)


def _check_divisible(tensor, dim, n, where):
    if tensor.shape[dim] % n:
        raise ValueError(f"{where}: dim {dim} of the input ({tensor.shape[dim]}) is not divisible by the group "
                         f"size ({n})")


def all_reduce(self, reduceOp, group, tag=""):  # noqa: N803  (PyTorch's names)
    """The reduction of `self` over the group, as a new tensor."""
    out = self.detach().clone().contiguous()
    dist.all_reduce(out, op=_reduce_op(reduceOp, "all_reduce"), group=_group(group, "all_reduce"))
    return out


def all_gather_tensor(self, gather_dim, group, tag=""):
    """The group's tensors concatenated along gather_dim (rank order)."""
    g = _group(group, "all_gather_tensor")
    n = dist.get_world_size(g)
    x = self.detach().contiguous()
    out = trainrun.empty([n * x.shape[0]] + list(x.shape[1:]), dtype=x.dtype, device=x.device) if x.ndim else \
        trainrun.empty([n], dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(out, x if x.ndim else x.reshape([1]), group=g)
    if gather_dim % max(x.ndim, 1) != 0:
        out = trainrun.cat(out.chunk(n, 0), dim=gather_dim)
    return out


def reduce_scatter_tensor(self, reduceOp, scatter_dim, group, tag=""):  # noqa: N803
    """This rank's block (along scatter_dim) of the reduction over the group."""
    g = _group(group, "reduce_scatter_tensor")
    n = dist.get_world_size(g)
    _check_divisible(self, scatter_dim, n, "reduce_scatter_tensor")
    x = self.detach()
    if scatter_dim % self.ndim != 0:  # the blocks along scatter_dim, laid one after another along dim 0
        x = trainrun.cat(x.chunk(n, scatter_dim), dim=0)
    x = x.contiguous()
    out = trainrun.empty([x.shape[0] // n] + list(x.shape[1:]), dtype=x.dtype, device=x.device)
    dist.reduce_scatter_tensor(out, x, op=_reduce_op(reduceOp, "reduce_scatter_tensor"), group=g)
    if scatter_dim % self.ndim != 0:
        shape = list(self.shape)
        shape[scatter_dim] //= n
        out = out.reshape(shape)
    return out


def all_to_all_single(self, output_split_sizes, input_split_sizes, group, tag=""):
    """Rows of `self` (dim 0) split by input_split_sizes (even when None) go to the ranks in turn; the rows
    received, by output_split_sizes, come back concatenated."""
    g = _group(group, "all_to_all_single")
    rows = sum(output_split_sizes) if output_split_sizes is not None else self.shape[0]
    out = trainrun.empty([rows] + list(self.shape[1:]), dtype=self.dtype, device=self.device)
    dist.all_to_all_single(out, self.detach().contiguous(), output_split_sizes, input_split_sizes, group=g)
    return out


def broadcast(self, src, group, tag=""):
    """src's tensor (src a default-group rank), on every rank."""
    out = self.detach().clone().contiguous()
    dist.broadcast(out, src=src, group=_group(group, "broadcast"))
    return out


def all_reduce_coalesced(self, reduceOp, group, tag=""):  # noqa: N803
    return [all_reduce(t, reduceOp, group, tag) for t in self]


def all_gather_into_tensor_coalesced(self, group, tag=""):
    return [all_gather_tensor(t, 0, group, tag) for t in self]


def reduce_scatter_tensor_coalesced(inputs, reduceOp, scatter_dim, group, tag=""):  # noqa: N803
    return [reduce_scatter_tensor(t, reduceOp, d, group, tag) for t, d in zip(inputs, scatter_dim)]


def wait_tensor(tensor):
    """The tensor: these collectives have completed when they return."""
    return tensor
