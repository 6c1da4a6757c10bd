"""ZeroRedundancyOptimizer (ZeRO stage 1), as torch.distributed.optim's: every rank holds the whole model (DDP
gives each the same gradients) but the optimizer state of only its share of the parameters. step() updates that
share with a local optimizer of the given class, then each rank broadcasts the parameters it owns, so all ranks
end the step with the same model. The share is PyTorch's: each parameter group's parameters, largest first, go
to the rank holding the fewest elements so far (sizes counted across groups), so a checkpoint's layout matches.

consolidate_state_dict(to) gathers the shares' states on one rank; state_dict() there gives an ordinary
optimizer state dict (indices over all parameters), and load_state_dict takes one on every rank, each keeping
its share."""
import itertools

from trainrun import _C
from trainrun import distributed as dist
from trainrun.optim.optimizer import Optimizer


class ZeroRedundancyOptimizer(Optimizer):
    def __init__(self, params, optimizer_class, process_group=None, parameters_as_bucket_view=False,
                 overlap_with_ddp=False, **defaults):
        if overlap_with_ddp:
            raise NotImplementedError("ZeroRedundancyOptimizer(overlap_with_ddp=True) is not supported: the step "
                                      "runs after DDP's backward")
        if not dist.is_initialized():
            raise RuntimeError("ZeroRedundancyOptimizer needs an initialized default process group "
                               "(call init_process_group first)")
        self._optimizer_class = optimizer_class
        self._default_kwargs = dict(defaults)
        self.process_group = process_group
        # (parameters_as_bucket_view: PyTorch's memory layout option; the broadcast here already sends one
        # flattened buffer per owning rank, so the values and the traffic do not depend on it)
        self.parameters_as_bucket_view = parameters_as_bucket_view
        self.world_size = dist.get_world_size(process_group)
        self.rank = dist.get_rank(process_group)
        self.global_rank = dist.get_rank()
        self._owners = {}  # id(parameter) -> the group rank that updates it
        self._sizes = [0] * self.world_size
        self._local_groups = []  # (index in self.param_groups, index in self.optim.param_groups)
        self._local_positions = []  # each local parameter's position among all (self._params()), in local order
        self.optim = None
        self._all_state_dicts = None
        super().__init__(params, defaults)

    # ---- the partition ----------------------------------------------------------------------------------------
    def add_param_group(self, param_group):
        """Adds a group to every rank's view; its parameters are shared out as the constructor's were."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        mine = []
        for p in sorted(group["params"], key=lambda t: t.numel(), reverse=True):  # (stable: ties keep order)
            owner = min(range(self.world_size), key=lambda r: self._sizes[r])
            self._owners[id(p)] = owner
            self._sizes[owner] += p.numel()
            if owner == self.rank:
                mine.append(p)
        if not mine:
            return
        owned = {id(p) for p in mine}
        local = {**{k: v for k, v in group.items() if k != "params"},
                 "params": [p for p in group["params"] if id(p) in owned]}
        first = len(self._params()) - len(group["params"])
        self._local_positions += [first + i for i, p in enumerate(group["params"]) if id(p) in owned]
        if self.optim is None:
            self.optim = self._optimizer_class([local], **self._default_kwargs)
        else:
            self.optim.add_param_group(local)
        self._local_groups.append((len(self.param_groups) - 1, len(self.optim.param_groups) - 1))

    def _owner_global_rank(self, owner):
        return owner if self.process_group is None else dist.get_global_rank(self.process_group, owner)

    def _params_of(self, owner):
        return [p for p in self._params() if self._owners[id(p)] == owner]

    # ---- the step -------------------------------------------------------------------------------------------------
    def step(self, closure=None, **kwargs):
        """Updates this rank's share (the groups' current options, e.g. a scheduler's lr, applied first), then
        every rank's share is broadcast from its owner. Returns the closure's loss. Inside a Join, the rank first
        says it is still training."""
        from trainrun.distributed.algorithms.join import Join
        Join.notify_join_context(self)
        for mine, local in self._local_groups:
            for key, value in self.param_groups[mine].items():
                if key != "params":
                    self.optim.param_groups[local][key] = value
        if self.optim is not None:
            loss = self.optim.step(closure=closure, **kwargs)
        elif closure is not None:
            from trainrun._autograd import enable_grad
            with enable_grad():
                loss = closure()
        else:
            loss = None
        self._broadcast_params()
        return loss

    def _broadcast_params(self):
        """One flattened buffer per owning rank, broadcast from it (all posted, then waited on)."""
        from trainrun._autograd import no_grad
        with no_grad():
            pending = []
            for owner in range(self.world_size):
                params = self._params_of(owner)
                if not params:
                    continue
                flat = _C.cat([p.detach().reshape(-1) for p in params]) if owner == self.rank else \
                    _C.zeros([sum(p.numel() for p in params)], dtype=params[0].dtype, device=params[0].device)
                work = dist.broadcast(flat, src=self._owner_global_rank(owner), group=self.process_group,
                                      async_op=True)
                pending.append((owner, params, flat, work))
            for owner, params, flat, work in pending:
                work.wait()
                if owner == self.rank:
                    continue
                start = 0
                for p in params:
                    p.detach().copy_(flat[start:start + p.numel()].view(tuple(p.shape)))
                    start += p.numel()

    # ---- Join (uneven inputs) ----------------------------------------------------------------------------------
    def join_hook(self, **kwargs):
        """A rank out of inputs keeps stepping (as PyTorch's: it still owns a share, which the others wait for)."""
        from trainrun.distributed.algorithms.join import JoinHook

        class _ZeROJoinHook(JoinHook):
            def main_hook(hook):
                self.step()
        return _ZeROJoinHook()

    @property
    def join_device(self):
        return self._params()[0].device

    @property
    def join_process_group(self):
        return self.process_group

    # ---- state dicts ----------------------------------------------------------------------------------------------
    def consolidate_state_dict(self, to=0):
        """Gathers every share's state on global rank `to` (a collective: every rank calls it); state_dict() there
        then gives the whole optimizer's."""
        local = self.optim.state_dict()["state"] if self.optim is not None else {}
        mine = {g: local[i] for i, g in enumerate(self._local_positions) if i in local}
        gathered = [None] * self.world_size if self.global_rank == to else None
        dist.gather_object(mine, gathered, dst=to, group=self.process_group)
        self._all_state_dicts = gathered if self.global_rank == to else None

    def state_dict(self):
        """The whole optimizer's state dict (PyTorch's layout, indices over all parameters), on the rank
        consolidate_state_dict gathered to."""
        if self._all_state_dicts is None:
            raise RuntimeError("Optimizer state has not been consolidated on this rank. Please call "
                               "`consolidate_state_dict(to=...)` on all ranks beforehand if you meant to save "
                               "the global state.")
        index = {id(p): i for i, p in enumerate(self._params())}
        groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": [index[id(p)] for p in g["params"]]}
                  for g in self.param_groups]
        state = dict(sorted(itertools.chain.from_iterable(s.items() for s in self._all_state_dicts)))
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Takes a whole optimizer's state dict (from state_dict() here, or an ordinary optimizer's over the same
        parameters) on every rank; each keeps its share's state and every group's options."""
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups) or any(len(a["params"]) != len(b["params"]) for a, b in
                                                        zip(groups, self.param_groups)):
            raise ValueError("ZeroRedundancyOptimizer.load_state_dict: the state dict's parameter groups do not "
                             "match this optimizer's")
        for mine, given in zip(self.param_groups, groups):
            mine.update({k: v for k, v in given.items() if k != "params"})
        if self.optim is None:
            return
        saved_index = [i for g in groups for i in g["params"]]  # position over all parameters -> saved index
        state = state_dict["state"]
        local_state = {}
        for local_index, position in enumerate(self._local_positions):
            key = saved_index[position]
            entry = state.get(key, state.get(str(key)))
            if entry:
                local_state[local_index] = entry
        local_groups = self.optim.state_dict()["param_groups"]
        for mine, local in self._local_groups:
            local_groups[local].update({k: v for k, v in self.param_groups[mine].items() if k != "params"})
        self.optim.load_state_dict({"state": local_state, "param_groups": local_groups})


def _register_joinable():
    from trainrun.distributed.algorithms.join import Joinable
    Joinable.register(ZeroRedundancyOptimizer)


_register_joinable()
