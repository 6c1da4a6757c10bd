"""Generates code from the op list (tensor/ops.yaml):

    gen_ops.py ops.yaml OUT_DIR            op_schemas.h (one struct per op: name,
                                           schema, signature, typed call) and
                                           op_list.cc (the list as data)
    gen_ops.py --bindings ops.yaml OUT.cc  the Python bindings (trainrun._C.<name>,
                                           Tensor.<name>) of the ops not bound by hand

Run by Bazel (genrules in tensor/BUILD and python/BUILD); nothing it writes
is checked in."""
import dataclasses
import pathlib
import re
import sys

import yaml

TAGS = ("pointwise", "view", "device_generic", "nondifferentiable", "no_grad")
PYTHON_TARGETS = {"function", "method", "functional"}

# Schema argument type -> C++ parameter type.
ARG_TYPES = {
    "Tensor": "const Tensor&",
    "Tensor?": "const Tensor&",  # undefined = None
    "Tensor(a!)": "Tensor&",
    "Tensor[]": "const std::vector<Tensor>&",
    "int": "int64_t",
    "int?": "std::optional<int64_t>",
    "int[]": "const IntList&",
    "uint64": "uint64_t",
    "float": "double",
    "bool": "bool",
    "str": "const std::string&",
    "Scalar": "const Scalar&",
    "Scalar?": "const std::optional<Scalar>&",
    "ScalarType?": "std::optional<DType>",
    "AdamStep": "const AdamStep&",
}
RETURN_TYPES = {"Tensor": "Tensor", "Tensor(a!)": "Tensor&"}


class SchemaError(ValueError):
    pass


NO_DEFAULT = object()


@dataclasses.dataclass
class Argument:
    type: str
    name: str
    default: object = NO_DEFAULT  # the Python default, as written in the schema ("None", "1", "'none'")
    kw_only: bool = False         # after `*`: keyword-only in Python

    @property
    def cpp_type(self):
        return ARG_TYPES[self.type]


@dataclasses.dataclass
class OpSchema:
    name: str          # "max.dim"
    arguments: list
    returns: list      # [(type, name or None)]
    tags: list
    python: list
    python_name: str
    schema: str
    binding: str       # "generated": gen_ops.py --bindings binds it; "manual": python/ does
    number_self: bool = False  # the function also takes a number as `self` (PyTorch's pow(Scalar self, Tensor))

    @property
    def struct_name(self):
        return self.name.replace(".", "_")

    @property
    def cpp_return(self):
        if not self.returns:
            return "void"
        if len(self.returns) == 1:
            return RETURN_TYPES[self.returns[0][0]]
        return "std::tuple<{}>".format(", ".join(RETURN_TYPES[t] for t, _ in self.returns))

    @property
    def cpp_signature(self):
        return "{}({})".format(self.cpp_return, ", ".join(a.cpp_type for a in self.arguments))


_FUNC = re.compile(r"^(?P<name>[a-z_][a-z0-9_]*(\.[a-z_]+)?)\((?P<args>.*)\)\s*->\s*(?P<ret>.+)$")


def parse_func(func):
    m = _FUNC.match(func.strip())
    if not m:
        raise SchemaError(f"not a schema 'name(args) -> returns': {func!r}")
    arguments = []
    kw_only = False
    for part in filter(None, (p.strip() for p in m.group("args").split(","))):
        if part == "*":
            kw_only = True
            continue
        declaration, _, default = part.partition("=")
        pieces = declaration.split()
        if len(pieces) != 2:
            raise SchemaError(f"{m.group('name')}: argument {part!r} is not 'Type name[=default]'")
        if pieces[0] not in ARG_TYPES:
            raise SchemaError(f"{m.group('name')}: argument {pieces[1]!r} has unknown type {pieces[0]!r} "
                              f"(known: {', '.join(sorted(ARG_TYPES))})")
        arguments.append(Argument(pieces[0], pieces[1], default.strip() if default else NO_DEFAULT, kw_only))
    names = [a.name for a in arguments]
    if len(set(names)) != len(names):
        raise SchemaError(f"{m.group('name')}: an argument name repeats in {names}")
    ret = m.group("ret").strip()
    returns = []
    if ret != "()":
        inner = ret[1:-1] if ret.startswith("(") else ret
        for part in (p.strip() for p in inner.split(",")):
            pieces = part.split()
            if pieces[0] not in RETURN_TYPES:
                raise SchemaError(f"{m.group('name')}: unknown return type {pieces[0]!r}")
            returns.append((pieces[0], pieces[1] if len(pieces) > 1 else None))
    return m.group("name"), arguments, returns


