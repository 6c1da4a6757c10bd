"""DTensor: a global tensor held as one piece per rank of a DeviceMesh, with
a placement per mesh dimension. The piece is an ordinary tensor with its own
autograd history, so gradients flow through DTensor ops (each computes on
the pieces, after the redistribution its sharding rule asks for) and arrive
on the pieces of the leaves; `.grad` shows them as a DTensor."""
from trainrun._size import Size
from trainrun.distributed.tensor import _redistribute
from trainrun.distributed.tensor.placement_types import Partial, Replicate, Shard, normalize


class DTensorSpec:
    """Where a DTensor lives: its mesh, placements and global shape (immutable; hashed once)."""
    __slots__ = ("mesh", "placements", "shape", "_hash")

    def __init__(self, mesh, placements, shape):
        self.mesh, self.placements, self.shape = mesh, tuple(placements), tuple(int(s) for s in shape)
        self._hash = hash((mesh, self.placements, self.shape))

    def with_placements(self, placements):
        return DTensorSpec(self.mesh, placements, self.shape)

    def __eq__(self, other):
        return other is self or isinstance(other, DTensorSpec) and self._hash == other._hash and \
            (self.mesh, self.placements, self.shape) == (other.mesh, other.placements, other.shape)

    def __hash__(self):
        return self._hash


def _check_placements(mesh, placements, ndim):
    if placements is None:
        return tuple(Replicate() for _ in range(mesh.ndim))
    placements = normalize(list(placements), ndim)
    if len(placements) != mesh.ndim:
        raise ValueError(f"placements {list(placements)} must have one entry per mesh dim ({mesh.ndim})")
    return placements


