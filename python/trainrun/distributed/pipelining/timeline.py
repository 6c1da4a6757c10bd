"""A pipeline's timeline: what each rank (or stage) computed when, from the
simulator or recorded by the executor during a step
(schedule.record_timeline = True; Timeline.gather joins every rank's), with
the same measures for both: makespan, bubble ratio (idle time over total
time), the peak of microbatches each row holds; and renderings: text,
Chrome trace, SVG and PNG pictures."""
import json

from trainrun.distributed.pipelining.schedules import F, I

_COLOURS = {"F": "#4c78a8", "B": "#f58518", "I": "#e45756", "W": "#54a24b"}


def _escape(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class Timeline:
    def __init__(self, events, num_stages, n_microbatches, row_name="stage"):
        self.events = events  # row (a stage, or a rank) -> [(start, end, action)] of its computations
        self.row_name = row_name
        self.num_stages, self.n_microbatches = num_stages, n_microbatches
        self.makespan = max((end for evs in events.values() for _, end, _ in evs), default=0.0)
        busy = sum(end - start for evs in events.values() for start, end, _ in evs)
        total = self.makespan * num_stages
        self.bubble_ratio = 1.0 - busy / total if total else 0.0
        self.peak_live = {}
        for stage, evs in events.items():
            live = peak = 0
            for _, _, a in evs:
                if a.computation_type == I:  # a microbatch's activations stay until its weight pass
                    continue
                live += 1 if a.computation_type == F else -1
                peak = max(peak, live)
            self.peak_live[stage] = peak

    def render(self, width=None):
        """One text row per stage; each time unit shows F or B and the microbatch (idle: '.')."""
        unit = min((end - start for evs in self.events.values() for start, end, _ in evs), default=1.0)
        columns = int(round(self.makespan / unit)) if width is None else width
        scale = columns / self.makespan if self.makespan else 1.0
        rows = []
        for stage in sorted(self.events):
            cells = ["."] * columns
            for start, end, a in self.events[stage]:
                first, last = int(round(start * scale)), int(round(end * scale))
                label = f"{a.computation_type}{a.microbatch_index}"
                for c in range(first, min(last, columns)):
                    cells[c] = label[(c - first) % len(label)] if last - first >= len(label) else label[0]
            rows.append(f"stage {stage}: {''.join(cells)}")
        rows.append(f"makespan {self.makespan:g}, bubble {self.bubble_ratio:.1%}, peak live microbatches "
                    f"{[self.peak_live[s] for s in sorted(self.peak_live)]}")
        return "\n".join(rows)

    def to_svg(self, title=None):
        """The timeline as an SVG picture: one row per rank (or stage), one box per computation, coloured by
        kind (F blue, B orange, I red, W green) and labelled with its microbatch; idle time left blank."""
        width, row, left, top = 960, 28, 70, 34
        scale = (width - left - 10) / self.makespan if self.makespan else 1.0
        rows = sorted(self.events)
        height = top + row * len(rows) + 24
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
               'font-size="11">', f'<rect width="{width}" height="{height}" fill="white"/>',
               f'<text x="{left}" y="18" font-size="13">{_escape(title or "pipeline timeline")}: makespan '
               f'{self.makespan:.3g}, bubble {self.bubble_ratio:.1%}</text>']
        for k, r in enumerate(rows):
            y = top + k * row
            out.append(f'<text x="4" y="{y + row / 2 + 4}">{_escape(self.row_name)} {r}</text>')
            out.append(f'<rect x="{left}" y="{y + 2}" width="{width - left - 10}" height="{row - 4}" fill="#f4f4f4"/>')
            for start, end, a in self.events[r]:
                x, w = left + start * scale, max((end - start) * scale, 0.5)
                colour = _COLOURS.get(a.computation_type, "#999999")
                out.append(f'<rect x="{x:.2f}" y="{y + 2}" width="{w:.2f}" height="{row - 4}" fill="{colour}" '
                           f'stroke="white" stroke-width="0.5"><title>{a!r}</title></rect>')
                if w > 14:
                    out.append(f'<text x="{x + w / 2:.2f}" y="{y + row / 2 + 4}" text-anchor="middle" '
                               f'fill="white">{a.computation_type}{a.microbatch_index}</text>')
        out.append(f'<text x="{left}" y="{height - 6}">F forward, B backward, I input gradient, W weight gradient; '
                   "blank: idle</text>")
        out.append("</svg>")
        return "\n".join(out) + "\n"

    def save(self, path, title=None):
        """Writes the picture: SVG for a .svg path, PNG (python3-matplotlib) for a .png one."""
        path = str(path)
        if path.endswith(".svg"):
            with open(path, "w") as f:
                f.write(self.to_svg(title))
            return
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        rows = sorted(self.events)
        fig, ax = plt.subplots(figsize=(12, 0.5 * len(rows) + 1))
        for k, r in enumerate(rows):
            for start, end, a in self.events[r]:
                ax.barh(k, end - start, left=start, color=_COLOURS.get(a.computation_type, "#999999"),
                        edgecolor="white", linewidth=0.5)
        ax.set_yticks(range(len(rows)), [f"{self.row_name} {r}" for r in rows])
        ax.invert_yaxis()
        ax.set_xlabel("time")
        ax.set_title(f"{title or 'pipeline timeline'}: bubble {self.bubble_ratio:.1%}")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)

    def dump_chrometrace(self, path):
        """The timeline as Chrome trace events (one thread per stage), microseconds = time units."""
        trace = [{"name": f"{a.computation_type}{a.microbatch_index}", "ph": "X", "pid": 0, "tid": stage,
                  "ts": start, "dur": end - start, "cat": "forward" if a.computation_type == F else "backward"}
                 for stage, evs in self.events.items() for start, end, a in evs]
        with open(path, "w") as f:
            json.dump({"traceEvents": trace}, f)


    @staticmethod
    def gather(local, group=None):
        """Every rank's recorded timeline (local: this rank's, from schedule.timeline) joined into one, on
        every rank, with the ranks' clocks aligned at the step's start (a collective)."""
        from trainrun import distributed as dist
        rows = [None] * dist.get_world_size(group)
        dist.all_gather_object(rows, {r: [(s, e, repr(a)) for s, e, a in evs] for r, evs in local.events.items()},
                               group=group)
        from trainrun.distributed.pipelining.schedules import _Action
        events = {r: [(s, e, _Action.from_str(a)) for s, e, a in evs] for part in rows for r, evs in part.items()}
        return Timeline(events, len(events), local.n_microbatches, row_name=local.row_name)
