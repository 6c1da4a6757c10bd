"""CUDA tensors shared between processes on one GPU (tensor/cuda/ipc.h over
the broker of test_ipc_broker.py): the consumer reads what the producer
wrote (after the producer's stream, through the interprocess event), writes
the producer sees, the producer's allocated bytes back at their baseline
once the consumer lets go (ipc_collect), a killed consumer's lease given
back, and the leak report naming a lease never released. Skipped with the
reason where no GPU is found."""
import contextlib
import os
import signal

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun  # noqa: E402
import trainrun.multiprocessing as mp  # noqa: E402
from trainrun import cuda  # noqa: E402
from trainrun.multiprocessing import _broker  # noqa: E402

pytestmark = pytest.mark.skipif(not cuda.is_available(), reason=f"needs a GPU: {cuda.unavailable_reason()}")
TIMEOUT = 60


def _consume(inbox, outbox):
    t = inbox.get(timeout=TIMEOUT)
    outbox.put((t.device.type, t.sum().item(), t[:3].cpu().tolist()))
    t.mul_(2)  # seen by the producer: the same memory
    cuda.synchronize()
    outbox.put("written")
    assert inbox.get(timeout=TIMEOUT) == "drop"
    del t
    import gc
    gc.collect()
    outbox.put("dropped")
    assert inbox.get(timeout=TIMEOUT) == "exit"


def _consume_then_die(inbox, outbox):
    t = inbox.get(timeout=TIMEOUT)
    outbox.put(float(t[0].item()))
    outbox.close()
    outbox.join_thread()  # put returns before its feeder thread writes: the message must be out before the kill
    os.kill(os.getpid(), signal.SIGKILL)


@contextlib.contextmanager
def _consumer(target):
    """(inbox, outbox, child): a spawned process running target(inbox, outbox), killed if a test leaves it."""
    _broker.host_for_children()
    ctx = mp.get_context("spawn")
    inbox, outbox = mp.Queue(ctx=ctx), mp.Queue(ctx=ctx)
    child = ctx.Process(target=target, args=(inbox, outbox), daemon=True)
    child.start()
    try:
        yield inbox, outbox, child
    finally:
        if child.is_alive():
            child.kill()


def _producer_allocated():
    cuda.ipc_collect()
    return cuda.memory_allocated()


def test_a_consumer_reads_and_writes_the_producers_memory_and_the_block_comes_back():
    with _consumer(_consume) as (inbox, outbox, child):
        baseline = _producer_allocated()
        t = trainrun.arange(1 << 20, dtype=trainrun.float32, device="cuda")
        t.add_(1)  # queued on the producer's stream: the consumer's read must come after it
        inbox.put(t)
        kind, total, head = outbox.get(timeout=TIMEOUT)
        assert kind == "cuda" and head == [1.0, 2.0, 3.0] and total == float((1 << 20) * ((1 << 20) + 1) // 2)
        assert outbox.get(timeout=TIMEOUT) == "written"
        assert t[:3].cpu().tolist() == [2.0, 4.0, 6.0], "the consumer's write did not reach the producer's tensor"
        del t  # the producer lets go first: the block stays leased to the consumer
        assert _producer_allocated() > baseline, "a block still leased to the consumer went back to the pool"
        inbox.put("drop")
        assert outbox.get(timeout=TIMEOUT) == "dropped"
        assert _producer_allocated() == baseline
        assert cuda.ipc_collect()["leases_held"] == 0
        inbox.put("exit")
        child.join(TIMEOUT)
        assert child.exitcode == 0


def test_a_consumer_killed_with_sigkill_gives_the_block_back():
    with _consumer(_consume_then_die) as (inbox, outbox, child):
        baseline = _producer_allocated()
        t = trainrun.full([4 << 20], 7.0, device="cuda")
        inbox.put(t)
        del t
        assert outbox.get(timeout=TIMEOUT) == 7.0
        child.join(TIMEOUT)
        assert child.exitcode == -signal.SIGKILL
        assert _producer_allocated() == baseline
        report = _broker.hosted_broker().leak_report()
        assert f"pid {child.pid} exited still using 16.00 MiB of cuda:0" in report, report


def test_the_leak_report_lists_a_lease_never_released():
    _broker.host_for_children()
    t = trainrun.ones(1024, device="cuda")
    from trainrun.multiprocessing import _reductions
    _reductions.reduce_tensor(t)  # a handle made for a message that is never sent
    report = _broker.hosted_broker().leak_report()
    assert "4.00 KiB of cuda:0" in report and "sent but never opened" in report, report
    assert cuda.ipc_collect()["leases_held"] >= 1
