"""trainrun.utils.benchmark: Timer (timeit, blocked_autorange, adaptive_autorange; `torch` bound in the
statement's globals), Measurement (median, IQR, significant figures, warnings, repr) and Compare (tables per
label, rows by threads and sub_label, columns by description, trimming, colours, variance flags). The tables and
reprs of a fixed set of measurements are compared character for character with PyTorch 1.13's."""
import random

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
from trainrun.utils import benchmark  # noqa: E402


def measurements(Measurement, TaskSpec):
    rng = random.Random(0)
    out = []
    for label in ("add", "matmul"):
        for threads in (1, 4):
            for sub in ("small", "large"):
                for desc in ("torch", "mine"):
                    base = {"small": 3e-6, "large": 4.2e-4}[sub] * (1 if desc == "torch" else 1.3) / threads
                    times = [base * (1 + 0.05 * rng.random()) * 100 for _ in range(12)]
                    if sub == "small" and desc == "mine" and threads == 4:
                        times[:6] = [t * 2 for t in times[:6]]  # (a wide spread: a warning)
                    out.append(Measurement(100, times, TaskSpec("x + y", "pass", label=label, sub_label=sub,
                                                                description=desc, num_threads=threads)))
    return out


def rendered(module_compare, module_common):
    ms = measurements(module_common.Measurement, module_common.TaskSpec)
    compare = module_compare.Compare(ms)
    texts = [str(compare)]
    compare.trim_significant_figures()
    compare.highlight_warnings()
    texts.append(str(compare))
    compare.colorize(rowwise=True)
    texts.append(str(compare))
    compare.colorize()
    texts.append(str(compare))
    reprs = ["\n".join(repr(m).splitlines()[1:]) for m in ms[:8]]
    stats = [(m.median, m.mean, m.iqr, m.significant_figures, m.has_warnings) for m in ms]
    return texts, reprs, stats


def test_tables_and_reprs_match_pytorch():
    pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: no oracle")
    from torch.utils.benchmark.utils import common as ref_common, compare as ref_compare
    from trainrun.utils.benchmark.utils import common, compare
    ours, theirs = rendered(compare, common), rendered(ref_compare, ref_common)
    for a, b in zip(ours[0], theirs[0]):
        assert a == b, f"\n{a}\n---\n{b}"
    assert ours[1] == theirs[1]
    for a, b in zip(ours[2], theirs[2]):
        assert a[3:] == b[3:] and all(abs(x - y) <= 1e-15 for x, y in zip(a[:3], b[:3]))
    assert any(s[4] for s in ours[2])  # (the spread case warns)


def test_timer_measures_a_statement():
    x = torch.randn(64, 64)
    timer = benchmark.Timer(stmt="torch.mm(x, x)", globals={"x": x}, label="mm", sub_label="64",
                            description="trainrun")
    m = timer.blocked_autorange(min_run_time=0.05)
    assert m.number_per_run >= 1 and len(m.times) >= 1 and 0 < m.median < 0.05
    assert m.label == "mm" and m.num_threads == 1 and m.title == "mm: 64"
    assert "Median" in repr(m) or "measurement" in repr(m)
    one = benchmark.Timer("y = x + 1", setup="x = 2").timeit(1000)
    assert len(one.raw_times) == 1 and one.number_per_run == 1000 and one.median > 0
    calls = []
    adaptive = benchmark.Timer("torch.ones(8).sum()").adaptive_autorange(
        threshold=0.5, max_run_time=0.5, callback=lambda n, t: calls.append(n))
    assert len(adaptive.times) == len(calls) >= 1
    merged = benchmark.Measurement.merge([m, m])
    assert len(merged) == 1 and len(merged[0].times) == 2 * len(m.times) and merged[0].number_per_run == 1


def test_timer_errors():
    with pytest.raises(ValueError, match="only a `str` stmt"):
        benchmark.Timer(lambda: None)
    with pytest.raises(NotImplementedError, match="Python statements"):
        benchmark.Timer("x", language=benchmark.Language.CPP)
    with pytest.raises(NotImplementedError, match="blocked_autorange"):
        benchmark.Timer("pass").repeat()
    with pytest.raises(ValueError, match="Expected an instance of `Measurement`"):
        benchmark.Compare([1.0])
