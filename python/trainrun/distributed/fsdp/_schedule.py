"""When each fully_shard group's collectives are issued, so that they run
on the process group's thread while this thread computes.

Forward: a group's pre-forward waits for its own gather (issuing it unless
a prefetch did), then issues the gather of the group that runs next (in the
order the last forward from the same root ran them, or as
set_modules_to_forward_prefetch says). Block i+1's gather thus overlaps block i's
compute. When the root's forward ends, prefetches no group used are waited
for and dropped (they must not outlive an optimizer step).

Backward: a group's re-gather issues the re-gather of the group backward
reaches next (the reverse of forward, or set_modules_to_backward_prefetch);
its reduce-scatter is issued as soon as autograd has its gradients and
finished (the shards' .grad set) when the next group's is issued, or at the
end of backward (a callback queued on the autograd engine). So group i's
reduce-scatter overlaps group i-1's backward compute.

In flight at any time: at most one prefetched gather beyond the group
computing, and one reduce-scatter."""
import itertools

from trainrun import _C

ACTIVE_FORWARDS = []  # the groups whose forward is running, outermost (the root) first
_FORWARD_IDS = itertools.count()  # numbers the root forwards: a backward re-gathers its own forward's buffers


class _Backward:
    reduce = None  # the reduce-scatter in flight
    regathered = []  # gathers (_Gather records) whose re-gather a prefetch issued


# ---- forward ----------------------------------------------------------------------------------------
def forward_started(group):
    """group's pre-forward, with group already on ACTIVE_FORWARDS: records the order, puts the group's
    parameters in place (waiting for their gather) and issues the next group's gather."""
    root = ACTIVE_FORWARDS[0]
    if root is group:
        root.recording = []
        root.forward_id = next(_FORWARD_IDS)
    root.recording.append(group)
    group.root = root
    group.unshard()
    for target in _forward_targets(group, root):  # after the wait: one gather in flight at a time
        target.start_unshard()


def _forward_targets(group, root):
    if group.forward_prefetch is not None:
        return group.forward_prefetch
    order = getattr(root, "forward_order", None) or []
    if group in order:
        i = order.index(group)
        return order[i + 1:i + 2]
    return []


def forward_finished(root):
    """The root's forward is over: its order drives the next forward's and this backward's prefetches."""
    root.forward_order = getattr(root, "recording", [])
    for group in root.forward_order + list(root.forward_prefetch or []):
        if not group.installed:
            group.drop_prefetch()
    for group in root.forward_order:
        for target in group.forward_prefetch or []:
            target.drop_prefetch()


# ---- backward ---------------------------------------------------------------------------------------
def prefetch_backward(group, record):
    """group is gathered again for the backward of record's forward: issue the re-gather, for the same
    forward, of the group backward reaches next."""
    forward_id = record.forward_id if record is not None else None
    if group.backward_prefetch is not None:
        targets = group.backward_prefetch
    else:
        order = getattr(group.root, "forward_order", []) if group.root is not None else []
        i = order.index(group) if group in order else 0
        targets = [g for g in reversed(order[:i]) if g.waiting_record(forward_id) is not None][:1]
    for target in targets:
        waiting = target.waiting_record(forward_id)
        if waiting is not None and waiting.regathering is None and target.unshard_in_backward:
            target.start_regather(waiting)
            _Backward.regathered.append(waiting)
            _C._queue_callback(end_of_backward)


def reduce_issued(reduce):
    """A group's reduce-scatter was issued (None: gradient sync is off): finish the one before it."""
    if _Backward.reduce is not None:
        previous, _Backward.reduce = _Backward.reduce, None
        previous.group.finish_reduce(previous)
    if reduce is not None:
        _Backward.reduce = reduce
        _C._queue_callback(end_of_backward)


def end_of_backward():
    """Queued on the engine by every issue (running it twice is harmless): the last reduce-scatter lands in
    .grad before backward() returns; re-gathers issued for groups backward never reached are waited for and
    their memory freed again."""
    if _Backward.reduce is not None:
        previous, _Backward.reduce = _Backward.reduce, None
        previous.group.finish_reduce(previous)
    regathered, _Backward.regathered = _Backward.regathered, []
    for record in regathered:
        if record.regathering is not None:  # never reached: free again (a later backward would re-gather)
            record.regathering.wait()
            record.regathering = None
            for o in record.outs:
                o.untyped_storage().resize_(0)
