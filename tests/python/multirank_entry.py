"""One rank of RankRunner.run_function (multirank.py): loads a test file by
path and calls one of its functions with the given string arguments.
    multirank_entry.py FILE FUNCTION [ARGS...]"""
import importlib.util
import os
import sys
import traceback


def main():
    path, name, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    rank = int(os.environ.get("RANK", "0"))
    sys.path.insert(0, os.path.dirname(path))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                    "python"))
    spec = importlib.util.spec_from_file_location("multirank_target", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        getattr(module, name)(*args)
    except BaseException:  # noqa: B902 - a rank's failure of any kind is reported the same way
        print("rank %d: FAILED in %s:\n%s" % (rank, name, traceback.format_exc()), file=sys.stderr, flush=True)
        os._exit(1)
    print("rank %d: ok" % rank, flush=True)


if __name__ == "__main__":
    main()
