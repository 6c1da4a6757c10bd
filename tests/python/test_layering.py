"""The layer table of layers.bzl is enforced: a dependency that points
upward (store/ on tensor/, tensor/ on autograd/, c10d/ on python/) fails
Bazel's analysis with "is not visible", and every edge the table allows is
accepted.

Each case is a throwaway package inside the layer it probes
(`<layer>/_layering_probe/BUILD`), removed afterwards; `bazel build --nobuild`
only loads and analyses, so the whole check takes a few seconds.
"""
import ast
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE = "_layering_probe"
# One target of each layer to depend on.
TARGET_OF = {
    "base": "//base",
    "tensor": "//tensor",
    "autograd": "//autograd",
    "nn": "//nn",
    "store": "//store",
    "c10d": "//c10d:core",
    "launcher": "//launcher:error_file",
    "compile": "//compile",
    "proto": "//proto:checkpoint_cc",
    "python": "//python:trainrun/_C.so",
}


def layer_table():
    text = open(os.path.join(ROOT, "layers.bzl")).read()
    match = re.search(r"^LAYERS = (\{.*?^\})", text, re.S | re.M)
    assert match, "layers.bzl has no LAYERS table"
    return ast.literal_eval(match.group(1))


def reachable(table, layer):
    seen, stack = set(), list(table[layer])
    while stack:
        below = stack.pop()
        if below not in seen:
            seen.add(below)
            stack.extend(table[below])
    return seen


def write_probes(table, allowed):
    """A probe per (layer, dependency) pair; returns {label: (layer, dep)}."""
    probes = {}
    for layer in table:
        rules = []
        for dep in table:
            if dep == layer or (dep in reachable(table, layer)) != allowed:
                continue
            name = "uses_" + dep
            rules.append('filegroup(name = "%s", srcs = ["%s"], tags = ["manual"])' % (name, TARGET_OF[dep]))
            probes["//%s/%s:%s" % (layer, PROBE, name)] = (layer, dep)
        os.makedirs(os.path.join(ROOT, layer, PROBE), exist_ok=True)
        with open(os.path.join(ROOT, layer, PROBE, "BUILD"), "w") as f:
            f.write("\n".join(rules) + "\n")
    return probes


def remove_probes(table):
    for layer in table:
        shutil.rmtree(os.path.join(ROOT, layer, PROBE), ignore_errors=True)


def analyse(labels):
    return subprocess.run(["bazel", "build", "--nobuild", "--keep_going"] + sorted(labels), cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture
def table():
    if shutil.which("bazel") is None:
        pytest.skip("bazel is not on PATH")
    table = layer_table()
    assert set(table) == set(TARGET_OF), "TARGET_OF must name one target per layer of layers.bzl"
    yield table
    remove_probes(table)


def test_every_upward_or_sideways_dependency_is_refused(table):
    probes = write_probes(table, allowed=False)
    assert ("store", "tensor") in probes.values() and ("tensor", "autograd") in probes.values()
    result = analyse(probes)
    assert result.returncode != 0, "bazel accepted dependencies the layer table forbids"
    refused = set(re.findall(r"is not visible from target '(//[^']+)'", result.stderr))
    assert refused == set(probes), "accepted although forbidden: %s\n%s" % (
        sorted(set(probes) - refused), result.stderr[-3000:])


def test_every_dependency_the_table_allows_is_accepted(table):
    probes = write_probes(table, allowed=True)
    assert ("c10d", "store") in probes.values() and ("python", "base") in probes.values()
    result = analyse(probes)
    assert result.returncode == 0, result.stderr[-3000:]
