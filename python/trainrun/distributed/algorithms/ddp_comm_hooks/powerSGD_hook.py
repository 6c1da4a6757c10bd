"""PowerSGD gradient compression for DDP (Vogels et al., 2019), as torch.distributed.algorithms.ddp_comm_hooks.
powerSGD_hook: each gradient matrix M (n x m) travels as two thin factors, P = M Q (n x r) and Q = M^T P (m x r),
so a bucket all-reduces (n + m) r numbers per matrix instead of n m.

    state = PowerSGDState(process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=10)
    ddp_model.register_comm_hook(state, powerSGD_hook)

Per bucket, once `start_powerSGD_iter` iterations have run plainly (DDP's averaging all-reduce):
  1. error feedback: the bucket gets back what the last compression lost (kept per bucket);
  2. vectors, and matrices too small to gain `min_compression_rate`, are all-reduced uncompressed;
  3. for the others, P = M Q is summed over the ranks and orthonormalized (Gram-Schmidt), Q = M^T P summed and
     divided by the world size, and M is replaced by P Q^T, the mean gradient projected onto P's columns;
  4. warm start: Q is kept for the next iteration (a power iteration over steps), so rank 1 tracks the dominant
     direction of the gradients as it moves.
The random first Q comes from a seeded NumPy generator, the same on every rank. batched_powerSGD_hook compresses the
whole bucket as one square matrix (fewer, larger all-reduces; a coarser approximation)."""
import collections
import logging
import math

import numpy as np

import trainrun
from trainrun import distributed as dist

logger = logging.getLogger(__name__)

__all__ = ["PowerSGDState", "powerSGD_hook", "batched_powerSGD_hook"]


