"""FlopCounterMode, as torch.utils.flop_counter: the floating-point operations of the matrix products and
convolutions a block of code runs, in total and per module, forward and backward.

    with FlopCounterMode(display=False) as counter:
        model(x).sum().backward()
    counter.get_total_flops()                   # e.g. for MFU: flops per step / (step time x peak)
    counter.get_flop_counts()["Net.fc1"]        # {aten.addmm: ..., aten.mm: ...}

The formulas are PyTorch's (a product of (m x k) and (k x n) is 2mkn; a convolution 2 x output points x kernel
size x channels in x channels out; bias additions and elementwise ops are not counted), so a model counts the
same here as there. How: while the block runs, the operator profiler records every op with its arguments'
sizes and integer values, and a ModuleTracker logs when each module is entered and left; at the end each
recorded product or convolution is counted for "Global" and for every module it ran inside. What the
dispatcher runs is what is counted: attention counts its two batched products (PyTorch 2.6 counts nothing for
CPU attention), a 3-d or transposed convolution the 2-d convolutions it runs as, and an op another counted
op calls is not counted twice."""
import collections

from trainrun import _C
from trainrun.utils.module_tracker import ModuleTracker

__all__ = ["FlopCounterMode", "register_flop_formula"]


def get_shape(i):
    return list(i.shape) if _C._is_cpp_tensor(i) else i


# ---- PyTorch's formulas, on shapes ---------------------------------------------------------------------------
def mm_flop(a_shape, b_shape, *args, out_shape=None, **kwargs):
    m, k = a_shape
    k2, n = b_shape
    assert k == k2, (a_shape, b_shape)
    return m * n * 2 * k


def addmm_flop(self_shape, a_shape, b_shape, out_shape=None, **kwargs):
    return mm_flop(a_shape, b_shape)


def bmm_flop(a_shape, b_shape, out_shape=None, **kwargs):
    b, m, k = a_shape
    b2, k2, n = b_shape
    assert b == b2 and k == k2, (a_shape, b_shape)
    return b * m * n * 2 * k


def baddbmm_flop(self_shape, a_shape, b_shape, out_shape=None, **kwargs):
    return bmm_flop(a_shape, b_shape)


def conv_flop_count(x_shape, w_shape, out_shape, transposed=False):
    """2 x (each point of the output, or of the input if transposed) x kernel points x batch x c_out x c_in."""
    batch_size = x_shape[0]
    conv_shape = (x_shape if transposed else out_shape)[2:]
    c_out, c_in, *filter_size = w_shape
    return _prod(conv_shape) * _prod(filter_size) * batch_size * c_out * c_in * 2


def conv_backward_flop(grad_out_shape, x_shape, w_shape, output_mask, transposed=False):
    """The input's gradient as a transposed convolution of grad_out by the weight; the weight's as a convolution
    of the input by grad_out (with batch and channels swapped: PyTorch's formula, which does not divide a grouped
    convolution's by its groups)."""
    def t(shape):
        return [shape[1], shape[0], *shape[2:]]
    flops = 0
    if output_mask[0]:
        flops += conv_flop_count(grad_out_shape, w_shape, x_shape, not transposed)
    if output_mask[1]:
        w_grad_shape = w_shape
        if transposed:
            flops += conv_flop_count(t(grad_out_shape), t(x_shape), t(w_grad_shape), transposed=False)
        else:
            flops += conv_flop_count(t(x_shape), t(grad_out_shape), t(w_grad_shape), transposed=False)
    return flops


def sdpa_flop_count(query_shape, key_shape, value_shape):
    """Attention's two products: q @ k^T and the scores @ v (what its baddbmm calls are counted as here)."""
    b, h, s_q, d_q = query_shape
    _, _, s_k, _ = key_shape
    d_v = value_shape[-1]
    return bmm_flop((b * h, s_q, d_q), (b * h, d_q, s_k)) + bmm_flop((b * h, s_q, s_k), (b * h, s_k, d_v))


def _prod(values):
    out = 1
    for v in values:
        out *= v
    return out


