"""trainrun.multiprocessing: tensors shared between processes, not copied.

Zero copy both ways under fork and spawn, lifetimes (the producer may drop a
tensor as soon as it is sent; the segment goes when the last holder drops
it), kill -9 of either side, 100k tensors under `ulimit -n 1024`, spawn's
error reports, and the refusals."""
import gc
import os
import resource
import signal
import time

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun  # noqa: E402
import trainrun.multiprocessing as mp  # noqa: E402

TIMEOUT = 60


def shared_bytes():
    """Bytes of shared segments this process maps."""
    gc.collect()
    return trainrun._C._shared_memory_stats()[1]


def dev_shm():
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def wait_until(predicate, what, seconds=TIMEOUT):
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


class Child:
    """A process of `ctx` running target(*args), killed if a test leaves it behind."""

    def __init__(self, ctx, target, *args):
        self.process = ctx.Process(target=target, args=args, daemon=True)
        self.process.start()

    def __enter__(self):
        return self.process

    def __exit__(self, *exc):
        self.process.join(TIMEOUT)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


# ---- zero copy -------------------------------------------------------------------------------------------
def _add_one_and_share_back(inbox, outbox):
    t = inbox.get(timeout=TIMEOUT)
    t.add_(1)
    mine = trainrun.zeros(4)
    outbox.put(mine)
    assert inbox.get(timeout=TIMEOUT) == "written"
    outbox.put(mine.tolist())


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_write_in_either_process_is_seen_in_the_other(method):
    ctx = mp.get_context(method)
    inbox, outbox = mp.Queue(ctx=ctx), mp.Queue(ctx=ctx)
    with Child(ctx, _add_one_and_share_back, inbox, outbox) as child:
        t = trainrun.zeros(3)
        inbox.put(t)
        theirs = outbox.get(timeout=TIMEOUT)  # sent after the child's add_
        assert t.tolist() == [1.0, 1.0, 1.0] and t.is_shared()
        theirs.fill_(5.0)
        inbox.put("written")
        assert outbox.get(timeout=TIMEOUT) == [5.0] * 4
    assert child.exitcode == 0


def _sum_views(inbox, outbox):
    a, b, model = inbox.get(timeout=TIMEOUT)
    b[0] = 100.0  # b is a view of a's storage: a sees it too
    with trainrun.no_grad():
        for p in model.parameters():
            p.fill_(2.0)  # Hogwild: the parent's model changes
    outbox.put((a.tolist(), a.untyped_storage() == b.untyped_storage()))


def test_views_parameters_and_modules_travel_by_reference():
    ctx = mp.get_context("fork")
    inbox, outbox = mp.Queue(ctx=ctx), mp.Queue(ctx=ctx)
    base = trainrun.arange(6.0)
    model = trainrun.nn.Linear(2, 2)
    with Child(ctx, _sum_views, inbox, outbox):
        inbox.put((base, base[2:], model))
        values, same_storage = outbox.get(timeout=TIMEOUT)
    assert values == [0.0, 1.0, 100.0, 3.0, 4.0, 5.0] and same_storage
    assert base[2].item() == 100.0
    assert all(p.eq(2.0).all().item() for p in model.parameters())


# ---- lifetimes ---------------------------------------------------------------------------------------------
def _hold_then_drop(inbox, outbox):
    before = shared_bytes()
    t = inbox.get(timeout=TIMEOUT)
    outbox.put((t[-1].item(), shared_bytes() - before))
    assert inbox.get(timeout=TIMEOUT) == "drop"
    del t
    outbox.put(shared_bytes() - before)


def test_the_producer_may_drop_a_tensor_right_after_sending_it():
    ctx = mp.get_context("fork")
    inbox, outbox = mp.Queue(ctx=ctx), mp.Queue(ctx=ctx)
    shm_before = dev_shm()
    with Child(ctx, _hold_then_drop, inbox, outbox) as child:
        base = shared_bytes()
        big = trainrun.arange(float(1 << 21))  # 8 MiB: a segment of its own
        inbox.put(big)
        del big
        last, mapped = outbox.get(timeout=TIMEOUT)
        assert last == float((1 << 21) - 1) and mapped == 8 << 20
        wait_until(lambda: shared_bytes() == base, "the producer to unmap the sent segment")
        inbox.put("drop")
        assert outbox.get(timeout=TIMEOUT) == 0  # the consumer unmapped it: no process holds it now
    assert child.exitcode == 0
    assert dev_shm() == shm_before  # segments have no names: nothing is ever left in /dev/shm


def _hold_forever(inbox, outbox):
    held = []
    while True:
        held.append(inbox.get())
        outbox.put(len(held))


def test_a_consumer_killed_with_sigkill_leaves_nothing_and_the_others_go_on():
    ctx = mp.get_context("fork")
    inbox, outbox = mp.Queue(ctx=ctx), mp.Queue(ctx=ctx)
    shm_before = dev_shm()
    victim = ctx.Process(target=_hold_forever, args=(inbox, outbox), daemon=True)
    victim.start()
    tensors = [trainrun.full((1 << 20,), float(i)) for i in range(4)]  # 4 MiB each
    for t in tensors:
        inbox.put(t)
    assert [outbox.get(timeout=TIMEOUT) for _ in tensors] == [1, 2, 3, 4]
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(TIMEOUT)
    assert victim.exitcode == -signal.SIGKILL
    with Child(mp.get_context("spawn"), _hold_then_drop, inbox, outbox):  # a survivor takes over the queue
        inbox.put(tensors[3])
        assert outbox.get(timeout=TIMEOUT) == (3.0, 4 << 20)
        inbox.put("drop")
        assert outbox.get(timeout=TIMEOUT) == 0
    assert dev_shm() == shm_before