class DTensor:
    """PyTorch's torch.distributed.tensor.DTensor: build it with distribute_tensor or DTensor.from_local."""
    __slots__ = ("_local_tensor", "_spec", "_is_param", "__weakref__")  # _is_param: nn.Parameter(dtensor)

    @staticmethod
    def _handle_custom_op(op, args, kwargs):
        """A custom op (trainrun.library) called with DTensors: run by its registered sharding rule."""
        from trainrun.distributed.tensor.experimental._register_sharding import run_with_sharding
        return run_with_sharding(op, args, kwargs)
    _is_tensor_like = True  # torch.is_tensor(dtensor) is True

    def __init__(self, local_tensor, spec):
        self._local_tensor, self._spec = local_tensor, spec

    # ---- construction and conversion --------------------------------------------------------------
    @staticmethod
    def from_local(local_tensor, device_mesh=None, placements=None, *, run_check=False, shape=None, stride=None):
        """A DTensor whose piece on this rank is local_tensor (no copy; its gradient flows back to it).
        Without `shape` the global shape assumes even shards (local size times the mesh dim's size)."""
        from trainrun.distributed.device_mesh import mesh_or_default
        mesh = mesh_or_default(device_mesh, "DTensor.from_local")
        placements = _check_placements(mesh, placements, local_tensor.ndim)
        if shape is None:
            shape = list(local_tensor.shape)
            for i, p in enumerate(placements):
                if isinstance(p, Shard):
                    shape[p.dim] *= mesh.size(i)
        if run_check:
            _check_replicas_agree(local_tensor, mesh, placements)
        return DTensor(local_tensor, DTensorSpec(mesh, placements, shape))

    def to_local(self, *, grad_placements=None):
        """This rank's piece (gradients of it flow back into the DTensor's history)."""
        return self._local_tensor

    def redistribute(self, device_mesh=None, placements=None, *, async_op=False):
        """The same global tensor with other placements (collectives as _redistribute describes)."""
        mesh = self._spec.mesh if device_mesh is None else device_mesh
        if mesh != self._spec.mesh:
            raise NotImplementedError("DTensor.redistribute: moving to another mesh is not supported")
        placements = _check_placements(mesh, placements, self.ndim)
        if placements == self._spec.placements:
            return self
        for p, q in zip(self._spec.placements, placements):
            if p.is_partial() and q.is_partial() and p != q:
                raise ValueError(f"redistribute: cannot turn {p!r} into {q!r}")
        local = _redistribute.Redistribute.apply(self._local_tensor, self._spec.shape, mesh,
                                                 self._spec.placements, placements)
        return DTensor(local, self._spec.with_placements(placements))

    def full_tensor(self, *, grad_placements=None):
        """The whole tensor on every rank (gathered and reduced as needed)."""
        return self.redistribute(placements=[Replicate()] * self._spec.mesh.ndim).to_local()

    # ---- what it is -------------------------------------------------------------------------------
    @property
    def device_mesh(self):
        return self._spec.mesh

    @property
    def placements(self):
        return self._spec.placements

    @property
    def shape(self):
        return Size(self._spec.shape)

    def size(self, dim=None):
        return self.shape if dim is None else self._spec.shape[dim]

    def dim(self):
        return len(self._spec.shape)

    ndim = property(dim)


    @property
    def dtype(self):
        return self._local_tensor.dtype

    @property
    def device(self):
        return self._local_tensor.device

    # What every piece shares with the whole: read from the local piece.
    is_meta = property(lambda self: self._local_tensor.is_meta)
    is_cuda = property(lambda self: self._local_tensor.is_cuda)
    is_cpu = property(lambda self: self._local_tensor.is_cpu)
    layout = property(lambda self: self._local_tensor.layout)
    is_floating_point = lambda self: self._local_tensor.is_floating_point()  # noqa: E731
    is_complex = lambda self: self._local_tensor.is_complex()  # noqa: E731
    element_size = lambda self: self._local_tensor.element_size()  # noqa: E731
    itemsize = property(lambda self: self._local_tensor.element_size())
    nelement = numel = lambda self: _product(self._spec.shape)  # noqa: E731
    ndimension = dim
    nbytes = property(lambda self: self.numel() * self._local_tensor.element_size())

    def stride(self, dim=None):
        """The strides of the whole tensor laid out contiguously, as PyTorch reports a DTensor's."""
        strides, step = [], 1
        for size in reversed(self._spec.shape):
            strides.insert(0, step)
            step *= max(size, 1)
        return tuple(strides) if dim is None else strides[dim]

    @property
    def data(self):
        """The same DTensor outside autograd (over the local piece's data)."""
        return DTensor(self._local_tensor.data, self._spec)

    @data.setter
    def data(self, value):
        """param.data = other: this DTensor (the same object, its autograd identity kept) takes other's local
        piece and layout; other must be a DTensor on the same mesh."""
        if not isinstance(value, DTensor):
            raise TypeError(f"DTensor.data must be set to a DTensor, got {type(value).__name__}")
        if value._spec.mesh != self._spec.mesh:
            raise ValueError(f"DTensor.data: the new value is on {value._spec.mesh}, this DTensor on "
                             f"{self._spec.mesh}")
        self._local_tensor.data = value._local_tensor
        self._spec = value._spec

    @property
    def requires_grad(self):
        return self._local_tensor.requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        self._local_tensor.requires_grad = value

    def requires_grad_(self, requires_grad=True):
        self._local_tensor.requires_grad_(requires_grad)
        return self

    @property
    def grad(self):
        g = self._local_tensor.grad
        return None if g is None else DTensor(g, self._spec.with_placements(
            _redistribute.gradient_placements(self._spec.placements)))

    @grad.setter
    def grad(self, value):
        """None clears the gradient (`p.grad = None`, as optimizers' zero_grad does); a DTensor sets the local
        piece's gradient to its piece."""
        if value is None:
            self._local_tensor.grad = None
            return
        if not isinstance(value, DTensor):
            raise TypeError(f"DTensor.grad must be None or a DTensor, got {type(value).__name__}")
        self._local_tensor.grad = value.to_local()

    @property
    def is_leaf(self):
        return self._local_tensor.is_leaf

    def backward(self, gradient=None, retain_graph=False, create_graph=False, inputs=None):
        """Backward from a scalar DTensor: each rank runs backward through its piece's history (inputs: only
        these tensors' or DTensors' gradients are accumulated, as Tensor.backward's)."""
        if gradient is None and self.numel() != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        local_grad = gradient.to_local() if isinstance(gradient, DTensor) else gradient
        if inputs is not None:
            inputs = [t._local_tensor if isinstance(t, DTensor) else t for t in
                      (inputs if isinstance(inputs, (list, tuple)) else [inputs])]
        self._local_tensor.backward(local_grad, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)

    # ---- in-place initialisation (nn.init's, on this rank's piece) -------------------------------------
    def _piece(self):
        """(local tensor, global shape, offsets of the local piece in the global tensor): how nn.init draws
        each rank's piece of the values the whole tensor would get."""
        if any(p.is_partial() for p in self._spec.placements):
            raise ValueError("DTensor: a Partial DTensor cannot be initialised in place (its pieces are summands)")
        sizes, offsets = _redistribute.local_shape(self._spec.shape, self._spec.mesh, self._spec.placements)
        if list(self._local_tensor.shape) != list(sizes):
            raise ValueError(f"DTensor: the local piece is {list(self._local_tensor.shape)} but the placements "
                             f"{list(self._spec.placements)} give {sizes}")
        return self._local_tensor, list(self._spec.shape), offsets

    def uniform_(self, a=0.0, b=1.0, generator=None):
        from trainrun.nn import init
        return init.uniform_(self, a, b)

    def normal_(self, mean=0.0, std=1.0, generator=None):
        from trainrun.nn import init
        return init.normal_(self, mean, std)

    def fill_(self, value):
        from trainrun.nn import init
        return init.constant_(self, value)

    def zero_(self):
        from trainrun.nn import init
        return init.zeros_(self)

    def item(self):
        return self.full_tensor().item()

    def tolist(self):
        return self.full_tensor().tolist()

    def __len__(self):
        return self._spec.shape[0]

    def __repr__(self):
        return (f"DTensor(local_tensor={self._local_tensor!r}, device_mesh={self._spec.mesh!r}, "
                f"placements={self._spec.placements!r})")

    def __bool__(self):
        return bool(self.full_tensor())

    def __float__(self):
        return float(self.full_tensor())

    def __format__(self, format_spec):
        """f"{loss:.4f}" on a one-element DTensor formats its number, as on a tensor."""
        if self.ndim == 0 or format_spec:
            return format(self.item(), format_spec)
        return repr(self)


