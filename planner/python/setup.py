"""pip install ./planner/python (offline: --no-index --no-build-isolation with Debian's
setuptools).  The package is pure Python over libroamc (ctypes): install the library first
(cmake --install build --prefix PREFIX; roamc/_lib.py says where it is looked for).
models/export.py is bundled as roamc/_export.py, for roamc.torch.  Where libroamc.so is
installed is recorded now, in roamc/_installed.py, so that the package loads it later
without PKG_CONFIG_PATH or ROAMC_LIBRARY (roamc/_lib.py: the order it looks in)."""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
EXPORT_PY = os.path.join(HERE, "..", "..", "models", "export.py")


SONAME_LINK = "libroamc.so"


def installed_library():
    """The libroamc.so this package is installed against, or None: $ROAMC_LIBRARY, else the
    libdir pkg-config gives for roamc (PKG_CONFIG_PATH as set for this pip), else the one the
    last `cmake --install` of the checkout's build tree wrote (CMake's install_manifest.txt)."""
    env = os.environ.get("ROAMC_LIBRARY")
    if env:
        path = os.path.join(env, SONAME_LINK) if os.path.isdir(env) else env
        if os.path.isfile(path):
            return os.path.abspath(path)
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "roamc"], capture_output=True,
                                text=True, check=False).stdout.strip()
    except OSError:
        libdir = ""
    if libdir and os.path.isfile(os.path.join(libdir, SONAME_LINK)):
        return os.path.normpath(os.path.abspath(os.path.join(libdir, SONAME_LINK)))
    build = os.environ.get("ROAMC_BUILD_DIR") or os.path.join(HERE, "..", "..", "build")
    try:
        with open(os.path.join(build, "install_manifest.txt")) as f:
            for line in f:
                path = line.strip()
                if os.path.basename(path) == SONAME_LINK and os.path.isfile(path):
                    return path
    except OSError:
        pass
    return None


class BuildPyWithExporter(build_py):
    """build_py, plus the checkout's models/export.py as roamc/_export.py and where
    libroamc.so is installed as roamc/_installed.py."""

    def run(self):
        super().run()
        dest = os.path.join(self.build_lib, "roamc")
        os.makedirs(dest, exist_ok=True)
        if os.path.isfile(EXPORT_PY):
            shutil.copyfile(EXPORT_PY, os.path.join(dest, "_export.py"))
        lib = installed_library()
        with open(os.path.join(dest, "_installed.py"), "w") as f:
            f.write('"""Written by setup.py at install: the libroamc.so found then (or None)."""\n'
                    "LIBRARY = %r\n" % lib)


setup(
    name="roamc",
    version="0.1.0",
    description="Python bindings of libroamc: memory plans of ONNX training steps, buffer layouts",
    packages=["roamc"],
    python_requires=">=3.7",
    cmdclass={"build_py": BuildPyWithExporter},
)
