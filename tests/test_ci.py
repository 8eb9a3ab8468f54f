"""CI runs exactly the command the README gives for testing."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"\*\*Test it\*\*.*?```sh\n(.*?)\n```", readme, re.DOTALL)
    assert block is not None, "README.md has no **Test it** command block"
    ci_command = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci_command == block.group(1)
