"""Compare, as torch.utils.benchmark.Compare: Measurements as tables, one per label; a row per (threads, env,
sub_label or stmt), a column per description, each cell a median in one unit for the table, with PyTorch's
layout (so tables printed here and by PyTorch line up), optional trimming to the significant figures, colours
and variance flags."""
import enum
import math

from trainrun.utils.benchmark.utils import common

__all__ = ["Colorize", "Compare"]

BEST = "\033[92m"
GOOD = "\033[34m"
BAD = "\033[2m\033[91m"
VERY_BAD = "\033[31m"
BOLD = "\033[1m"
TERMINATE = "\033[0m"


class Colorize(enum.Enum):
    NONE = "none"
    COLUMNWISE = "columnwise"
    ROWWISE = "rowwise"


def _colored(text, value, best):
    if value <= best * 1.01 or value <= best + 100e-9:
        return BEST + BOLD + text + TERMINATE * 2
    if value <= best * 1.1:
        return GOOD + BOLD + text + TERMINATE * 2
    if value >= best * 5:
        return VERY_BAD + BOLD + text + TERMINATE * 2
    if value >= best * 2:
        return BAD + text + TERMINATE * 2
    return text


class _Table:
    def __init__(self, results, colorize, trim, highlight):
        self.results, self.colorize, self.trim = results, colorize, trim
        self.highlight = highlight and any(r.has_warnings for r in results)
        self.label = results[0].label
        self.unit, self.scale = common.select_unit(min(r.median for r in results))
        rows = common.ordered_unique((r.num_threads, r.env, r.as_row_name) for r in results)
        self.rows = sorted(rows, key=lambda key: (key[0], key[1] or ""))  # (stable: statements keep their order)
        self.columns = common.ordered_unique(r.description for r in results)
        self.cells = {((r.num_threads, r.env, r.as_row_name), r.description): r for r in results}
        self.flagged = {c: self.highlight and any(r is not None and r.has_warnings for r in self._column_results(c))
                        for c in self.columns}  # (only a column with a flagged cell is widened for flags)
        self.templates = [self._template(c) for c in self.columns]

    def _column_results(self, column):
        return [self.cells.get((row, column)) for row in self.rows]

    def _template(self, column):
        found = [r for r in self._column_results(column) if r is not None]
        leading = [int(math.ceil(math.log10(r.median / self.scale))) for r in found]
        decimals = min(max(r.significant_figures - d, 0) for d, r in zip(leading, found)) if self.trim else 1
        length = max(leading) + decimals + (1 if decimals else 0)
        return f"{{:>{length}.{decimals}f}}{{:>{7 if self.flagged[column] else 0}}}"

    def _cell(self, result, template, flagged):
        if result is None:
            return " " * len(template.format(1.0, ""))
        value = result.median / self.scale
        if self.trim:
            value = common.trim_sigfig(value, result.significant_figures)
        flag = f" (! {result.iqr / result.median * 100:.0f}%)" if flagged and result.has_warnings else ""
        return template.format(value, flag)

    def render(self):
        envs = {r.env for r in self.results}
        render_env = len(envs) > 1
        env_width = max(len(e) for e in envs) if render_env else 0
        grid = [[""] + [c if c is not None else "" for c in self.columns]]
        previous_env, previous_threads = None, None
        separators = []
        for threads, env, name in self.rows:
            if threads != previous_threads:
                previous_env = None  # (a new thread group shows its env again)
            env_text = f"({env})" if render_env and env != previous_env else ""
            row = ["  " + env_text.ljust(env_width + 4) + name]
            row += [self._cell(self.cells.get(((threads, env, name), c)), t, self.flagged[c])
                    for c, t in zip(self.columns, self.templates)]
            grid.append(row)
            separators.append(threads if threads != previous_threads else None)
            previous_env, previous_threads = env, threads
        widths = [max(len(r[i]) for r in grid) for i in range(len(grid[0]))]
        header = "  |  ".join(text.center(w) for text, w in zip(grid[0], widths))
        total = len(header)
        lines = [header]
        for (threads, env, name), row, separator in zip(self.rows, grid[1:], separators):
            if separator is not None:
                lines.append(f"{separator} threads: ".ljust(total, "-"))
            results = [self.cells.get(((threads, env, name), c)) for c in self.columns]
            cells = [row[0].ljust(widths[0])]
            for text, width, result, column in zip(row[1:], widths[1:], results, self.columns):
                text = text.center(width)
                best = self._best(result, results, column, threads)
                if self.colorize != Colorize.NONE and result is not None and best is not None:
                    text = _colored(text, result.median, best)
                cells.append(text)
            lines.append("  |  ".join(cells))
        note = ("(! XX%) Measurement has high variance, where XX is the IQR / median * 100.\n"
                if self.highlight else "")
        title = f"[{(' ' + (self.label or '') + ' ').center(total - 2, '-')}]"
        return (f"{title}\n" + "\n".join(lines) +  # (PyTorch's layout: a blank line before the units)
                f"\n\nTimes are in {common.unit_to_english(self.unit)}s ({self.unit}).\n{note}")

    def _best(self, result, row_results, column, threads):
        if self.colorize == Colorize.ROWWISE:
            return min(r.median for r in row_results if r is not None)
        if self.colorize == Colorize.COLUMNWISE:  # (the best in this column among rows of the same thread count)
            same = [self.cells.get((row, column)) for row in self.rows if row[0] == threads]
            medians = [r.median for r in same if r is not None]
            return min(medians) if medians else None
        return None


class Compare:
    """Compare(measurements).print(): a table per label. trim_significant_figures(), colorize(rowwise=False) and
    highlight_warnings() change how it prints."""

    def __init__(self, results):
        self._results = []
        self.extend_results(results)
        self._trim_significant_figures = False
        self._colorize = Colorize.NONE
        self._highlight_warnings = False

    def __str__(self):
        return "\n".join(self._render())

    def extend_results(self, results):
        for r in results:
            if not isinstance(r, common.Measurement):
                raise ValueError(f"Expected an instance of `Measurement`, got {type(r)} instead.")
        self._results.extend(results)

    def trim_significant_figures(self):
        self._trim_significant_figures = True

    def colorize(self, rowwise=False):
        self._colorize = Colorize.ROWWISE if rowwise else Colorize.COLUMNWISE

    def highlight_warnings(self):
        self._highlight_warnings = True

    def print(self):
        print(str(self))

    def _render(self):
        results = common.Measurement.merge(self._results)
        grouped = {}
        for r in results:
            grouped.setdefault(r.label, []).append(r)
        return [_Table(group, self._colorize, self._trim_significant_figures, self._highlight_warnings).render()
                for group in grouped.values()]