class PowerSGDState:
    """The hook's settings and what it keeps between iterations (per bucket index: error feedback, P and Q)."""

    def __init__(self, process_group, matrix_approximation_rank=1, start_powerSGD_iter=1_000, min_compression_rate=2,
                 use_error_feedback=True, warm_start=True, orthogonalization_epsilon=0, random_seed=0,
                 compression_stats_logging_frequency=10_000, batch_tensors_with_same_shape=False):
        if (use_error_feedback or warm_start) and start_powerSGD_iter <= 1:
            raise ValueError("Expect `start_powerSGD_iter` > 1 if `use_error_feedback` or `warm_start` is enabled, "
                             "because PowerSGD can only be applied after the first two iterations in DDP.")
        if matrix_approximation_rank < 1:
            raise ValueError(f"matrix_approximation_rank must be at least 1, got {matrix_approximation_rank}")
        self.process_group = process_group
        self.matrix_approximation_rank = matrix_approximation_rank
        self.start_powerSGD_iter = start_powerSGD_iter
        self.min_compression_rate = min_compression_rate
        self.use_error_feedback = use_error_feedback
        self.warm_start = warm_start
        self.orthogonalization_epsilon = orthogonalization_epsilon
        self.rng = np.random.RandomState(random_seed)
        self.error_dict = {}
        self.p_memory_dict = {}
        self.q_memory_dict = {}
        self.iter = 0
        self.total_numel_before_compression = 0
        self.total_numel_after_compression = 0
        self.compression_stats_logging_frequency = max(1, compression_stats_logging_frequency)
        self.next_stats_report = 0
        self.batch_tensors_with_same_shape = batch_tensors_with_same_shape

    def __getstate__(self):
        """Picklable for checkpoints: everything but the process group."""
        return {k: v for k, v in self.__dict__.items() if k != "process_group"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.process_group = None

    def maybe_increase_iter(self, bucket):
        if bucket.is_last():  # (an iteration ends with its last bucket)
            self.iter += 1
            if self.iter == self.start_powerSGD_iter:
                logger.info("Start to apply PowerSGD after %s iterations.", self.iter)

    def compression_stats(self):
        """(compression rate, numbers before compression, numbers after), over all compressed iterations."""
        rate = self.total_numel_before_compression / self.total_numel_after_compression \
            if self.total_numel_after_compression > 0 else 0
        return rate, self.total_numel_before_compression, self.total_numel_after_compression


def _group_and_world(state):
    group = state.process_group
    return group, dist.get_world_size(group)


def _allreduce_mean(tensor, group, world_size):
    dist.all_reduce(tensor, group=group)
    return tensor.div_(world_size)


def _done(value):
    future = trainrun.futures.Future()
    future.set_result(value)
    return future


def _orthogonalize(matrices, epsilon=0):
    """Gram-Schmidt on the columns of each (n x r) matrix, in place."""
    for matrix in matrices:
        for i in range(matrix.shape[1]):
            column = matrix[:, i:i + 1]
            norm = trainrun.linalg.vector_norm(column)
            column.div_(norm + epsilon if epsilon else trainrun.where(norm == 0, trainrun.ones_like(norm), norm))
            if i + 1 < matrix.shape[1]:
                rest = matrix[:, i + 1:]
                rest.sub_((column * rest).sum(0, keepdim=True) * column)


def _should_compress(rows, cols, rank, min_compression_rate):
    uncompressed, compressed = rows * cols, (rows + cols) * rank
    return compressed * min_compression_rate < uncompressed, uncompressed, compressed


def _report_compression_stats(bucket, state):
    if bucket.is_last() and state.iter >= state.next_stats_report:
        rate, before, after = state.compression_stats()
        logger.info("Compression stats: iter %s, total before compression %s, total after compression %s, rate %s",
                    state.iter, before, after, rate)
        state.next_stats_report = state.iter + state.compression_stats_logging_frequency


def _random_like(state, rows, cols, dtype, device):
    """A Gaussian (rows x cols) matrix drawn from the state's generator: the same on every rank."""
    values = state.rng.standard_normal((rows, cols)).astype(np.float32)
    return trainrun.from_numpy(values).to(dtype=dtype, device=device)


def powerSGD_hook(state, bucket):
    """Compresses each gradient matrix of the bucket to rank `state.matrix_approximation_rank` (module
    docstring); returns a Future of the bucket's averaged, approximated gradients."""
    group, world_size = _group_and_world(state)
    buffer = bucket.buffer()
    if state.iter < state.start_powerSGD_iter:
        state.maybe_increase_iter(bucket)
        return _done(_allreduce_mean(buffer, group, world_size))
    index = bucket.index()
    with trainrun.no_grad():
        if state.use_error_feedback:
            if index in state.error_dict:
                buffer.add_(state.error_dict[index])
            else:
                state.error_dict[index] = trainrun.zeros_like(buffer)
            sent = buffer.clone()
        compressed, uncompressed = [], []
        for grad in bucket.gradients():
            matrix = grad.reshape(grad.shape[0], -1) if grad.dim() > 1 else grad.reshape(1, -1)
            rows, cols = matrix.shape
            rank = min(rows, cols, state.matrix_approximation_rank)
            worth, before, after = _should_compress(rows, cols, rank, state.min_compression_rate)
            state.total_numel_before_compression += before
            if worth and grad.dim() > 1:
                compressed.append((grad, matrix, rank))
                state.total_numel_after_compression += after
            else:
                uncompressed.append(grad)
                state.total_numel_after_compression += before
        _report_compression_stats(bucket, state)
        if uncompressed:
            flat = _allreduce_mean(trainrun.cat([g.reshape(-1) for g in uncompressed]), group, world_size)
            offset = 0
            for g in uncompressed:
                g.copy_(flat[offset:offset + g.numel()].view(g.shape))
                offset += g.numel()
        if compressed:
            _compress_matrices(state, index, compressed, group, world_size, buffer)
        if state.use_error_feedback:
            state.error_dict[index] = sent - buffer
        if not state.warm_start:
            state.p_memory_dict.pop(index, None)
            state.q_memory_dict.pop(index, None)
    state.maybe_increase_iter(bucket)
    return _done(buffer)


def _compress_matrices(state, index, compressed, group, world_size, buffer):
    """Steps 3 and 4 for the bucket's compressed matrices: one all-reduce of all their P factors, one of all
    their Q factors (each factor a slice of one flat tensor per bucket)."""
    if state.batch_tensors_with_same_shape:  # one (batch x n x m) product per shape instead of one per matrix
        by_shape = collections.defaultdict(list)
        for grad, matrix, rank in compressed:
            by_shape[tuple(matrix.shape)].append((grad, matrix, rank))
        groups = list(by_shape.values())
    else:
        groups = [[item] for item in compressed]
    p_total = sum(len(g) * g[0][1].shape[0] * g[0][2] for g in groups)
    q_total = sum(len(g) * g[0][1].shape[1] * g[0][2] for g in groups)
    fresh = not state.warm_start or index not in state.q_memory_dict or \
        state.q_memory_dict[index].numel() != q_total
    if fresh:
        state.p_memory_dict[index] = trainrun.empty(p_total, dtype=buffer.dtype, device=buffer.device)
        state.q_memory_dict[index] = trainrun.empty(q_total, dtype=buffer.dtype, device=buffer.device)
    p_memory, q_memory = state.p_memory_dict[index], state.q_memory_dict[index]
    batches, ps, qs, p_at, q_at = [], [], [], 0, 0
    for members in groups:
        (rows, cols), rank, count = members[0][1].shape, members[0][2], len(members)
        batches.append(trainrun.stack([m for _, m, _ in members]))
        ps.append(p_memory[p_at:p_at + count * rows * rank].view(count, rows, rank))
        qs.append(q_memory[q_at:q_at + count * cols * rank].view(count, cols, rank))
        p_at += count * rows * rank
        q_at += count * cols * rank
    if fresh:
        for q in qs:
            for k in range(q.shape[0]):
                q[k].copy_(_random_like(state, q.shape[1], q.shape[2], q.dtype, q.device))
                _orthogonalize([q[k]], state.orthogonalization_epsilon)
    for batch, p, q in zip(batches, ps, qs):
        p.copy_(trainrun.bmm(batch, q))  # P = M Q
    dist.all_reduce(p_memory, group=group)
    for p in ps:
        _orthogonalize(list(p), state.orthogonalization_epsilon)
    for batch, p, q in zip(batches, ps, qs):
        q.copy_(trainrun.bmm(batch.transpose(1, 2), p))  # Q = M^T P
    _allreduce_mean(q_memory, group, world_size)
    for members, p, q in zip(groups, ps, qs):
        approximation = trainrun.bmm(p, q.transpose(1, 2))  # the mean of M, projected onto P's columns
        for k, (grad, _, _) in enumerate(members):
            grad.copy_(approximation[k].view(grad.shape))


def batched_powerSGD_hook(state, bucket):
    """The whole bucket as one square matrix (zero-padded), compressed to rank `state.matrix_approximation_rank`:
    two all-reduces of 2 * side * rank numbers per bucket, whatever its tensors' shapes."""
    group, world_size = _group_and_world(state)
    buffer = bucket.buffer()
    if state.iter < state.start_powerSGD_iter:
        state.maybe_increase_iter(bucket)
        return _done(_allreduce_mean(buffer, group, world_size))
    index, total = bucket.index(), buffer.numel()
    side = math.ceil(math.sqrt(total))
    rank = min(side, state.matrix_approximation_rank)
    state.total_numel_before_compression += side * side
    state.total_numel_after_compression += side * rank * 2
    _report_compression_stats(bucket, state)
    with trainrun.no_grad():
        padded = trainrun.zeros(side * side, dtype=buffer.dtype, device=buffer.device)
        padded[:total].copy_(buffer)
        if state.use_error_feedback:
            if index in state.error_dict:
                padded.add_(state.error_dict[index])
            sent = padded.clone()
        matrix = padded.view(side, side)
        if not state.warm_start or index not in state.q_memory_dict:
            q = _random_like(state, side, rank, buffer.dtype, buffer.device)
            _orthogonalize([q], state.orthogonalization_epsilon)
            state.q_memory_dict[index] = q
        q = state.q_memory_dict[index]
        p = matrix @ q
        dist.all_reduce(p, group=group)
        _orthogonalize([p], state.orthogonalization_epsilon)
        q = _allreduce_mean(matrix.t() @ p, group, world_size)
        approximation = (p @ q.t()).reshape(-1)
        if state.use_error_feedback:
            state.error_dict[index] = sent - approximation
        if state.warm_start:
            state.q_memory_dict[index] = q
        else:
            state.q_memory_dict.pop(index)
        buffer.copy_(approximation[:total])
    state.maybe_increase_iter(bucket)
    return _done(buffer)