def load(path):
    entries = yaml.safe_load(pathlib.Path(path).read_text())
    ops, seen = [], set()
    for entry in entries:
        unknown = set(entry) - {"func", "tags", "python", "python_name", "binding", "number_self"}
        if unknown:
            raise SchemaError(f"{entry.get('func')}: unknown keys {sorted(unknown)}")
        name, arguments, returns = parse_func(entry["func"])
        if name in seen:
            raise SchemaError(f"op {name} is listed twice")
        seen.add(name)
        tags = entry.get("tags", [])
        python = entry.get("python", [])
        if set(tags) - set(TAGS):
            raise SchemaError(f"{name}: unknown tags {sorted(set(tags) - set(TAGS))} (known: {', '.join(TAGS)})")
        if set(python) - PYTHON_TARGETS:
            raise SchemaError(f"{name}: unknown python targets {sorted(set(python) - PYTHON_TARGETS)}")
        binding = entry.get("binding", "generated")
        if binding not in ("generated", "manual"):
            raise SchemaError(f"{name}: binding is 'generated' or 'manual', not {binding!r}")
        ops.append(OpSchema(name, arguments, returns, tags, python,
                            entry.get("python_name", name.split(".")[0]), " ".join(entry["func"].split()),
                            binding, bool(entry.get("number_self", False))))
    return ops


def _c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def header(ops):
    out = ["#pragma once",
           "// Generated by tensor/codegen/gen_ops.py from tensor/ops.yaml: edit those, not this.",
           "// ops::<name>::call(keys, args...) calls the op through the dispatcher;",
           "// OpKernel<ops::<name>> registers a kernel (tensor/dispatcher.h).",
           "#include <cstdint>", "#include <optional>", "#include <string>", "#include <tuple>",
           "#include <typeindex>", "#include <vector>", "",
           '#include "tensor/dispatcher.h"', '#include "tensor/fused_optim.h"', '#include "tensor/tensor.h"', "",
           "namespace trainrun {", "namespace ops {", ""]
    for op in ops:
        params = ", ".join(f"{a.cpp_type} {a.name}" for a in op.arguments)
        forwarded = ", ".join(a.name for a in op.arguments)
        out += [
            f"// {op.schema}",
            f"struct {op.struct_name} {{",
            f"  static constexpr const char* name = {_c_string(op.name)};",
            f"  static constexpr const char* schema = {_c_string(op.schema)};",
            f"  using Sig = {op.cpp_signature};",
            "  static const Op<Sig>& handle() {",
            "    static const Op<Sig> op(name);",
            "    return op;",
            "  }",
            f"  static {op.cpp_return} call(DispatchKeySet keys{', ' if params else ''}{params}) {{",
            f"    return handle().call(keys{', ' if forwarded else ''}{forwarded});",
            "  }",
            "};",
            "",
        ]
    out += ["}  // namespace ops", "",
            "// One entry of the op list, as data.",
            "struct OpListEntry {",
            "  const char* name;         // \"max.dim\"",
            "  const char* schema;       // PyTorch's schema syntax",
            "  std::type_index signature;  // the C++ signature its kernels have",
            "  bool pointwise, view, device_generic, nondifferentiable, no_grad;  // tags",
            "  const char* python_name;  // the name Python binds it under",
            "  std::vector<std::string> python;  // \"function\", \"method\", \"functional\"",
            "  const char* binding;      // \"generated\" or \"manual\" (bound by hand in python/)",
            "};",
            "// Every op of the list, in its order.",
            "const std::vector<OpListEntry>& op_list();",
            "", "}  // namespace trainrun", ""]
    return "\n".join(out)


def source(ops):
    out = ["// Generated by tensor/codegen/gen_ops.py from tensor/ops.yaml: edit those, not this.",
           '#include "tensor/op_schemas.h"', "",
           "namespace trainrun {", "",
           "const std::vector<OpListEntry>& op_list() {",
           "  static const std::vector<OpListEntry> list = {"]
    for op in ops:
        flags = ", ".join("true" if t in op.tags else "false"
                          for t in TAGS)
        python = ", ".join(_c_string(p) for p in op.python)
        out.append(f"      {{{_c_string(op.name)}, ops::{op.struct_name}::schema, typeid(ops::{op.struct_name}::Sig), "
                   f"{flags}, {_c_string(op.python_name)}, {{{python}}}, {_c_string(op.binding)}}},")
    out += ["  };", "  return list;", "}", "", "}  // namespace trainrun", ""]
    return "\n".join(out)


