"""The Python examples of docs/promql.md run as written, and its lists of functions agree
with the parser's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from query_dsl.promql.ranges import RANGE_NAMES
from query_dsl.promql.signatures import SIGNATURES

PAGE = Path(__file__).resolve().parents[3] / "docs" / "promql.md"
TEXT = PAGE.read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, re.S)


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_a_python_example_runs(block: str) -> None:
    assert BLOCKS
    exec(compile(block, str(PAGE), "exec"), {"__name__": "docs_example"})  # our own docs


def test_every_function_is_documented() -> None:
    supported = TEXT[TEXT.index("## What is supported") : TEXT.index("## Names and types")]
    for name in SIGNATURES:
        assert f"`{name}`" in supported or name in supported, name
    for name in RANGE_NAMES:
        assert f"`{name}`" in supported, name
