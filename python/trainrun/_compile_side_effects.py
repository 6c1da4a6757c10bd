"""Python side effects a replay would skip, caught while a call records: a replay runs the recorded ops and no
Python, so a call whose Python does more than compute tensors must run eagerly each time (a graph break, as
torch.compile breaks on what it cannot replay), with the same effects as without compile:

- print() (torch.compile breaks there too, and prints at each call);
- a mutation of a list, dict, set or deque the code reaches from outside the call (a global, a closure variable,
  a module attribute: `self.attn_maps.append(a)`, `seen.add(k)`), seen as a call of the container's own method.
  An item assignment (`cache[k] = v`) is not a method call and is not seen, and nothing is seen while another
  profiler (cProfile) holds sys.setprofile."""
import builtins
import collections
import contextlib
import sys
import types

from trainrun import _C

_MUTATORS = {
    list: {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"},
    dict: {"update", "pop", "popitem", "setdefault", "clear"},
    set: {"add", "discard", "remove", "pop", "clear", "update", "difference_update", "intersection_update",
          "symmetric_difference_update"},
    collections.deque: {"append", "appendleft", "extend", "extendleft", "pop", "popleft", "remove", "clear",
                        "rotate", "insert"},
}


def _code_names(code):
    names = set(code.co_names)
    for const in code.co_consts:  # (nested functions and comprehensions)
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _reachable_containers(fn, module):
    """id -> (container, where) for the containers fn's globals and closure variables hold, and those in the
    attributes of module and its submodules."""
    found = {}

    def note(value, where):
        if type(value) in _MUTATORS:
            found[id(value)] = (value, where)

    functions = [fn]
    while functions:
        f = functions.pop()
        f = getattr(f, "func", f)  # (functools.partial)
        owner = getattr(f, "__self__", None)
        if owner is not None and hasattr(owner, "__dict__"):
            for k, v in vars(owner).items():
                note(v, f"attribute {k}")
        f = getattr(f, "__func__", f)
        code, namespace = getattr(f, "__code__", None), getattr(f, "__globals__", None)
        if code is None:
            continue
        if namespace is not None:
            for name in _code_names(code):
                if name in namespace:
                    note(namespace[name], f"global {name}")
        for name, cell in zip(code.co_freevars, getattr(f, "__closure__", None) or ()):
            try:
                note(cell.cell_contents, f"closure variable {name}")
            except ValueError:  # (an empty cell)
                pass
    if module is not None:
        for path, m in module.named_modules():
            for k, v in vars(m).items():
                note(v, f"attribute {path + '.' if path else ''}{k}")
    return found


@contextlib.contextmanager
def python_side_effects_break(fn, module):
    """While a call of fn (module's, when a module is compiled) records: print() and mutations of the containers
    it reaches note a graph break (the call then runs eagerly for its guards)."""
    watched = _reachable_containers(fn, module)
    original_print, previous_profile = builtins.print, sys.getprofile()

    def recording_print(*args, **kwargs):
        if _C._capture_active():
            _C._note_graph_break("print() was called (a replay runs no Python, so it would not print)")
        return original_print(*args, **kwargs)

    def watch(frame, event, arg):
        if event == "c_call" and watched:
            owner = getattr(arg, "__self__", None)
            entry = watched.get(id(owner))
            if entry is not None and entry[0] is owner and arg.__name__ in _MUTATORS[type(owner)] and \
                    _C._capture_active():
                _C._note_graph_break(f"{type(owner).__name__}.{arg.__name__}() changed {entry[1]} (a replay runs "
                                     "no Python, so it would not)")

    builtins.print = recording_print
    if previous_profile is None:  # (a profiler already running, cProfile's, is left alone: no mutations seen then)
        sys.setprofile(watch)
    try:
        yield
    finally:
        if previous_profile is None:
            sys.setprofile(None)
        builtins.print = original_print