def _product(sizes):
    n = 1
    for s in sizes:
        n *= s
    return n


def _check_replicas_agree(local, mesh, placements):
    """run_check: Replicate pieces must be equal across their mesh dim (compared with rank 0's of each line)."""
    from trainrun import distributed as dist
    for i, p in enumerate(placements):
        if p.is_replicate() and mesh.size(i) > 1:
            ref = local.detach().clone().contiguous()
            _redistribute.communicate("broadcast", dist.broadcast, ref, mesh._line(i)[0], group=mesh._group(i))
            if not bool((ref == local.detach()).all()):
                raise ValueError(f"DTensor.from_local(run_check=True): the Replicate pieces along mesh dim {i} "
                                 "differ between ranks")


def distribute_tensor(tensor, device_mesh=None, placements=None, *, src_data_rank=0):
    """Splits a tensor (the same on every rank, or rank src_data_rank's) into this rank's piece for the
    placements. Uneven shards follow torch.chunk: trailing ranks get smaller or empty pieces."""
    from trainrun import distributed as dist
    from trainrun.distributed.device_mesh import mesh_or_default
    mesh = mesh_or_default(device_mesh, "distribute_tensor")
    placements = _check_placements(mesh, placements, tensor.ndim)
    if any(p.is_partial() for p in placements):
        raise ValueError("distribute_tensor: Partial placements cannot be distributed to (use from_local)")
    source = tensor.detach().contiguous()
    if src_data_rank is not None:  # every rank starts from the same data
        source = source.clone()
        _redistribute.communicate("broadcast", dist.broadcast, source, src_data_rank)
    replicated = tuple(Replicate() for _ in placements)
    local = _redistribute.redistribute_local(source, tuple(tensor.shape), mesh, replicated, placements)
    local = local.clone() if local is source else local
    if tensor.requires_grad:
        local.requires_grad_(True)
    return DTensor(local, DTensorSpec(mesh, placements, tuple(tensor.shape)))


__all__ = ["DTensor", "DTensorSpec", "distribute_tensor", "Partial", "Replicate", "Shard"]
