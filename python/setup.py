"""Installs the trainrun package with the extension Bazel built:

    scripts/bazel.sh build //python:trainrun/_C.so
    /usr/bin/python3 -m venv --system-site-packages /tmp/venv
    /tmp/venv/bin/pip install --no-build-isolation --no-index ./python

(There is no PyPI here: --no-build-isolation uses Debian's setuptools.)
Without installing, PYTHONPATH=python imports it from the source tree."""
import pathlib
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent
BUILT = HERE.parent / "bazel-bin" / "python" / "trainrun" / "_C.so"


class BuildWithExtension(build_py):
    """Copies the Bazel-built trainrun/_C.so into the package."""

    def run(self):
        super().run()
        candidates = [HERE / "trainrun" / "_C.so", BUILT]
        source = next((c for c in candidates if c.exists()), None)
        if source is None:
            raise SystemExit(f"trainrun/_C.so is not built: run scripts/bazel.sh build //python:trainrun/_C.so "
                             f"(looked for {BUILT})")
        shutil.copy2(source, pathlib.Path(self.build_lib) / "trainrun" / "_C.so")


setup(
    name="trainrun",
    version="0.1.0",
    description="Distributed training runtime with PyTorch's API",
    packages=["trainrun", "trainrun.nn", "trainrun.optim", "trainrun.distributed",
              "trainrun.distributed.algorithms", "trainrun.utils", "trainrun.utils.data"],
    package_dir={"": "."},
    python_requires=">=3.11",
    cmdclass={"build_py": BuildWithExtension},
    zip_safe=False,
)
