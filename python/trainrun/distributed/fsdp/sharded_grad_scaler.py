"""ShardedGradScaler, as torch.distributed.fsdp.sharded_grad_scaler: GradScaler for sharded gradients (FSDP2's
DTensor shards, FSDP1's flat shards). Each rank unscales and checks only its own piece; one all-reduce of the
"found inf" flag over the process group then makes every rank skip the same steps and move the scale alike, so
the replicas never drift apart."""
from trainrun.amp.grad_scaler import GradScaler

__all__ = ["ShardedGradScaler"]


class ShardedGradScaler(GradScaler):
    def __init__(self, device="cuda", init_scale=2.0**16, backoff_factor=0.5, growth_factor=2.0,
                 growth_interval=2000, enabled=True, process_group=None):
        super().__init__(device, init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)
        self.process_group = process_group  # (None: the default group, PyTorch's dist.group.WORLD)

    def _found_inf_anywhere(self, found_inf_here):
        import trainrun
        from trainrun import distributed as dist
        if not dist.is_initialized():
            return found_inf_here
        flag = trainrun.tensor([1.0 if found_inf_here else 0.0], device=dist._collective_device(self.process_group))
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.process_group)
        return bool(flag.item())
