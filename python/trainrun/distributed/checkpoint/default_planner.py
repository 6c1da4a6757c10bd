"""torch.distributed.checkpoint.default_planner: DefaultSavePlanner and DefaultLoadPlanner, the planners
save/load use when given none. trainrun plans the default way itself; these carry PyTorch's options:
allow_partial_load=True lets load skip the state dict's keys the checkpoint lacks (instead of naming them in
an error). Subclasses with their own planning are refused by save/load."""


class SavePlanner:
    """PyTorch's base class (a custom planner's base); save takes only DefaultSavePlanner."""


class LoadPlanner:
    """PyTorch's base class (a custom planner's base); load takes only DefaultLoadPlanner."""


class DefaultSavePlanner(SavePlanner):
    def __init__(self, flatten_state_dict=True, flatten_sharded_tensors=True, dedup_replicated_tensors=None,
                 dedup_save_to_lowest_rank=False, enable_plan_caching=False):
        self.flatten_state_dict, self.flatten_sharded_tensors = flatten_state_dict, flatten_sharded_tensors
        self.dedup_save_to_lowest_rank, self.enable_plan_caching = dedup_save_to_lowest_rank, enable_plan_caching


class DefaultLoadPlanner(LoadPlanner):
    def __init__(self, flatten_state_dict=True, flatten_sharded_tensors=True, allow_partial_load=False):
        self.flatten_state_dict, self.flatten_sharded_tensors = flatten_state_dict, flatten_sharded_tensors
        self.allow_partial_load = allow_partial_load


def check_planner(planner, default_class, what):
    """The planner's allow_partial_load (False for saving); a planner of another class is refused by name."""
    if planner is None:
        return False
    if type(planner) is not default_class:
        raise NotImplementedError(f"{what}: planner {type(planner).__name__} is not supported (trainrun plans the "
                                  f"default way; {default_class.__name__} and its options are accepted)")
    return bool(getattr(planner, "allow_partial_load", False))
