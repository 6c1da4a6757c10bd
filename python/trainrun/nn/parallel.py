"""trainrun.nn.parallel.DistributedDataParallel, as PyTorch's: gradients
averaged over the ranks during backward (buckets all-reduced as they fill)."""
import contextlib

from trainrun import _C
from trainrun._autograd import no_grad
from trainrun.distributed.algorithms import default_hooks
from trainrun.profiler import record_function


class DistributedDataParallel(_C.distributed.DistributedDataParallel):
    """PyTorch's constructor: device_ids (None, or the one device the module is on), output_device and dim
    are the single-device forms (each process drives one device); static_graph is accepted (the reducer finds
    the ready order each iteration anyway); device_mesh (1-D) stands for its process group."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, delay_all_reduce_named_params=None,
                 param_to_hook_all_reduce=None, mixed_precision=None, device_mesh=None):
        if device_ids is not None and len(list(device_ids)) > 1:
            raise ValueError(f"DistributedDataParallel: device_ids {list(device_ids)} names several devices; a "
                             "process drives one device (pass device_ids=[local_rank] or None)")
        if mixed_precision is not None or delay_all_reduce_named_params is not None or \
                param_to_hook_all_reduce is not None:
            raise NotImplementedError("DistributedDataParallel: mixed_precision, delay_all_reduce_named_params and "
                                      "param_to_hook_all_reduce are not supported")
        if device_mesh is not None:
            if process_group is not None:
                raise RuntimeError("Cannot specify both process_group and device_mesh arguments.")
            if device_mesh.ndim != 1:
                raise RuntimeError(f"Only 1D device mesh is supported, but got {device_mesh.ndim}D")
            process_group = device_mesh.get_group(0)
        super().__init__(module, process_group, 25.0 if bucket_cap_mb is None else bucket_cap_mb,
                         find_unused_parameters, gradient_as_bucket_view, broadcast_buffers)
        self.device_ids, self.output_device, self.dim, self.static_graph = device_ids, output_device, dim, \
            static_graph
        self.module = module  # the Python module (and its forward) lives as long as this
        self._process_group, self._broadcast_buffers = process_group, broadcast_buffers

    @record_function("DistributedDataParallel.forward")  # (PyTorch's range: a profile shows the wrapper's time)
    def forward(self, *inputs, **kwargs):
        """Runs the wrapped module on every argument it takes. Tensors go through C++ (which broadcasts
        rank 0's buffers, then calls the module, its Python hooks included); calls with keywords or other
        values broadcast the buffers here, then call the module. Inside a Join, the rank first says it is still
        training (algorithms/join.py)."""
        if self.__dict__.get("_join_config") is not None and self._join_config.enable:
            from trainrun.distributed.algorithms.join import Join
            Join.notify_join_context(self)
        if inputs and not kwargs and all(_C._is_cpp_tensor(a) for a in inputs):
            return super().forward(*inputs)
        if self._broadcast_buffers and self.training:
            from trainrun import distributed as dist
            with no_grad():
                for _, buffer in self.module.named_buffers():
                    dist.broadcast(buffer, group=self._process_group, group_src=0)
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside only accumulate locally; the next one outside syncs it all."""
        previous = self._sync()
        self._set_sync(False)
        try:
            yield
        finally:
            self._set_sync(previous)

    # ---- Join (uneven inputs): what a rank out of inputs runs in place of an iteration ---------------------
    def join(self, divide_by_initial_world_size=True, enable=True, throw_on_early_termination=False):
        """`with model.join():` training on uneven inputs: PyTorch's shorthand for Join([model], ...)."""
        from trainrun.distributed.algorithms.join import Join
        return Join([self], enable, throw_on_early_termination,
                    divide_by_initial_world_size=divide_by_initial_world_size)

    def join_hook(self, divide_by_initial_world_size=True):
        if not divide_by_initial_world_size:
            raise NotImplementedError("DistributedDataParallel.join_hook(divide_by_initial_world_size=False) is "
                                      "not supported: the buckets are averaged over the initial world size")
        return _DDPJoinHook(self)

    @property
    def join_device(self):
        return next(self.module.parameters()).device

    @property
    def join_process_group(self):
        return self._process_group

    def register_comm_hook(self, state, hook):
        """hook(state, bucket) -> a Future of the bucket's reduced tensor, run per bucket as it fills, as
        PyTorch's (bucket: a GradBucket; the usual body all-reduces bucket.buffer() asynchronously and returns
        work.get_future().then(...)). The built-in hooks of default_hooks run in C++ instead."""
        if hook is default_hooks.allreduce_hook:
            return  # what DDP does without a hook
        name = default_hooks.BUILT_IN.get(hook)
        if name is not None:
            super().register_comm_hook(name)
            return
        params = [p for p in self.module.parameters() if p.requires_grad]
        buckets = self._bucket_indices()
        launched = [0]

        def run(buffer):
            index = launched[0] % len(buckets)
            launched[0] += 1
            members = [params[i] for i in buckets[index]]
            return hook(state, GradBucket(index, buffer, members, index == len(buckets) - 1))
        self._register_python_comm_hook(run)


class _DDPJoinHook:
    """One training iteration's collectives, with nothing to contribute: the buffers' broadcast (as the
    forward does) and each bucket's averaging all-reduce of zeros, in launch order."""

    def __init__(self, ddp):
        self._ddp = ddp

    def main_hook(self):
        from trainrun import distributed as dist
        ddp, group = self._ddp, self._ddp._process_group
        if ddp._broadcast_buffers:
            with no_grad():
                for _, buffer in ddp.module.named_buffers():
                    dist.broadcast(buffer, group=group, group_src=0)
        params = [p for p in ddp.module.parameters() if p.requires_grad]
        for indices in ddp._bucket_indices():
            numel = sum(params[i].numel() for i in indices)
            zeros = _C.zeros([numel], dtype=params[indices[0]].dtype, device=params[indices[0]].device)
            dist.all_reduce(zeros, op=dist.ReduceOp.AVG, group=group)

    def post_hook(self, is_last_joiner):
        """The ranks that joined early skipped the last updates: every rank takes the model of a last joiner
        (the highest-numbered), as PyTorch's _sync_final_model."""
        from trainrun import distributed as dist
        group = self._ddp._process_group
        me = dist.get_rank(group) if group is not None else dist.get_rank()
        authority = _C.full([1], float(me if is_last_joiner else -1))
        dist.all_reduce(authority, op=dist.ReduceOp.MAX, group=group)
        source = int(authority.item())
        source = dist.get_global_rank(group, source) if group is not None else source
        with no_grad():
            for p in self._ddp.module.parameters():
                dist.broadcast(p.detach(), source, group=group)
            for _, buffer in self._ddp.module.named_buffers():
                dist.broadcast(buffer, source, group=group)


class GradBucket:
    """What a DDP communication hook gets (torch.distributed.GradBucket): the bucket's flat gradient buffer
    (its parameters' gradients back to back), its index in launch order, and its parameters."""

    def __init__(self, index, buffer, parameters, is_last):
        self._index, self._buffer, self._parameters, self._is_last = index, buffer, parameters, is_last

    def index(self):
        return self._index

    def buffer(self):
        return self._buffer

    def is_last(self):
        return self._is_last

    def parameters(self):
        return list(self._parameters)

    def gradients(self):
        """Each parameter's gradient as a view into the buffer."""
        views, offset = [], 0
        for p in self._parameters:
            n = p.numel()
            views.append(self._buffer[offset:offset + n].view(p.shape))
            offset += n
        return views

    def set_buffer(self, buffer):
        """Replaces the bucket's tensor (a hook may swap in a compressed copy, as fp16_compress_wrapper does); DDP
        takes the reduced values from the future the hook returns."""
        self._buffer = buffer
