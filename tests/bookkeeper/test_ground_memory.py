"""Freed memory back to the kernel (``bookkeeper.ground.release_freed_memory``): a heap left
full of holes by transient work shrinks in resident memory once asked, in a process of its
own (so that no other test's heap is read). A serving process's allocators
(``keep_freed_memory_returnable``): its later threads take no malloc arena of their own, and
pyarrow allocates from the C heap, so that the trim reaches what they free."""

from __future__ import annotations

import json
import subprocess
import sys

from support import ALLOCATORS_PROBE

PROGRAM = """
from pathlib import Path
from bookkeeper.ground import release_freed_memory

def anonymous() -> int:
    status = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) for line in status if line.startswith("RssAnon")) * 1024

before = anonymous()
held = [bytes(1000) + bytes([i % 7]) for i in range(200_000)]  # malloc's, not pymalloc's
kept = held[::50]  # one in 50 survives: the heap is holes, its top is not free
del held
freed = anonymous()
release_freed_memory()
print(freed - before, anonymous() - before)
"""


def test_memory_freed_among_live_objects_goes_back_to_the_kernel() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120, check=True
    )
    held, after = (int(field) for field in done.stdout.split())
    assert held > 150 << 20  # the 200K buffers of 1 KB stayed resident when freed
    assert after < held / 4


RETURNABLE = """
import threading
import numpy as np
import pyarrow as pa
from bookkeeper.ground import keep_freed_memory_returnable

imported = allocators()["arenas"]  # pyarrow's import started a thread that made one
assert keep_freed_memory_returnable()
assert np._core.multiarray._set_madvise_hugepage(False) is False  # numpy's arrays on ordinary pages
answered = threading.Event()

def work() -> None:  # a thread of a query pool: it lives on, its memory is the arena's it took
    kept = [pa.array(np.full(40_000, i, dtype=np.float64)) for i in range(100)]
    kept += [np.full(40_000, i, dtype=np.float64) for i in range(100)]
    answered.wait()

workers = [threading.Thread(target=work) for _ in range(4)]
for worker in workers:
    worker.start()
print(json.dumps({**allocators(), "imported": imported}))
answered.set()
"""


def test_the_threads_started_after_the_setting_make_no_arena_and_pyarrow_uses_the_c_heap() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import json\n" + ALLOCATORS_PROBE + RETURNABLE],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found = json.loads(done.stdout)
    assert found == {"arenas": found["imported"], "arrow_pool": "system", "imported": found["imported"]}
