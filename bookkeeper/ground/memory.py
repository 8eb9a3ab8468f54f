"""Giving memory freed by a large piece of transient work back to the kernel.

A query of 100K series allocates and frees hundreds of MB in a few calls. Freed is not
returned: glibc's malloc keeps freed chunks of its heaps and arenas for reuse (it gives back
only the top of the main heap, and each thread's arena stays as large as it grew), and
pyarrow's default pool (mimalloc) keeps freed segments too. The resident memory of a
process that answers large queries thus settles at its largest working set ever, not at
what it holds. :func:`release_freed_memory` asks both to return their free pages
(``malloc_trim(0)``, ``MemoryPool.release_unused()``): a few milliseconds for a heap of
hundreds of MB, so callers do it after large work ends, not after every small call
(``query_dsl.MemoryBudget``: when the last query running ends, having held at least
``RETURN_AFTER_BYTES`` since the last time). Where the C library is not glibc it returns
only pyarrow's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Callable

__all__ = ["release_freed_memory"]


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    trim = getattr(ctypes.CDLL(name), "malloc_trim", None)  # glibc's only
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_TRIM = _malloc_trim()


def release_freed_memory() -> None:
    """Return the free pages of the C heap and of pyarrow's pool (when pyarrow is loaded:
    this never imports it) to the kernel. ctypes lets go of the GIL during the trim."""
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None:
        pyarrow.default_memory_pool().release_unused()
    if _TRIM is not None:
        _TRIM(0)
