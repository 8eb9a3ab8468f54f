"""The Python examples of docs/dsl.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DSL = Path(__file__).resolve().parents[2] / "docs" / "dsl.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DSL.read_text(), re.S)


def test_the_page_has_python_examples() -> None:
    assert BLOCKS


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_a_python_example_runs(block: str) -> None:
    exec(
        compile(block, str(DSL), "exec"), {"__name__": "docs_example"}
    )  # our own docs, run as a reader would
