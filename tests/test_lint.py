"""The code stays ruff-clean and mypy-strict (configured in pyproject.toml), no product
function grows over 80 lines and no product module over 430 (docs/architecture.md: split it
along the concepts it holds)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_check_and_format() -> None:
    check = _run(sys.executable, "-m", "ruff", "check", ".")
    assert check.returncode == 0, check.stdout + check.stderr
    fmt = _run(sys.executable, "-m", "ruff", "format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_mypy_strict() -> None:
    result = _run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr


PACKAGES = ["bookkeeper", "collector_agent", "vhms", "query_dsl", "spark_jobs", "artimon"]
MAX_FUNCTION_LINES = 80


def test_no_product_function_is_over_80_lines() -> None:
    long = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name} has {lines} lines")
    assert not long, "\n".join(long)


# CONVENTIONS.md: no module over about 400 lines; split it along the concepts it holds
MAX_MODULE_LINES = 430
# still over it, each to be split (the list only shrinks: an entry under the budget fails too)
OVER_MODULE_BUDGET = {
    "query_dsl/evaluator.py",
    "query_dsl/promql/parser.py",
    "vhms/client.py",
    "vhms/server/store.py",
}


def test_no_product_module_is_over_the_line_budget() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }
    over = {where: lines for where, lines in sizes.items() if lines > MAX_MODULE_LINES}
    grown = [f"{where} has {lines} lines" for where, lines in over.items() if where not in OVER_MODULE_BUDGET]
    assert not grown, f"over {MAX_MODULE_LINES} lines (split them): " + ", ".join(grown)
    shrunk = sorted(OVER_MODULE_BUDGET - set(over))
    assert not shrunk, f"no longer over {MAX_MODULE_LINES} lines: take them off OVER_MODULE_BUDGET: {shrunk}"
