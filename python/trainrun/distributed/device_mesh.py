"""DeviceMesh: the ranks of a job laid out as an n-D array, with one process
group per line of each dimension (PyTorch 2.x's torch.distributed.device_mesh).
init_device_mesh creates every group once, on every rank in the same order;
slicing (mesh["tp"], mesh["dp", "tp"]) reuses them and creates none;
_flatten() merges dimensions into one (creating that dimension's groups); the mesh the dims came from
then slices by the flattened name too (root["dp_shard_cp"], root["dp_replicate", "dp_shard_cp"]), as
PyTorch 2.6's does."""
import itertools

import numpy as np

from trainrun import distributed as dist

# (tuple of global ranks) -> ProcessGroup (None for the whole world): groups are made once per line.
_GROUPS = {}


def _group_for(ranks):
    ranks = tuple(int(r) for r in ranks)
    if ranks == tuple(range(dist.get_world_size())):
        return None  # the default group (get_group() shows it as dist.group.WORLD)
    if ranks not in _GROUPS:
        raise KeyError(f"DeviceMesh: no process group was created for ranks {list(ranks)}")
    return _GROUPS[ranks]


def _default_group_for(device_type):
    """As PyTorch's DeviceMesh: the default group is started (from the launcher's environment) when the script
    has not, with the device type's backend (NCCL for CUDA, Gloo otherwise)."""
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device_type == "cuda" else "gloo")


def _create_groups(mesh, dims):
    """Creates, on every rank and in the same order, the group of each line along each of `dims`."""
    world = tuple(range(dist.get_world_size()))
    for d in dims:
        lines = np.moveaxis(mesh, d, -1).reshape(-1, mesh.shape[d])
        for line in lines:
            key = tuple(int(r) for r in line)
            if key != world and key not in _GROUPS:
                _GROUPS[key] = dist.new_group(list(key))


