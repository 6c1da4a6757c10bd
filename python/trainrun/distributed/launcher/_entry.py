"""The worker program of launcher.api: `python -m trainrun.distributed.launcher._entry PAYLOAD WORKDIR` (run by
the trainrun launcher on every rank). Calls the pickled entrypoint and writes WORKDIR/rank_R.result (the pickled
return value) or WORKDIR/rank_R.error (JSON: message, traceback, exit code), each written whole or not at all."""
import io
import json
import os
import pickle
import runpy
import subprocess
import sys
import time
import traceback
import types


def _write(path, data):
    partial = path + ".partial"
    with open(partial, "wb") as f:
        f.write(data)
    os.replace(partial, path)


def _peek(raw):
    """(the caller's script path stored in the payload, whether the payload names its __main__ module), read
    without resolving the classes it names."""
    seen = []

    class _Lenient(pickle.Unpickler):
        def find_class(self, module, name):
            seen.append(module)
            try:
                return super().find_class(module, name)
            except (AttributeError, ModuleNotFoundError):
                return None
    main_file = _Lenient(io.BytesIO(raw)).load()[3]
    return main_file, "__main__" in seen


def _load_callers_main(main_file):
    """The calling script, as the module its `__main__` names resolve in. It runs as __mp_main__ (as
    multiprocessing's spawn loads it), so its block guarded by the __main__ name check does not run again."""
    module = types.ModuleType("__mp_main__")
    module.__file__ = main_file
    sys.modules["__mp_main__"] = sys.modules["__main__"] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(main_file)))
    with open(main_file) as f:
        code = compile(f.read(), main_file, "exec")
    exec(code, module.__dict__)  # noqa: S102  (the caller's own script)


def _run(kind, entrypoint, args):
    if kind == "function":
        return entrypoint(*args)
    if kind == "python":
        sys.argv = list(args)
        runpy.run_path(args[0], run_name="__main__")
        return None
    code = subprocess.run([entrypoint, *args]).returncode
    if code != 0:
        raise SystemExit(code)
    return None


def main(payload_file, work):
    rank = int(os.environ.get("RANK", "0"))
    base = os.path.join(work, f"rank_{rank}")
    try:
        with open(payload_file, "rb") as f:
            raw = f.read()
        main_file, needs_main = _peek(raw)
        if needs_main and main_file:  # the entrypoint lives in the caller's script: load it before unpickling
            _load_callers_main(main_file)
        kind, entrypoint, args, _ = pickle.loads(raw)
        value = _run(kind, entrypoint, args)
    except BaseException as e:  # noqa: BLE001  (every failure is reported, then the worker exits non-zero)
        if isinstance(e, SystemExit) and e.code in (0, None):
            _write(base + ".result", pickle.dumps(None))
            return 0
        exitcode = e.code if isinstance(e, SystemExit) and isinstance(e.code, int) else 1
        _write(base + ".error", json.dumps({
            "message": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(), "exitcode": exitcode,
            "pid": os.getpid(), "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
            "timestamp": time.time()}).encode())
        traceback.print_exc()
        return exitcode
    _write(base + ".result", pickle.dumps(value))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
