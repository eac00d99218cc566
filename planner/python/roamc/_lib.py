"""Finds libroamc and declares the C API of roamc.h to ctypes.

Where the library is looked for, first found wins:
  1. $ROAMC_LIBRARY: the path of libroamc.so (or of a folder holding it);
  2. the build tree of the checkout this package was imported from
     (BUILD/libroamc.so, BUILD from $ROAMC_BUILD_DIR, else <checkout>/build);
  3. the library pip recorded at install (roamc/_installed.py, written by setup.py:
     $ROAMC_LIBRARY, pkg-config's libdir, or the checkout's last `cmake --install`,
     as they were then), so no variable is needed afterwards;
  4. the libdir pkg-config gives for roamc (an installed prefix; set
     PKG_CONFIG_PATH for one outside the system's);
  5. ctypes.util.find_library("roamc") (the loader's own search: ldconfig,
     LD_LIBRARY_PATH).
"""
import ctypes
import ctypes.util
import os
import subprocess

_SONAME_GLOB = "libroamc.so"


class Error(Exception):
    """A roamc call failed: the library's message, and its status (status:
    "error", "bad input" or "does not fit"; code: the roamc_status number,
    the command's exit status)."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = {1: "error", 2: "bad input", 3: "does not fit"}.get(code, "?")


def _candidates():
    env = os.environ.get("ROAMC_LIBRARY")
    if env:
        yield os.path.join(env, _SONAME_GLOB) if os.path.isdir(env) else env
        return  # asked for one library: no other one silently instead
    here = os.path.dirname(os.path.abspath(__file__))
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(here)))  # planner/python/roamc
    if os.path.isfile(os.path.join(checkout, "planner", "api", "roamc.h")):
        build = os.environ.get("ROAMC_BUILD_DIR") or os.path.join(checkout, "build")
        yield os.path.join(build, _SONAME_GLOB)
    try:
        from . import _installed
        if _installed.LIBRARY:
            yield _installed.LIBRARY
    except ImportError:
        pass  # imported from the checkout, not installed by pip
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "roamc"], capture_output=True,
                                text=True, check=False).stdout.strip()
        if libdir:
            yield os.path.normpath(os.path.join(libdir, _SONAME_GLOB))
    except OSError:
        pass  # no pkg-config: the loader's own search still runs
    found = ctypes.util.find_library("roamc")
    if found:
        yield found


def _load():
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path + " (absent)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("roamc: cannot find libroamc.so; set ROAMC_LIBRARY to its path, or install "
                      "roamc (cmake --install) before pip installs this package (it records "
                      "where), or where pkg-config finds it. Tried: %s"
                      % ("; ".join(tried) or "nothing"))


lib, path = _load()

_c = ctypes
_P = _c.c_void_p
_u64p = _c.POINTER(_c.c_uint64)
_i32p = _c.POINTER(_c.c_int32)
_u8p = _c.POINTER(_c.c_uint8)
_szp = _c.POINTER(_c.c_size_t)


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


version = _fn("roamc_version", _c.c_char_p)
free = _fn("roamc_free", None, _P)

options_new = _fn("roamc_options_new", _P)
options_free = _fn("roamc_options_free", None, _P)
options_set = _fn("roamc_options_set", _c.c_int, _P, _c.c_char_p, _c.c_char_p)
options_error = _fn("roamc_options_error", _c.c_char_p, _P)

plan_file = _fn("roamc_plan_file", _c.c_int, _P, _c.c_char_p, _c.POINTER(_P))
plan_bytes = _fn("roamc_plan_bytes", _c.c_int, _P, _c.c_char_p, _c.c_size_t, _c.c_char_p,
                 _c.POINTER(_P))
result_free = _fn("roamc_result_free", None, _P)
result_status = _fn("roamc_result_status", _c.c_int, _P)
result_error = _fn("roamc_result_error", _c.c_char_p, _P)
result_schedule = _fn("roamc_result_schedule", _i32p, _P, _szp)
result_offsets = _fn("roamc_result_offsets", _u64p, _P, _szp)
result_sizes = _fn("roamc_result_sizes", _u64p, _P, _szp)
result_starts = _fn("roamc_result_starts", _i32p, _P, _szp)
result_ends = _fn("roamc_result_ends", _i32p, _P, _szp)
result_persistent = _fn("roamc_result_persistent", _u8p, _P, _szp)
result_buffer_name = _fn("roamc_result_buffer_name", _c.c_char_p, _P, _c.c_size_t)
result_theoretical_peak = _fn("roamc_result_theoretical_peak", _c.c_uint64, _P)
result_actual_peak = _fn("roamc_result_actual_peak", _c.c_uint64, _P)
result_lower_bound = _fn("roamc_result_lower_bound", _c.c_uint64, _P)
result_persistent_bytes = _fn("roamc_result_persistent_bytes", _c.c_uint64, _P)
result_device_bytes = _fn("roamc_result_device_bytes", _c.c_uint64, _P)
result_fits = _fn("roamc_result_fits", _c.c_int, _P)
result_max_batch = _fn("roamc_result_max_batch", _c.c_int64, _P, _c.POINTER(_c.c_int64))
result_stage_count = _fn("roamc_result_stage_count", _c.c_size_t, _P)
result_stage_peak = _fn("roamc_result_stage_peak", _c.c_int, _P, _c.c_size_t, _u64p, _u64p)


class CompareRow(_c.Structure):
    """roamc.h's roamc_compare_row (strings owned by the result)."""
    _fields_ = [("name", _c.c_char_p), ("title", _c.c_char_p), ("order", _c.c_char_p),
                ("layout", _c.c_char_p), ("order_ran", _c.c_char_p), ("layout_ran", _c.c_char_p),
                ("theoretical_peak", _c.c_uint64), ("actual_peak", _c.c_uint64),
                ("fragmentation_percent", _c.c_double),
                ("reduction_vs_pytorch_percent", _c.c_double), ("seconds", _c.c_double),
                ("note", _c.c_char_p)]