# Schema argument type -> the converter of python/csrc/op_arguments.h that reads it from Python.
CONVERTERS = {"Scalar": "scalar_arg", "Scalar?": "optional_scalar_arg", "str": "string_arg", "int": "int_arg",
              "int?": "optional_int_arg", "int[]": "int_list_arg", "bool": "bool_arg", "float": "float_arg",
              "ScalarType?": "optional_dtype_arg", "Tensor?": "optional_tensor_arg", "Tensor[]": "tensor_list_arg"}


def _python_default(arg):
    d = arg.default
    if d == "None":
        return "py::none()"
    if d in ("True", "False"):
        return d.lower()
    if d.startswith("'"):
        return '"' + d[1:-1] + '"'
    return d


def bound_ops(ops):
    """The ops whose Python bindings are generated: bound somewhere in Python, not manual."""
    return [op for op in ops if op.binding == "generated" and op.python]


def _cpp_default(arg):
    """The C++ value of a parameter's default, typed as its converter's result."""
    d, t = arg.default, arg.type
    if d == "None":
        return {"Tensor?": "Tensor()", "Scalar?": "std::optional<Scalar>()", "int?": "std::optional<int64_t>()",
                "ScalarType?": "std::optional<DType>()", "int[]": "IntList{}"}[t]
    if t == "bool":
        return {"True": "true", "False": "false"}[d]
    if t == "str":
        return f"std::string({_python_default(arg)})"
    if t == "Scalar":
        return f"Scalar({d})"
    if t == "int":
        return f"int64_t{{{d}}}"
    if t == "float":
        return f"double{{{d}}}"
    raise SchemaError(f"no C++ default for {t} {arg.name}={d}")


def _binding(op, as_method):
    """One vectorcall function (python/csrc/fast_call.h) and its PyMethodDef: trainrun._C.<name>, or the method
    Tensor.<name> (no out=; self is the tensor it is called on)."""
    fn = op.python_name
    inputs = [a for a in op.arguments if a.name != "out"]
    out = next((a for a in op.arguments if a.name == "out"), None)
    if inputs[0].type != "Tensor" or inputs[0].name != "self":
        raise SchemaError(f"{op.name}: a generated binding needs `Tensor self` first (or binding: manual)")
    if len(op.returns) != 1 or op.returns[0][0] != "Tensor":
        raise SchemaError(f"{op.name}: a generated binding returns one Tensor (or binding: manual)")
    params = [a for a in inputs if not (as_method and a.name == "self")]
    with_out = out is not None and not as_method
    names = [("input" if a.name == "self" else a.name) for a in params] + (["out"] if with_out else [])
    positional = sum(1 for a in params if not a.kw_only)
    required = sum(1 << i for i, a in enumerate(params) if a.default is NO_DEFAULT)
    c_name = f"{op.struct_name}_{'method' if as_method else 'function'}"
    first = "PyObject* self_obj" if as_method else "PyObject* /*module*/"
    lines = [f"// {op.schema}",
             f"PyObject* {c_name}({first}, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {{",
             "  static const char* const names[] = {" + ", ".join(f'"{n}"' for n in names) + "};",
             f'  static const ArgSpec spec{{"{fn}", names, {len(names)}, {positional}, {required:#x}}};',
             f"  PyObject* a[{len(names)}];",
             "  if (!parse_args(spec, args, nargs, kwnames, a)) return nullptr;",
             "  try {"]
    if as_method:
        lines.append(f'    Tensor& self = tensor_arg(self_obj, "{fn}", "self", 0);')
    for i, a in enumerate(params):
        python_name = names[i]
        if a.type == "Tensor":
            # A pointwise op takes a number wherever it takes a tensor operand (a wrapped-number tensor); as
            # `self` only where PyTorch has that overload (number_self).
            number_ok = "pointwise" in op.tags and (a.name != "self" or op.number_self)
            converter, kind = ("operand_arg", "Tensor") if number_ok else ("tensor_arg", "Tensor&")
        elif a.type in CONVERTERS:
            converter, kind = CONVERTERS[a.type], "auto"
        else:
            raise SchemaError(f"{op.name}: argument {a.name} of type {a.type} has no Python converter")
        pos = 0 if a.kw_only else i + 1
        convert = f'{converter}(a[{i}], "{fn}", "{python_name}", {pos})'
        if a.default is not NO_DEFAULT:
            if kind == "Tensor&":
                raise SchemaError(f"{op.name}: a Tensor argument with a default needs the type Tensor?")
            convert = f"a[{i}] ? {convert} : {_cpp_default(a)}"
        lines.append(f"    {kind} {a.name} = {convert};")
    tensors = [a.name for a in inputs if a.type in ("Tensor", "Tensor?")]
    call_args = ", ".join(a.name for a in inputs)
    lines += ["    MaybeReleaseGil nogil;", "    release_if_large(nogil, self);"]
    if with_out:
        k = len(names) - 1
        lines += [f"    if (a[{k}] != nullptr && a[{k}] != Py_None) {{",
                  f'      Tensor& out = tensor_arg(a[{k}], "{fn}", "out", 0);',
                  f"      ops::{op.struct_name}::call(keys_of({', '.join(tensors + ['out'])}), {call_args}, out);",
                  "      out.impl()->bump_version();",
                  "      nogil.reset();",
                  f"      Py_INCREF(a[{k}]);",
                  f"      return a[{k}];",
                  "    }"]
    out_arg = ", Tensor()" if out is not None else ""
    lines += [f"    Tensor result = ops::{op.struct_name}::call(keys_of({', '.join(tensors)}), {call_args}{out_arg});",
              "    nogil.reset();",
              "    return py::cast(std::move(result)).release().ptr();",
              "  } catch (...) {",
              "    return raise_python_error();",
              "  }",
              "}", ""]
    doc = _c_string(_python_signature(fn, list(zip(names, params)), with_out, op.returns) + "\n\nop " + op.schema)
    method_def = f"{{\"{fn}\", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>({c_name})), " \
                 f"METH_FASTCALL | METH_KEYWORDS, {doc}}}"
    return lines, method_def


