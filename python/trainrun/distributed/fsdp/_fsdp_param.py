"""One parameter of a fully_shard group: its slots (module, name), global
shape, and this rank's shard (torch.chunk's rows along dim 0, or the dim
shard_placement_fn names). Every rank sends the same number of elements to
a gather (its rows padded to ceil(rows / N)), so the gathered buffer is
rank-major and the full parameter is its prefix (with the sharded dim moved
back into place: a view)."""
from trainrun import _C
from trainrun.distributed.tensor._module_views import gradient_sum_group, views_off
from trainrun.distributed.tensor.placement_types import chunk_offsets, chunk_sizes


class FSDPParam:
    def __init__(self, module, name, full, group_size, rank, outer=None, dim=0):
        self.slots = [(module, name)]
        # The layout of the tensor-parallel DTensor whose local piece `full` is (FSDP x TP), or None (its spec
        # only: holding the DTensor would keep the whole local piece alive next to the shard)
        self.outer = None if outer is None else outer._spec
        # Sequence parallelism sums this parameter's gradient over its group (a hook on the tensor this replaces)
        self.gradient_sum_group = gradient_sum_group(module, name)
        self.dim = dim  # the sharded dim (shard_placement_fn's; 0 by default): moved to the front to gather
        self.shape = tuple(full.shape)
        moved = full.detach().movedim(dim, 0)
        self.moved_shape = tuple(moved.shape)
        rows = self.moved_shape[0]
        self.rows = chunk_sizes(rows, group_size)
        self.padded_rows = -(-rows // group_size)
        self.row_numel = int(full.numel() // max(rows, 1)) if rows else 0
        self.padded_numel = self.padded_rows * self.row_numel  # what each rank sends to a gather
        start = chunk_offsets(rows, group_size)[rank]
        shard = moved.narrow(0, start, self.rows[rank]).movedim(0, dim).contiguous().clone()
        shard.requires_grad_(full.requires_grad)
        self.shard = shard
        for m, n in self.slots:
            m._replace_parameter(n, shard)

    def rows_first(self, t):
        """t (shaped like the parameter or its shard) with the sharded dim first, contiguous and flat."""
        return t.movedim(self.dim, 0).contiguous().reshape([-1]) if self.dim else t.reshape([-1])

    def from_rows(self, flat, rows):
        """The inverse of rows_first for `rows` rows of the sharded dim."""
        moved = flat.reshape([rows] + list(self.moved_shape[1:]))
        return moved.movedim(0, self.dim).contiguous() if self.dim else moved

    @property
    def requires_grad(self):
        return self.shard.requires_grad

    def add_slot(self, module, name):
        self.slots.append((module, name))
        module._replace_parameter(name, self.shard)

    def replace_shard(self, shard):
        """A new tensor for the shard (materialising a meta-device model): every slot takes it."""
        shard.requires_grad_(self.shard.requires_grad)
        self.shard = shard
        for m, n in self.slots:
            m._replace_parameter(n, shard)

    def install(self, tensor, full):
        """Puts tensor (the shard, or the gathered parameter while full) in every slot; while full, the
        modules' attributes give it too (their forward reads self.weight)."""
        for m, n in self.slots:
            m._replace_parameter(n, tensor)
            views_off(m, full)

    def send_buffer(self, dtype):
        """This rank's padded rows, flat, in dtype: what it contributes to a gather."""
        return padded(self.rows_first(self.shard.detach()).to(dtype), self.padded_numel)

    def full_view(self, gathered, group_size):
        """The full parameter inside a gathered buffer (a view: torch.chunk pads only after the last rows)."""
        full = gathered.view([group_size * self.padded_rows] + list(self.moved_shape[1:]))
        full = full.narrow(0, 0, self.moved_shape[0])
        return full.movedim(0, self.dim) if self.dim else full


def padded(flat, numel):
    """flat (1-D) followed by zeros up to numel elements."""
    pad = numel - flat.shape[0]
    return flat if pad == 0 else _C.cat([flat, _C.zeros([pad], dtype=flat.dtype, device=flat.device)], 0)