def _conv_out_shape(x_shape, w_shape, stride, padding, dilation):
    spatial = [(size + 2 * p - d * (k - 1) - 1) // s + 1
               for size, k, s, p, d in zip(x_shape[2:], w_shape[2:], stride, padding, dilation)]
    return [x_shape[0], w_shape[0], *spatial]


class _OpName:
    """A count's key for an op trainrun's torch.ops has no packet for (aten.convolution): prints as PyTorch's."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name

    __str__ = __repr__

    def __eq__(self, other):
        return str(other) == self.name

    def __hash__(self):
        return hash(self.name)


def _op_key(name):
    from trainrun import ops
    namespace, _, op = name.partition(".")
    try:
        return getattr(getattr(ops, namespace), op)
    except AttributeError:
        return _OpName(name)


# ---- what a recorded event counts as --------------------------------------------------------------------------
def _mm_event(shapes, concrete):
    return "aten.mm", mm_flop(shapes[0], shapes[1])


def _addmm_event(shapes, concrete):
    return "aten.addmm", mm_flop(shapes[1], shapes[2])


def _bmm_event(shapes, concrete):
    return "aten.bmm", bmm_flop(shapes[0], shapes[1])


def _baddbmm_event(shapes, concrete):
    # (trainrun's bmm is a baddbmm with nothing to add: counted under PyTorch's name for it)
    return ("aten.bmm" if not shapes[0] else "aten.baddbmm"), bmm_flop(shapes[1], shapes[2])


def _conv2d_event(shapes, concrete):
    x_shape, w_shape = shapes[0], shapes[1]
    stride, padding, dilation = concrete[3] or [1, 1], concrete[4] or [0, 0], concrete[5] or [1, 1]
    return "aten.convolution", conv_flop_count(x_shape, w_shape, _conv_out_shape(x_shape, w_shape, stride, padding,
                                                                                  dilation))


def _conv2d_backward_event(shapes, concrete):
    mask = (bool(concrete[7][0]) if concrete[7] else True, bool(concrete[8][0]) if concrete[8] else True)
    return "aten.convolution_backward", conv_backward_flop(shapes[0], shapes[1], shapes[2], mask)


_EVENTS = {"aten::mm": _mm_event, "aten::addmm": _addmm_event, "aten::bmm": _bmm_event,
           "aten::baddbmm": _baddbmm_event, "aten::conv2d": _conv2d_event,
           "aten::conv2d_backward": _conv2d_backward_event}

# User formulas: op event name -> formula(*argument shapes or values, out_shape=None)
flop_registry = {}


def register_flop_formula(targets, get_raw=False):
    """Decorator registering formula(*shapes, out_shape=None, **kwargs) for ops (torch.ops packets, or
    "ns::name" strings; a custom op is counted this way). Arguments come as shapes for tensors and as their
    values for integer lists and integers (None otherwise); out_shape is None here (the recorder keeps inputs)."""
    def register_fun(formula):
        for target in (targets if isinstance(targets, (list, tuple)) else [targets]):
            flop_registry[_event_name(target)] = formula
        return formula
    return register_fun


def _event_name(target):
    text = str(target)
    return text if "::" in text else text.replace(".", "::", 1)


suffixes = ["", "K", "M", "B", "T"]


def get_suffix_str(number):
    index = max(0, min(len(suffixes) - 1, (len(str(number)) - 2) // 3))
    return suffixes[index]


def convert_num_with_suffix(number, suffix):
    index = suffixes.index(suffix)
    return f"{number / 1000 ** index:.3f}" + suffixes[index]


def convert_to_percent_str(num, denom):
    return "0%" if denom == 0 else f"{num / denom:.2%}"


class FlopCounterMode:
    def __init__(self, mods=None, depth=2, display=True, custom_mapping=None):
        if mods is not None:
            import warnings
            warnings.warn("mods argument is not needed anymore, you can stop passing it", stacklevel=2)
        self.flop_counts = collections.defaultdict(lambda: collections.defaultdict(int))
        self.depth, self.display = depth, display
        self.flop_registry = {**flop_registry, **{_event_name(k): v for k, v in (custom_mapping or {}).items()}}
        self.mod_tracker = None
        self._first_event = None

    def get_total_flops(self):
        return sum(self.flop_counts["Global"].values())

    def get_flop_counts(self):
        """{module name: {op: flops}}, "Global" holding everything."""
        return {k: dict(v) for k, v in self.flop_counts.items()}

    def __enter__(self):
        self.flop_counts.clear()
        _C._profiler_start(True)  # (with shapes; a profile already recording keeps its own events)
        self._first_event = _C._profiler_num_events()
        self.mod_tracker = ModuleTracker().__enter__()
        return self

    def __exit__(self, *exc):
        self.mod_tracker.__exit__()
        events = _C._profiler_events(self._first_event)
        _C._profiler_stop()
        self._count(events, self.mod_tracker.transitions)
        if self.display:
            print(self.get_table(self.depth))
        return False

    # ---- counting ----
    def _formula(self, name, shapes, concrete):
        custom = self.flop_registry.get(name)
        if custom is not None:
            args = [s if s else (c if c else None) for s, c in zip(shapes, concrete)]
            return name.replace("::", ".", 1), custom(*args, out_shape=None)
        builtin = _EVENTS.get(name)
        return builtin(shapes, concrete) if builtin is not None else None

    def _count(self, events, transitions):
        counted = []
        for name, start, end, thread, shapes, _memory, concrete in events:
            if name in self.flop_registry or name in _EVENTS:
                counted.append((start, end, thread, name, shapes, concrete))
        counted.sort(key=lambda e: (e[2], e[0], -e[1]))
        outer_end = {}  # thread -> end of the counted op being inside which means "already counted"
        flops_at = []
        for start, end, thread, name, shapes, concrete in counted:
            if start < outer_end.get(thread, -1):
                continue  # called by an op already counted
            outer_end[thread] = end
            result = self._formula(name, shapes, concrete)
            if result is not None and result[1]:
                flops_at.append((start, _op_key(result[0]), result[1]))
        flops_at.sort(key=lambda f: f[0])
        # Sweep: which modules are open at each op's start.
        marks = sorted(transitions, key=lambda t: t[0])
        open_modules = collections.Counter()
        i = 0
        for start, key, flops in flops_at:
            while i < len(marks) and marks[i][0] <= start:
                _, module, step = marks[i]
                open_modules[module] += step
                i += 1
            self.flop_counts["Global"][key] += flops
            for module, depth in open_modules.items():
                if depth > 0 and module != "Global":
                    self.flop_counts[module][key] += flops

    # ---- the table ----
    def get_table(self, depth=None):
        depth = self.depth if depth is None else depth
        depth = 999999 if depth is None else depth
        total = self.get_total_flops()
        suffix = get_suffix_str(total)
        subsumed = False

        def rows_of(module, indent):
            nonlocal subsumed
            module_total = sum(self.flop_counts[module].values())
            subsumed |= module_total >= total
            pad = " " * indent
            rows = [[pad + module, convert_num_with_suffix(module_total, suffix),
                     convert_to_percent_str(module_total, total)]]
            for op, flops in self.flop_counts[module].items():
                rows.append([pad + " - " + str(op), convert_num_with_suffix(flops, suffix),
                             convert_to_percent_str(flops, total)])
            return rows

        rows = []
        for module in sorted(self.flop_counts):
            if module == "Global" or module.count(".") + 1 > depth:
                continue
            rows += rows_of(module, module.count("."))
        if "Global" in self.flop_counts and not subsumed:
            for row in rows:
                row[0] = " " + row[0]
            rows = rows_of("Global", 0) + rows
        if not rows:
            rows = [["Global", "0", "0%"]]
        header = ["Module", "FLOP", "% Total"]
        widths = [max(len(str(r[c])) for r in rows + [header]) for c in range(3)]
        lines = [f"{header[0]:<{widths[0]}}  {header[1]:>{widths[1]}}  {header[2]:>{widths[2]}}",
                 "  ".join("-" * w for w in widths)]
        lines += [f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:>{widths[2]}}" for r in rows]
        return "\n".join(lines)