class DeviceMesh:
    """A mesh of global ranks (mesh: nested list or int tensor/array), its dims optionally named."""

    def __init__(self, device_type, mesh, *, mesh_dim_names=None, _init_backend=True):
        array = np.asarray(mesh.tolist() if hasattr(mesh, "tolist") else mesh, dtype=np.int64)
        if array.ndim == 0:
            array = array.reshape(1)
        flat = sorted(array.reshape(-1).tolist())
        if len(set(flat)) != len(flat):
            raise ValueError(f"DeviceMesh: ranks repeat in the mesh {array.tolist()}")
        if _init_backend:
            _default_group_for(device_type)
        elif not dist.is_initialized():
            raise RuntimeError("DeviceMesh: call trainrun.distributed.init_process_group first")
        if flat[-1] >= dist.get_world_size() or flat[0] < 0:
            raise ValueError(f"DeviceMesh: the mesh {array.tolist()} names ranks outside the world of "
                             f"{dist.get_world_size()}")
        names = tuple(mesh_dim_names) if mesh_dim_names is not None else None
        if names is not None and (len(names) != array.ndim or len(set(names)) != len(names)):
            raise ValueError(f"DeviceMesh: mesh_dim_names {names} must name each of the {array.ndim} dims once")
        self.device_type, self._mesh, self._names = device_type, array, names
        # The mesh this one was sliced or flattened from (None: it is a root), and on a root, the names _flatten
        # gave to merged dims -> those dims.
        self._root, self._flattened = None, {}
        if _init_backend:
            _create_groups(array, range(array.ndim))
        self._hash = hash((tuple(array.reshape(-1).tolist()), array.shape, names))
        here = np.argwhere(array == dist.get_rank())
        self._coordinate = [int(c) for c in here[0]] if len(here) else None

    @staticmethod
    def from_group(group, device_type, mesh=None, *, mesh_dim_names=None):
        """A mesh over existing process groups, creating none: one group (a 1-D mesh of its ranks), or a list
        with one group per dim of `mesh` (each the line of that dim through this rank)."""
        groups = list(group) if isinstance(group, (list, tuple)) else [group]
        if mesh is None:
            if len(groups) != 1:
                raise ValueError(f"DeviceMesh.from_group: {len(groups)} groups need mesh= to lay them out")
            mesh = dist.get_process_group_ranks(groups[0])
        array = np.asarray(mesh.tolist() if hasattr(mesh, "tolist") else mesh, dtype=np.int64)
        if array.ndim != len(groups):
            raise ValueError(f"DeviceMesh.from_group: a {array.ndim}-D mesh needs {array.ndim} groups, "
                             f"got {len(groups)}")
        result = DeviceMesh(device_type, array, mesh_dim_names=mesh_dim_names, _init_backend=False)
        world = tuple(range(dist.get_world_size()))
        for d, g in enumerate(groups):
            ranks = tuple(dist.get_process_group_ranks(g))
            if result._coordinate is not None and list(ranks) != result._line(d):
                raise ValueError(f"DeviceMesh.from_group: group {d} has ranks {list(ranks)}, but the mesh's dim "
                                 f"{d} through rank {dist.get_rank()} is {result._line(d)}")
            if ranks != world:
                _GROUPS.setdefault(ranks, g)
        return result

    # ---- what it is ------------------------------------------------------------------------------
    @property
    def mesh(self):
        from trainrun import tensor
        return tensor(self._mesh.tolist())

    @property
    def mesh_dim_names(self):
        return self._names

    @property
    def ndim(self):
        return self._mesh.ndim

    @property
    def shape(self):
        return tuple(self._mesh.shape)

    def size(self, mesh_dim=None):
        return int(self._mesh.size) if mesh_dim is None else int(self._mesh.shape[self._dim(mesh_dim)])

    def get_coordinate(self):
        """This rank's index along each dim, or None when it is not in the mesh."""
        return None if self._coordinate is None else list(self._coordinate)

    def get_rank(self):
        return dist.get_rank()

    def _dim(self, mesh_dim):
        if isinstance(mesh_dim, str):
            if self._names is None or mesh_dim not in self._names:
                raise KeyError(f"DeviceMesh: no dim named {mesh_dim!r} (dims: {self._names})")
            return self._names.index(mesh_dim)
        if not -self.ndim <= mesh_dim < self.ndim:
            raise IndexError(f"DeviceMesh: dim {mesh_dim} out of range for a {self.ndim}-D mesh")
        return mesh_dim % self.ndim

    def _line(self, mesh_dim):
        """The global ranks along mesh_dim through this rank, in coordinate order."""
        d = self._dim(mesh_dim)
        index = list(self._coordinate)
        index[d] = slice(None)
        return [int(r) for r in self._mesh[tuple(index)]]

    # ---- groups -----------------------------------------------------------------------------------
    def get_group(self, mesh_dim=None):
        """The process group along mesh_dim that this rank is in (mesh_dim may be omitted on a 1-D mesh); the
        default group's is dist.group.WORLD, as PyTorch gives."""
        group = self._group(mesh_dim)
        return dist.group.WORLD if group is None else group

    def _group(self, mesh_dim=None):
        """get_group, with None for the default group (what trainrun's own layers pass on)."""
        if self._coordinate is None:
            raise RuntimeError(f"DeviceMesh: rank {dist.get_rank()} is not in the mesh {self._mesh.tolist()}")
        if mesh_dim is None:
            if self.ndim != 1:
                raise RuntimeError(f"DeviceMesh.get_group(): the mesh has {self.ndim} dims; name one")
            mesh_dim = 0
        return _group_for(self._line(mesh_dim))

    def get_all_groups(self):
        return [self.get_group(d) for d in range(self.ndim)]

    def get_local_rank(self, mesh_dim=None):
        if mesh_dim is None:
            if self.ndim != 1:
                raise RuntimeError(f"DeviceMesh.get_local_rank(): the mesh has {self.ndim} dims; name one")
            mesh_dim = 0
        return self._coordinate[self._dim(mesh_dim)]

    # ---- slicing and flattening -------------------------------------------------------------------
    def __getitem__(self, names):
        """The sub-mesh of the named dims through this rank (its groups already exist). A name _flatten gave
        stands for the dims it merged, which become one dim of the sub-mesh."""
        names = (names,) if isinstance(names, str) else tuple(names)
        if self._names is None:
            raise KeyError("DeviceMesh: only a mesh with mesh_dim_names can be sliced")
        merged = [list(self._flattened[n]) if n in self._flattened and n not in self._names else [self._dim(n)]
                  for n in names]
        dims = [d for group in merged for d in group]
        if dims != sorted(set(dims)):
            raise KeyError(f"DeviceMesh: slice the dims {names} in the mesh's order {self._names}, each once")
        index = [slice(None) if d in dims else c for d, c in enumerate(self._coordinate)]
        shape = [int(np.prod([self._mesh.shape[d] for d in group])) for group in merged]
        sub = DeviceMesh(self.device_type, self._mesh[tuple(index)].reshape(shape), mesh_dim_names=names,
                         _init_backend=False)
        sub._root = self._root or self
        return sub

    def _flatten(self, mesh_dim_name=None):
        """This mesh as 1-D (row-major over its dims), with that dimension's groups created."""
        flat = self._mesh.reshape(-1)
        name = mesh_dim_name or "_".join(self._names or ("flat",))
        all_meshes = _all_parallel_meshes(self)
        for other in all_meshes:  # every rank creates every flattened line, in the same order
            key = tuple(int(r) for r in other.reshape(-1))
            if key != tuple(range(dist.get_world_size())) and key not in _GROUPS:
                _GROUPS[key] = dist.new_group(list(key))
        root = self._root or self
        if self._names and root._names and all(n in root._names for n in self._names):
            known = root._flattened.get(name)
            dims = tuple(root._names.index(n) for n in self._names)
            if (name in root._names and dims != (root._names.index(name),)) or known not in (None, dims):
                raise ValueError(f"DeviceMesh._flatten: the name {name!r} already names other dims of {root}")
            if name not in root._names:
                root._flattened[name] = dims  # root[name] is this flattened mesh from now on
        out = DeviceMesh(self.device_type, flat, mesh_dim_names=(name,), _init_backend=False)
        out._root = root
        return out

    def __repr__(self):
        names = f", mesh_dim_names={self._names}" if self._names else ""
        return f"DeviceMesh('{self.device_type}', {self._mesh.tolist()}{names})"

    def __eq__(self, other):
        return other is self or isinstance(other, DeviceMesh) and self._hash == other._hash and \
            np.array_equal(self._mesh, other._mesh) and self._names == other._names

    def __hash__(self):
        return self._hash


