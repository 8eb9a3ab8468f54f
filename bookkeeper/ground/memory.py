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
``RETURN_AFTER_BYTES`` since the last time, and the process has grown past a working reserve
above its size after the last return). Where the C library is not glibc it returns only
pyarrow's. A reserve cannot be kept by ``malloc_trim``'s own argument: it spares only the
heap's top, and a query's freed arrays lie in its free lists (a 1M-series division faulted
as many pages anew after ``malloc_trim(1 << 30)`` as after ``malloc_trim(0)``: 49K).

A trim reaches only what the allocators let it reach, so a process that serves large
queries first calls :func:`keep_freed_memory_returnable` (``artimon vhms``, ``artimon api``,
before they start threads):

- **no more malloc arenas** (``mallopt(M_ARENA_MAX, 1)``): glibc gives each new thread an
  arena of its own (up to eight per core), and a trim gives back the free chunks inside a
  thread's heap but not its free top, which the heap keeps up to the trim threshold (grown
  to as much as 64 MiB by large frees); the query API runs queries on a pool of threads, so
  each kept such a top. Threads started after the call share the arenas there are (the main
  one, and one that a thread pyarrow starts at import made). The threads of a Python process
  take turns on the GIL, so they hardly contend for an arena's lock;
- **pyarrow on the C heap** (its system pool), in a process that has loaded pyarrow: its
  default pool, mimalloc, keeps the pages a thread freed in that thread's heap, which
  ``release_unused()`` from another thread (the budget's returner) does not reach: 60-90 MiB
  stayed resident after issue 27's queries at 100K series when the query API used pyarrow.
  On glibc's heap, the same buffers are freed there and trimmed. The serving processes no
  longer load pyarrow (issue 27: docs/vhms.md § Start-up), so this never imports it;
- **numpy's large arrays on ordinary pages**: numpy asks for transparent huge pages for
  arrays of 4 MiB and more, and after a trim the next large query faults its temporaries in
  again, each 2 MiB fault compacting memory first where the kernel defragments on madvise
  (issue 27: a 1M-series answer 541-777 ms after a pause, 320-333 on 4 KiB pages).

glibc's threshold for giving large blocks mappings of their own (``M_MMAP_THRESHOLD``) is
left to grow as it does: fixed at 4 MiB it gave back 4-11 MiB more after those queries (17
at 1 MiB), but every large temporary was then faulted in anew: 7-16% more CPU for the
queries (69% at 1 MiB) and 11% for the store's load (docs/promql.md § Memory).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib
import sys
from collections.abc import Callable

__all__ = ["keep_freed_memory_returnable", "release_freed_memory"]

M_ARENA_MAX = -8  # glibc's malloc.h


def _glibc(function: str, argtypes: list[type]) -> Callable[..., int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    found = getattr(ctypes.CDLL(name), function, None)  # glibc's only
    if found is not None:
        found.argtypes, found.restype = argtypes, ctypes.c_int
    return found


_TRIM = _glibc("malloc_trim", [ctypes.c_size_t])
_MALLOPT = _glibc("mallopt", [ctypes.c_int, ctypes.c_int])


def keep_freed_memory_returnable() -> bool:
    """Set this process's allocators so that :func:`release_freed_memory` reaches what its
    threads free (the module doc): no more malloc arenas, pyarrow on the C heap where it is
    loaded (this never imports it), and numpy's large arrays on ordinary pages. Call it
    before the process starts threads: one that already has an arena keeps it. Whether glibc
    took the setting (False where the C library is not glibc)."""
    # numpy asks for transparent huge pages for arrays of 4 MiB and more; after a trim, the
    # next large query faults its temporaries in again, and with the kernel's defrag on
    # madvise each 2 MiB fault compacts memory first: a 1M-series answer (issue 27's matched
    # division) took 541-777 ms after a pause against 320-333 on 4 KiB pages (210 with
    # nothing returned)
    importlib.import_module("numpy._core.multiarray")._set_madvise_hugepage(False)  # numpy 2's switch
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None:
        pyarrow.set_memory_pool(pyarrow.system_memory_pool())
    return _MALLOPT is not None and _MALLOPT(M_ARENA_MAX, 1) == 1


def release_freed_memory() -> None:
    """Return the free pages of the C heap and of pyarrow's pool (when pyarrow is loaded:
    this never imports it) to the kernel. ctypes lets go of the GIL during the trim."""
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None:
        pyarrow.default_memory_pool().release_unused()
    if _TRIM is not None:
        _TRIM(0)
