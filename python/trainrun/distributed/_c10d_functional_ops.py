"""torch.ops.c10d_functional: PyTorch's functional collectives as ops, with their op signatures (a group given
by its default-group ranks, a tag that is accepted and unused): what CommDebugMode counts by, as PyTorch's
`comm_mode.get_comm_counts()[torch.ops.c10d_functional.all_reduce]`. Each returns a new tensor, complete (its
wait_tensor is the identity), over trainrun.distributed._functional_collectives."""


def _fc():
    from trainrun.distributed import _functional_collectives
    return _functional_collectives


def all_reduce(self, reduceOp, tag, ranks, group_size):  # noqa: N803  (PyTorch's names)
    return _fc().all_reduce(self, reduceOp, list(ranks), tag)


def all_gather_into_tensor(shard, tag, ranks, group_size):
    return _fc().all_gather_tensor(shard, 0, list(ranks), tag)


def reduce_scatter_tensor(input, reduceOp, tag, ranks, group_size):  # noqa: A002,N803
    return _fc().reduce_scatter_tensor(input, reduceOp, 0, list(ranks), tag)


def all_to_all_single(input, output_split_sizes, input_split_sizes, tag, ranks, group_size):  # noqa: A002
    return _fc().all_to_all_single(input, output_split_sizes, input_split_sizes, list(ranks), tag)


def broadcast(self, src, tag, ranks, group_size):
    return _fc().broadcast(self, src, list(ranks), tag)


def wait_tensor(self):
    return self


OPS = {name: globals()[name] for name in ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor",
                                          "all_to_all_single", "broadcast", "wait_tensor")}

# The kind of collective DTensor and fully_shard issue (tensor/_redistribute.communicate) -> its op's name here.
OP_OF_KIND = {"all_reduce": "all_reduce", "all_gather": "all_gather_into_tensor",
              "reduce_scatter": "reduce_scatter_tensor", "all_to_all": "all_to_all_single", "broadcast": "broadcast"}


def op_of_kind(kind):
    """torch.ops.c10d_functional.<op> for a kind of collective (the kind itself when it has no op)."""
    name = OP_OF_KIND.get(kind)
    if name is None:
        return kind
    import trainrun
    return getattr(trainrun.ops.c10d_functional, name)
