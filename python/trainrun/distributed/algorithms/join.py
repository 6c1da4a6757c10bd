"""torch.distributed.algorithms.join: training on uneven inputs. `with Join([ddp_model]): for batch in
my_batches: ...` lets ranks run different numbers of iterations. While the context is active, each iteration of
a joinable (DDP's forward) first all-reduces a 1 ("still training"); a rank out of inputs leaves its loop and, in
the context's exit, all-reduces 0 and runs each joinable's join hook (DDP: the all-reduces of zero gradient
buckets that match the other ranks' backward) for as long as the sum says someone is still training. The mean
DDP takes is then over the initial world size, as PyTorch's default."""
import abc

from trainrun import _C


class JoinHook:
    """main_hook() shadows one iteration's collectives of a joinable; post_hook(is_last_joiner) runs once all
    ranks have joined."""

    def main_hook(self):
        pass

    def post_hook(self, is_last_joiner):
        pass


class Joinable(abc.ABC):
    @abc.abstractmethod
    def join_hook(self, **kwargs):
        ...

    @property
    @abc.abstractmethod
    def join_device(self):
        ...

    @property
    @abc.abstractmethod
    def join_process_group(self):
        ...


class _JoinConfig:
    def __init__(self, enable, throw_on_early_termination, is_first_joinable):
        self.enable, self.throw_on_early_termination = enable, throw_on_early_termination
        self.is_first_joinable = is_first_joinable


class Join:
    def __init__(self, joinables, enable=True, throw_on_early_termination=False, **kwargs):
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        self._joinables, self._enable = list(joinables), enable
        self._throw = throw_on_early_termination
        self._hooks = [j.join_hook(**kwargs) for j in self._joinables]
        groups = {id(j.join_process_group) for j in self._joinables}
        if len(groups) > 1:
            raise ValueError("Using join context manager with multiple process groups")
        self._group = self._joinables[0].join_process_group
        for i, joinable in enumerate(self._joinables):
            joinable._join_config = _JoinConfig(enable, throw_on_early_termination, i == 0)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if not self._enable or exc_type is not None:
                return False
            from trainrun import distributed as dist
            all_joined = False
            is_last_joiner = True
            while not all_joined:
                still_training = _C.zeros([1], device=self._joinables[0].join_device)
                dist.all_reduce(still_training, group=self._group)
                if still_training.item() == 0:
                    all_joined = True
                    continue
                is_last_joiner = False
                if self._throw:
                    raise RuntimeError("Detected at least one rank that exhausted inputs. Throwing across all "
                                       "ranks.")
                for hook in self._hooks:
                    hook.main_hook()
            for hook in self._hooks:
                hook.post_hook(is_last_joiner)
            return False
        finally:
            for joinable in self._joinables:
                joinable._join_config = _JoinConfig(False, False, False)

    @staticmethod
    def notify_join_context(joinable):
        """What a joinable's iteration calls first, inside an active Join: all-reduce 1 ("still training");
        returns the work (None outside a Join, or for a joinable that is not the first)."""
        config = getattr(joinable, "_join_config", None)
        if config is None or not config.enable or not config.is_first_joinable:
            return None
        from trainrun import distributed as dist
        ones = _C.ones([1], device=joinable.join_device)
        work = dist.all_reduce(ones, group=joinable.join_process_group, async_op=True)
        if config.throw_on_early_termination:
            work.wait()
            if ones.item() != _group_size(joinable.join_process_group):
                raise RuntimeError("Detected at least one rank that exhausted inputs. Throwing across all ranks.")
        return work


def _group_size(group):
    from trainrun import distributed as dist
    return dist.get_world_size(group)
