"""python -m trainrun.distributed.run ARGS: the trainrun launcher with ARGS, as `python -m torch.distributed.run` is
torchrun. The launcher is the program next to this package (an installed tree's bin/trainrun), the one Bazel
built in this source tree (bazel-bin/launcher/trainrun), or `trainrun` on PATH."""
import os
import pathlib
import shutil
import sys


def launcher_path():
    here = pathlib.Path(__file__).resolve().parents[1]  # the trainrun package
    candidates = [here / "bin" / "trainrun", here.parents[1] / "bazel-bin" / "launcher" / "trainrun"]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    found = shutil.which("trainrun")
    if found:
        return found
    raise FileNotFoundError("the trainrun launcher was not found (looked in "
                            f"{', '.join(str(c) for c in candidates)} and on PATH); build it with "
                            "scripts/bazel.sh build //launcher:trainrun")


def main(args=None):
    path = launcher_path()
    os.execv(path, [path] + list(sys.argv[1:] if args is None else args))


if __name__ == "__main__":
    main()