def _put_then_report(queue, ready, n):
    for i in range(n):
        queue.put(trainrun.full((1000,), float(i)))
    ready.put("sent")
    time.sleep(TIMEOUT)  # killed here


def test_messages_survive_their_producer_being_killed():
    ctx = mp.get_context("fork")
    queue, ready = mp.SimpleQueue(), mp.SimpleQueue()  # SimpleQueue.put returns once the kernel holds the message
    producer = ctx.Process(target=_put_then_report, args=(queue, ready, 50), daemon=True)
    producer.start()
    assert ready._get(timeout=TIMEOUT) == "sent"
    os.kill(producer.pid, signal.SIGKILL)
    producer.join(TIMEOUT)
    got = [queue._get(timeout=TIMEOUT) for _ in range(50)]
    assert [t[999].item() for t in got] == [float(i) for i in range(50)]
    assert queue.empty()


def _keep_all(queue, out, n):
    held = [queue.get(timeout=TIMEOUT) for _ in range(n)]
    out.put((len(held), sum(t[0].item() for t in held), len(os.listdir("/proc/self/fd"))))


def test_100k_tensors_through_a_queue_under_ulimit_1024():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
    try:
        n = 100_000
        ctx = mp.get_context("fork")
        queue, out = mp.Queue(ctx=ctx), mp.Queue(ctx=ctx)
        with Child(ctx, _keep_all, queue, out, n) as child:
            for i in range(n):
                queue.put(trainrun.full((4,), float(i)))
            count, total, open_fds = out.get(timeout=TIMEOUT * 2)
        assert child.exitcode == 0
        assert count == n and total == n * (n - 1) / 2
        assert open_fds < 64  # no descriptor is kept per tensor: 100k tensors live in one or two arenas
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_many_segments_in_one_message_and_large_payloads():
    # 300 tensors of 2 MiB are 300 segments: more than one message's descriptors (the rest go by DupFd);
    # a 1 MiB Python payload travels in a memory file of its own.
    queue = mp.SimpleQueue()
    tensors = [trainrun.full((1 << 19,), float(i)) for i in range(300)]
    queue.put((tensors, "x" * (1 << 20)))
    got, text = queue.get()
    assert [t[-1].item() for t in got] == [float(i) for i in range(300)] and len(text) == 1 << 20
    got[7].fill_(-1.0)
    assert tensors[7][0].item() == -1.0


# ---- queue behaviour -----------------------------------------------------------------------------------------
def test_queue_semantics_match_multiprocessing():
    import queue as std_queue
    q = mp.Queue(maxsize=2)
    q.put(1)
    q.put_nowait({"a": trainrun.ones(2)})
    assert q.full() and q.qsize() == 2
    with pytest.raises(std_queue.Full):
        q.put(3, timeout=0.05)
    assert q.get(timeout=TIMEOUT) == 1
    assert q.get(timeout=TIMEOUT)["a"].tolist() == [1.0, 1.0]
    with pytest.raises(std_queue.Empty):
        q.get(timeout=0.05)
    with pytest.raises(std_queue.Empty):
        q.get_nowait()
    with pytest.raises(NotImplementedError, match="unbounded"):
        mp.Queue().qsize()
    unpicklable = mp.Queue()
    with pytest.raises(Exception, match="pickle"):
        unpicklable.put(lambda: 0)  # fails at the call, not later in a thread


def test_refusals_name_what_is_wrong():
    x = trainrun.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor"):
        mp.SimpleQueue().put(x * 2)
    with pytest.raises(ValueError, match="unknown strategy 'bogus'"):
        mp.set_sharing_strategy("bogus")
    assert mp.get_all_sharing_strategies() == {"file_descriptor", "file_system"}
    mp.set_sharing_strategy("file_system")
    assert mp.get_sharing_strategy() == "file_system"
    mp.set_sharing_strategy("file_descriptor")
    shared = trainrun.zeros(4).share_memory_()
    with pytest.raises(RuntimeError, match="cannot be resized"):
        shared.untyped_storage().resize_(0)


# ---- spawn ---------------------------------------------------------------------------------------------------
def _fill_slot(i, results):
    results[i] = float(i + 1)


def _raise_in_one(i):
    if i == 1:
        raise ValueError(f"boom in {i}")
    time.sleep(TIMEOUT)  # stopped by spawn when process 1 fails


def _die_by_signal(i):
    os.kill(os.getpid(), signal.SIGKILL)


def test_spawn_runs_fn_with_its_index_and_reports_failures():
    results = trainrun.zeros(3).share_memory_()
    assert mp.spawn(_fill_slot, args=(results,), nprocs=3) is None
    assert results.tolist() == [1.0, 2.0, 3.0]

    started = time.monotonic()
    with pytest.raises(mp.ProcessRaisedException, match=r"(?s)Process 1 terminated.*ValueError: boom in 1") as info:
        mp.spawn(_raise_in_one, nprocs=2)
    assert info.value.error_index == 1 and time.monotonic() - started < TIMEOUT / 2  # the other was stopped

    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with signal SIGKILL") as info:
        mp.spawn(_die_by_signal, nprocs=1, start_method="fork")
    assert info.value.signal_name == "SIGKILL"

    context = mp.start_processes(_fill_slot, args=(results,), nprocs=1, join=False, start_method="fork")
    assert len(context.pids()) == 1
    while not context.join(timeout=TIMEOUT):
        pass
