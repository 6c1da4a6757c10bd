"""The house plan's layer table, as Bazel visibility.

Each layer names the layers it may depend on. A package's targets are
visible only to the layers that reach it through this table (and to tests,
bench and examples), so a dependency that points upward (store/ on tensor/,
tensor/ on autograd/) fails the build with "is not visible".
"""

# layer -> the layers directly below it that it may use.
LAYERS = {
    "base": [],
    "tensor": ["base"],
    "autograd": ["tensor"],
    "nn": ["autograd"],
    "store": ["base"],
    "c10d": ["nn", "store"],
    "proto": [],
    "launcher": ["store", "proto"],
    "compile": ["autograd"],
    "python": ["c10d", "compile", "launcher", "proto"],
}

# What may use every layer: the suites, the benchmarks and the examples.
_ANYWHERE = ["tests", "bench", "examples"]

def _users(layer):
    """The layers that depend on `layer`, directly or not."""
    users = []
    frontier = [layer]

    # Starlark has no while loop: the table has fewer layers than this bound.
    for _ in range(len(LAYERS)):
        next_frontier = []
        for below in frontier:
            for name, deps in LAYERS.items():
                if below in deps and name not in users:
                    users.append(name)
                    next_frontier.append(name)
        frontier = next_frontier
    return users

def layer_visibility(layer):
    """Visibility for a package of `layer`: the layer itself and the layers above it."""
    if layer not in LAYERS:
        fail("layer_visibility: '%s' is not in the layer table of layers.bzl" % layer)
    return ["//%s:__subpackages__" % name for name in [layer] + _users(layer) + _ANYWHERE]
