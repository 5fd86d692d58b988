"""Kernel-name keys of the official consistency check (docs/evaluator.md §2.9 step 6).

Each GPU activity of a timed iteration becomes `<name>_<copy_kind>_<bytes>_<value>_<kind>`; `name`
is the demangled kernel name (libstdc++ `__cxa_demangle`, then " >" -> ">"), or "MEMCPY" / "MEMSET".
Triton kernels are reported under their plain function name and pass through unchanged.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.cache
def _cxa_demangle():
    """`(__cxa_demangle, free)` from libstdc++ / libc, or None where they cannot be loaded."""
    try:
        libstdcxx = ctypes.CDLL("libstdc++.so.6")
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    demangle = libstdcxx.__cxa_demangle
    demangle.restype = ctypes.c_void_p
    demangle.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    libc.free.argtypes = [ctypes.c_void_p]
    return demangle, libc.free


def demangle(name: str) -> str:
    """The readable C++ name of an Itanium-mangled symbol; any other name unchanged."""
    functions = _cxa_demangle()
    if not name.startswith("_Z") or functions is None:
        return name
    demangle_fn, free = functions
    status = ctypes.c_int(0)
    pointer = demangle_fn(name.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not pointer:
        return name
    try:
        return ctypes.string_at(pointer).decode(errors="replace").replace(" >", ">")
    finally:
        free(pointer)


def activity_key(name: str, copy_kind: int, num_bytes: int, value: int, kind: str) -> str:
    """The string the official check compares between iterations."""
    return f"{name}_{copy_kind}_{num_bytes}_{value}_{kind}"