def _all_parallel_meshes(mesh):
    """Every sub-mesh of the root mesh shaped like `mesh` (one per rank group): what _flatten creates."""
    root = _ROOT.get("mesh")
    if root is None or root.ndim == mesh.ndim:
        return [mesh._mesh]
    sub_names = mesh.mesh_dim_names
    dims = [root._names.index(n) for n in sub_names]
    other = [d for d in range(root.ndim) if d not in dims]
    out = []
    for idx in itertools.product(*[range(root._mesh.shape[d]) for d in other]):
        index = [slice(None)] * root.ndim
        for d, i in zip(other, idx):
            index[d] = i
        out.append(root._mesh[tuple(index)])
    return out


_ROOT = {}


def mesh_or_default(device_mesh, where):
    """device_mesh, or the mesh init_device_mesh made last (ValueError naming `where` when there is none)."""
    mesh = device_mesh if device_mesh is not None else _ROOT.get("mesh")
    if mesh is None:
        raise ValueError(f"{where}: give device_mesh (no mesh was initialized with init_device_mesh)")
    return mesh


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None):
    """A mesh over all ranks in row-major order, e.g. init_device_mesh("cpu", (2, 4), mesh_dim_names=("dp",
    "tp")): ranks 0-3 form dp row 0. Every rank calls it, in the same order as its other group creations.
    It starts the default process group if the script has not."""
    if device_type not in ("cpu", "cuda"):
        raise ValueError(f"init_device_mesh: device_type must be 'cpu' or 'cuda', got {device_type!r}")
    _default_group_for(device_type)
    world = dist.get_world_size()
    shape = tuple(int(s) for s in mesh_shape)
    if int(np.prod(shape)) != world:
        raise ValueError(f"init_device_mesh: mesh shape {shape} holds {int(np.prod(shape))} ranks but the world "
                         f"has {world}")
    mesh = DeviceMesh(device_type, np.arange(world).reshape(shape), mesh_dim_names=mesh_dim_names)
    _ROOT["mesh"] = mesh
    return mesh
