"""Every tensor that trainrun.distributed makes names its device. A factory call without device= makes a CPU
tensor, which is right on Gloo and wrong on NCCL: the first GPU run found FSDP's reduce-scatter buffer, the
object collectives' bytes and DCP's writes made on the CPU, so fully_shard failed at the first backward on a GPU.
The GPU tests (test_cuda_flows.py) catch such a buffer only on a GPU machine; this check reads the source and
runs everywhere. A call that is right on the CPU whatever the devices says why below."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "trainrun" / "distributed"
FACTORIES = {"empty", "zeros", "ones", "full", "tensor", "arange", "rand", "randn", "randint", "eye"}
MODULES = {"_C", "trainrun", "torch"}

# (file under trainrun/distributed, enclosing function): why a host tensor is right there.
HOST_SIDE = {
    ("checkpoint/format_utils.py", "load_whole"): "a whole checkpoint read into host tensors (for torch.save, "
                                                  "as PyTorch's dcp_to_torch_save)",
    ("checkpoint/_pytorch_dcp.py", "read_all"): "a PyTorch DCP folder's tensors read whole on the host",
    ("tensor/experimental/_attention.py", "scaled_dot_product_attention"): "a mask built here, moved to the "
                                                                          "query's device before use",
}


def _factory_calls_without_device(path):
    """(line, function, call) for each factory call in the file that passes no device=."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []

    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, child.name)
                continue
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                    and child.func.attr in FACTORIES and isinstance(child.func.value, ast.Name)
                    and child.func.value.id in MODULES
                    and not any(k.arg == "device" or k.arg is None for k in child.keywords)):
                found.append((child.lineno, function, ast.unparse(child)[:100]))
            visit(child, function)

    visit(tree, "<module>")
    return found


def test_every_tensor_made_in_trainrun_distributed_names_its_device():
    offenders, used = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for line, function, call in _factory_calls_without_device(path):
            if (rel, function) in HOST_SIDE:
                used.add((rel, function))
                continue
            offenders.append(f"{rel}:{line} in {function}: {call}")
    assert not offenders, "factory calls without device= (a CPU tensor, wrong on NCCL):\n" + "\n".join(offenders)
    assert used == set(HOST_SIDE), f"allowances that no longer match a call: {set(HOST_SIDE) - used}"


def test_the_check_finds_a_buffer_made_without_a_device(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("from trainrun import _C\n\ndef reduce(g):\n    out = _C.empty([4], dtype=g.dtype)\n"
                      "    ok = _C.zeros([1], device=g.device)\n    return out, ok\n")
    assert [(line, fn) for line, fn, _ in _factory_calls_without_device(source)] == [(4, "reduce")]
