"""ExportedProgram.graph: the recorded program (before fusion) as a trainrun.fx Graph, laid out as torch.export's:
placeholders for the parameters, buffers, tensor constants and user inputs, in that order and named p_/b_/c_ and
by argument; a call_function node per op, its target torch.ops.aten.<op>.default (a Python custom op: its own
torch.ops.<ns>.<name>.default); operator.getitem for each result of an op with several that is read; an output
node. Each value's node.meta["val"] is a meta-device tensor of its shape and dtype, node.meta["device"] where it
lives."""
import operator

import trainrun
from trainrun import _ops
from trainrun.fx import Graph


def _unbound(name):
    def call(*args, **kwargs):
        raise NotImplementedError(f"aten.{name}: a graph target trainrun has no Python function for; run the "
                                  "program (ExportedProgram.module()) instead")
    return call


# Ops a recorded program has that trainrun has no Python function of its own for, as calls of ones it has.
_COMPOSED = {"alias": lambda t: t.view(list(t.shape))}


def _target(kind, name):
    if kind == "fused":  # (not in the recorded program; a loaded archive's program is the fused one)
        return name
    if kind == "alloc":
        name = "empty_strided"
    if kind == "external" and "::" in name:
        ns, op = name.split("::", 1)
        if ns == "higher_order":  # (torch.cond's node: torch.ops.higher_order.cond, no overloads)
            return getattr(trainrun.ops.higher_order, op)
        try:
            return getattr(getattr(trainrun.ops, ns), op).default
        except AttributeError:
            return name
    try:
        return getattr(trainrun.ops.aten, name).default
    except AttributeError:
        return _ops.OpOverloadPacket("aten", name, _COMPOSED.get(name) or _unbound(name)).default


def _constant(c):
    if isinstance(c, tuple) and len(c) == 2 and c[0] == "dtype":
        return getattr(trainrun, c[1])
    if isinstance(c, tuple) and len(c) == 2 and c[0] == "device":
        return trainrun.device(c[1])
    return c


def _set_meta(node, meta):
    if meta is not None:
        sizes, dtype, device = meta
        node.meta["val"] = trainrun.empty(sizes, dtype=getattr(trainrun, dtype), device="meta")
        node.meta["device"] = trainrun.device(device)


def program_graph(table, constants, input_names, order=(), unread=()):
    """constants: per graph constant, in order, (name, kind) with kind 'p', 'b' or 'c'; order: names in the order
    their placeholders come (the signature's), the others after them in graph order; unread: (name, kind, tensor)
    of the weights the program does not read (placeholders no node uses, as torch.export has)."""
    graph = Graph()
    meta = table["meta"]
    made = {}  # value id -> the node whose result it is (the latest: an in-place op's result is its input)
    rank = {name: k for k, name in enumerate(order)}
    unread_ids = [(("unread", name), (name, kind)) for name, kind, _ in unread]
    placeholders = sorted(list(zip(table["constants"], constants)) + unread_ids,
                          key=lambda c: rank.get(c[1][0], len(rank)))
    unread_meta = {("unread", name): (list(t.shape), str(t.dtype).split(".")[-1], str(t.device))
                   for name, _, t in unread}
    for want in ("p", "b", "c"):
        for vid, (name, kind) in placeholders:
            if kind == want:
                made[vid] = graph.placeholder(f"{kind}_{name.replace('.', '_').lstrip('_')}")
                made[vid].meta["state_key"] = name  # (the weight it lifts: GraphModule reads it from the module)
                _set_meta(made[vid], meta.get(vid, unread_meta.get(vid)))
    for vid, name in zip(table["inputs"], input_names):
        made[vid] = graph.placeholder(name)
        _set_meta(made[vid], meta.get(vid))
    read = set(v for v in table["outputs"] if v >= 0)
    for _, _, args, _, _ in table["nodes"]:
        for tag, a in args:
            read.update([a] if tag == "v" else a if tag == "l" else [])  # ("c": a constant, "u": an unset tensor)

    def value(vid):
        if vid not in made:
            raise ValueError(f"ExportedProgram.graph: value %{vid} is read before any node makes it")
        return made[vid]

    def arg(slot):
        tag, a = slot
        if tag == "v":
            return value(a)
        if tag == "l":
            return [value(v) for v in a]
        return None if tag == "u" else _constant(a)

    for kind, name, args, results, extra in table["nodes"]:
        while args and args[-1][0] == "u":  # an unset `out` at the end: not an argument torch would show
            args = args[:-1]
        call_args, call_kwargs = tuple(arg(s) for s in args), {}
        if kind == "alloc":
            call_kwargs = {"dtype": getattr(trainrun, extra[0]), "device": trainrun.device(extra[1])}
        node = graph.create_node("call_function", _target(kind, name), call_args, call_kwargs,
                                 name="empty_strided" if kind == "alloc" else name.replace("::", "_"))
        if kind == "fused":
            node.meta["fused_ops"] = list(extra)
        flat = []
        for tag, r in results:
            flat.extend([r] if tag == "v" else r)
        if len(results) == 1 and results[0][0] == "v":
            made[flat[0]] = node
            _set_meta(node, meta.get(flat[0]))
            continue
        for i, vid in enumerate(flat):
            if vid in read:
                made[vid] = graph.create_node("call_function", operator.getitem, (node, i), name="getitem")
                _set_meta(made[vid], meta.get(vid))
    graph.output(tuple(value(v) if v >= 0 else None for v in table["outputs"]))
    return graph
