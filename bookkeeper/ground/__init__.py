"""The platform's ground: what several packages past the app library share.

Here: series identity by columns (label columns and the series hash, ``columns.py``).
"""

from __future__ import annotations

from bookkeeper.ground.columns import (
    KEY_LIMIT,
    LabelColumn,
    LabelColumns,
    combine_hashes,
    concat,
    dense_classes,
    key_hashes,
    row_keys,
    series_hashes,
    text_hashes,
    translate,
)

__all__ = [
    "KEY_LIMIT",
    "LabelColumn",
    "LabelColumns",
    "combine_hashes",
    "concat",
    "dense_classes",
    "key_hashes",
    "row_keys",
    "series_hashes",
    "text_hashes",
    "translate",
]
