"""Timer, as torch.utils.benchmark.Timer: times a Python statement with PyTorch's methods (timeit, and
blocked_autorange / adaptive_autorange, which pick a block size that makes the timer's own cost negligible and
repeat blocks until enough time or a small enough spread is reached). The statement runs with `torch` bound
to trainrun in its globals (as PyTorch binds torch), on `num_threads` threads, and CUDA work is synchronized
before each reading when a GPU is there."""
import enum
import textwrap
import timeit

from trainrun.utils.benchmark.utils import common

__all__ = ["Language", "Timer", "timer"]


class Language(enum.Enum):
    PYTHON = 0
    CPP = 1


def timer():
    """timeit's clock, after the GPU's work is done (when there is a GPU)."""
    import trainrun
    if trainrun.cuda.is_available():
        trainrun.cuda.synchronize()
    return timeit.default_timer()


class Timer:
    def __init__(self, stmt="pass", setup="pass", global_setup="", timer=timer, globals=None,  # noqa: A002
                 label=None, sub_label=None, description=None, env=None, num_threads=1,
                 language=Language.PYTHON):
        if not isinstance(stmt, str):
            raise ValueError("Currently only a `str` stmt is supported.")
        if language in (Language.CPP, "cpp", "c++"):
            raise NotImplementedError("Timer(language='c++'): trainrun times Python statements (C++ statements "
                                      "are timed with the benchmarks in bench/, built by Bazel)")
        if global_setup:
            raise ValueError("global_setup is C++ only (a Python statement's setup goes in `setup`)")
        import trainrun
        self._globals = dict(globals or {})
        self._globals.setdefault("torch", trainrun)
        stmt = textwrap.dedent(stmt).strip() or "pass"
        setup = textwrap.dedent(setup).strip() or "pass"
        self._timer = timeit.Timer(stmt=stmt, setup=setup, timer=timer, globals=self._globals)
        self._task_spec = common.TaskSpec(stmt=stmt, setup=setup, global_setup=global_setup, label=label,
                                          sub_label=sub_label, description=description, env=env,
                                          num_threads=num_threads)

    def _timeit(self, number):
        return max(self._timer.timeit(number), 1e-9)  # (never zero: statistics divide by it)

    def timeit(self, number=1000000):
        """The statement run `number` times after a short warm-up: one measurement."""
        with common.set_torch_threads(self._task_spec.num_threads):
            self._timeit(number=max(int(number // 100), 2))
            return common.Measurement(number_per_run=number, raw_times=[self._timeit(number=number)],
                                      task_spec=self._task_spec)

    def repeat(self, repeat=-1, number=-1):
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback=None):
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def _measurement_loop(self, number, stop, min_run_time, max_run_time=None, callback=None):
        total, times = 0.0, []
        with common.set_torch_threads(self._task_spec.num_threads):
            while total < min_run_time or not stop(times):
                spent = self._timeit(number)
                times.append(spent)
                total += spent
                if callback:
                    callback(number, spent)
                if max_run_time and total > max_run_time:
                    break
        return times

    def _estimate_block_size(self, min_run_time):
        """Runs per block: grown by 10x until the timer's own cost is under 0.01% of a block (or a block takes
        longer than min_run_time)."""
        import statistics
        with common.set_torch_threads(self._task_spec.num_threads):
            overhead = statistics.median(self._timeit(0) for _ in range(5))
            number = 1
            while True:
                taken = self._timeit(number)
                if (overhead / taken <= 1e-4 and taken >= min_run_time / 1000) or taken > min_run_time:
                    break
                if number * 10 > 2147483647:
                    break
                number *= 10
        return number

    def blocked_autorange(self, callback=None, min_run_time=0.2):
        """Blocks of runs until min_run_time has been spent: one Measurement of many replicates."""
        number = self._estimate_block_size(min_run_time)
        times = self._measurement_loop(number, lambda t: bool(t), min_run_time, callback=callback)
        return common.Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)

    def adaptive_autorange(self, threshold=0.1, *, min_run_time=0.01, max_run_time=10.0, callback=None):
        """As blocked_autorange, going on until IQR / median is under `threshold` (or max_run_time is spent)."""
        number = self._estimate_block_size(min_run_time=0.05)

        def stop(times):
            return len(times) > 3 and common.Measurement(number, times, self._task_spec).meets_confidence(
                threshold=threshold)
        times = self._measurement_loop(number, stop, min_run_time, max_run_time, callback=callback)
        return common.Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)

    def collect_callgrind(self, *args, **kwargs):
        raise NotImplementedError("collect_callgrind needs valgrind's instruction counts, which trainrun does not "
                                  "collect; time with blocked_autorange")