def _python_signature(fn, names, with_out, returns):
    """The docstring's first line, as PyTorch's start: add(input, other, *, alpha=1, out=None) -> Tensor."""
    parts, kw_started = [], False
    for python_name, a in names:
        if a.kw_only and not kw_started:
            parts.append("*")
            kw_started = True
        parts.append(python_name if a.default is NO_DEFAULT else f"{python_name}={a.default}")
    if with_out:
        if not kw_started:
            parts.append("*")
        parts.append("out=None")
    result = "Tensor" if len(returns) <= 1 else "(" + ", ".join(n or t for t, n in returns) + ")"
    return f"{fn}({', '.join(parts)}) -> {result}"


def bindings(ops):
    functions, function_defs, method_defs = [], [], []
    for op in bound_ops(ops):
        lines, method_def = _binding(op, as_method=False)  # trainrun._C.<name>: what the package builds on
        functions += lines
        function_defs.append(method_def)
        if "method" in op.python:
            lines, method_def = _binding(op, as_method=True)
            functions += lines
            method_defs.append(method_def)
    out = ["// Generated by tensor/codegen/gen_ops.py from tensor/ops.yaml: edit those, not this.",
           "// The Python bindings of the op list: trainrun._C.<name> (with out= where the schema has it) and",
           "// Tensor.<name>, as vectorcall functions (fast_call.h), each argument converted with a TypeError",
           "// that names it (op_arguments.h).",
           '#include "python/csrc/fast_call.h"', '#include "python/csrc/op_arguments.h"',
           '#include "tensor/op_schemas.h"', "",
           "namespace trainrun {", "namespace python {", "namespace {", ""]
    out += functions
    out += ["PyMethodDef function_defs[] = {"] + [f"    {d}," for d in function_defs] + ["};", ""]
    out += ["PyMethodDef method_defs[] = {"] + [f"    {d}," for d in method_defs] + ["};", ""]
    out += ["}  // namespace", "",
            "void bind_listed_ops(py::module_& m) {",
            "  for (PyMethodDef& def : function_defs) add_fast_function(m, &def);",
            "  py::handle tensor_class = py::type::of<Tensor>();",
            "  for (PyMethodDef& def : method_defs) add_fast_method(tensor_class, &def);",
            "}", "", "}  // namespace python", "}  // namespace trainrun", ""]
    return "\n".join(out)


def main(argv):
    generate_bindings = len(argv) == 4 and argv[1] == "--bindings"
    if len(argv) != 3 and not generate_bindings:
        sys.exit("usage: gen_ops.py ops.yaml OUT_DIR | gen_ops.py --bindings ops.yaml OUT.cc")
    spec = argv[2] if generate_bindings else argv[1]
    try:
        ops = load(spec)
        if generate_bindings:
            pathlib.Path(argv[3]).write_text(bindings(ops))
            return
    except SchemaError as e:
        sys.exit(f"{spec}: {e}")
    out_dir = pathlib.Path(argv[2])
    (out_dir / "op_schemas.h").write_text(header(ops))
    (out_dir / "op_list.cc").write_text(source(ops))


if __name__ == "__main__":
    main(sys.argv)
