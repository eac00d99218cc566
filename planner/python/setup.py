"""pip install ./planner/python (offline: --no-index --no-build-isolation with Debian's
setuptools).  The package is pure Python over libroamc (ctypes): install the library first
(cmake --install build --prefix PREFIX; roamc/_lib.py says where it is looked for).
models/export.py is bundled as roamc/_export.py, for roamc.torch."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
EXPORT_PY = os.path.join(HERE, "..", "..", "models", "export.py")


class BuildPyWithExporter(build_py):
    """build_py, plus the checkout's models/export.py as roamc/_export.py."""

    def run(self):
        super().run()
        if os.path.isfile(EXPORT_PY):
            dest = os.path.join(self.build_lib, "roamc", "_export.py")
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(EXPORT_PY, dest)


setup(
    name="roamc",
    version="0.1.0",
    description="Python bindings of libroamc: memory plans of ONNX training steps, buffer layouts",
    packages=["roamc"],
    python_requires=">=3.7",
    cmdclass={"build_py": BuildPyWithExporter},
)
