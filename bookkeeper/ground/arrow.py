"""pyarrow in a process that never makes a DataFrame: without pandas.

pyarrow's first conversion of a Python object or a numpy array (``pa.array``, a numpy
argument of a compute function) asks whether the object is a pandas one by *importing
pandas*, when it is installed: some 40 MiB and a few hundred ms that a VHMS shard or a query
API takes on its first ingest or answer, to learn that a list is not a Series. Its answer
is asked once per process and kept, so :func:`keep_pandas_out_of_pyarrow` asks it at a
moment pandas cannot be found; pyarrow then converts lists and arrays as it did, and still
loads pandas for an explicit use (``to_pandas()``, ``Table.from_pandas``), after which it
knows pandas objects again. Called by the commands that serve (``artimon vhms``, ``artimon
api``), not by the library: a process that mixes pandas with pyarrow keeps pyarrow's way
(tests/artimon/test_serving_imports.py).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

import pyarrow as pa

__all__ = ["keep_pandas_out_of_pyarrow"]


class _NoPandas:
    """A finder before every other: pandas cannot be found while it is in ``sys.meta_path``."""

    @staticmethod
    def find_spec(
        name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name == "pandas":
            raise ModuleNotFoundError("pandas is kept out of this process's pyarrow", name=name)
        return None


def keep_pandas_out_of_pyarrow() -> None:
    """Have pyarrow settle, without importing pandas, that pandas is absent for its implicit
    checks; nothing to do once pandas is imported (pyarrow then already uses it). Call it
    before the process starts threads that may import pandas (the finder is there for one
    ``pa.array`` call)."""
    if "pandas" in sys.modules:
        return
    sys.meta_path.insert(0, _NoPandas)
    try:
        pa.array([])
    finally:
        sys.meta_path.remove(_NoPandas)