result_compare_count = _fn("roamc_result_compare_count", _c.c_size_t, _P)
result_compare_row = _fn("roamc_result_compare_row", _c.c_int, _P, _c.c_size_t,
                         _c.POINTER(CompareRow))
# char ** out-parameters as void **: the text is copied, then given back with roamc_free
result_report_json = _fn("roamc_result_report_json", _c.c_int, _P, _c.POINTER(_P), _szp)
result_plan_json = _fn("roamc_result_plan_json", _c.c_int, _P, _c.POINTER(_P), _szp)
result_write = _fn("roamc_result_write", _c.c_int, _P, _c.c_char_p)

layout_new = _fn("roamc_layout_new", _P)
layout_free = _fn("roamc_layout_free", None, _P)
layout_add_interval = _fn("roamc_layout_add_interval", _c.c_int, _P, _c.c_uint64, _c.c_uint64,
                          _c.c_int64, _c.c_int64, _szp)
layout_add_buffer = _fn("roamc_layout_add_buffer", _c.c_int, _P, _c.c_uint64, _c.c_uint64, _szp)
layout_add_conflict = _fn("roamc_layout_add_conflict", _c.c_int, _P, _c.c_size_t, _c.c_size_t)
layout_pin = _fn("roamc_layout_pin", _c.c_int, _P, _c.c_size_t, _c.c_uint64)
layout_set = _fn("roamc_layout_set", _c.c_int, _P, _c.c_char_p, _c.c_char_p)
layout_solve = _fn("roamc_layout_solve", _c.c_int, _P)
layout_error = _fn("roamc_layout_error", _c.c_char_p, _P)
layout_offsets = _fn("roamc_layout_offsets", _u64p, _P, _szp)
layout_height = _fn("roamc_layout_height", _c.c_uint64, _P)
layout_lower_bound = _fn("roamc_layout_lower_bound", _c.c_uint64, _P)
layout_proven_bound = _fn("roamc_layout_proven_bound", _c.c_uint64, _P)
layout_gap = _fn("roamc_layout_gap", _c.c_double, _P)
layout_stop_reason = _fn("roamc_layout_stop_reason", _c.c_int, _P)


def array(ptr, n):
    """The n values at ptr as a list (the handle owns the memory)."""
    return [ptr[i] for i in range(n.value)] if ptr else []


def text(fn, handle):
    """A JSON text the library returns as the caller's: copied, then freed."""
    out = _P()
    n = _c.c_size_t()
    st = fn(handle, _c.byref(out), _c.byref(n))
    if st != 0 or not out:
        return None
    try:
        return _c.string_at(out, n.value).decode("utf-8")
    finally:
        free(out)
