"""Every example of README.md and docs/*.md that is meant to run, runs as written against the
demo stack (issue 31): ``artimon up --demo`` on its default ports in a directory of its own,
each ``sh`` block in that directory with bash (``-e``: a failing line fails it), the
``python`` blocks of a page in one interpreter in order, as a reader pasting them would.

A ``python`` or ``sh`` block not meant to run says so on the line before its fence:
``<!-- not run: why -->`` (a synopsis, a server that runs until Ctrl-C, a host of yours).
Other blocks (output, configuration, grammar) are not commands. docs/alerts.md's "Try it"
is two terminals: its second line runs here beside the demo from the start, its PENDING and
FIRING lines checked after the other examples (the rule's minute of pending spent meanwhile).
No ``python`` or ``sh`` block, run or not, names a host but 127.0.0.1, localhost, 0.0.0.0
(a bind address), an RFC 5737 address, a name under example.com/.net/.org or an upper-case
placeholder (``HOST``)."""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import Lines, wait_until

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(?:<!-- not run: (?P<why>.+?) -->\n)?```(?P<lang>\w*)\n(?P<text>.*?)^```$", re.S | re.M)
COMMANDS = ("python", "sh")
PLACEHOLDER_NETS = [ipaddress.ip_network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")]
URL_HOST = re.compile(r"\b[a-z]+://([A-Za-z0-9_.-]+)")
HOST_PORT = re.compile(r"(?<![\w/.-])([A-Za-z][\w.-]*|\d{1,3}(?:\.\d{1,3}){3}):\d{2,5}\b")
IPV4 = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.])")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    text: str
    not_run: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start("lang")) + 1
            found.append(Block(page, line, match["lang"], match["text"], match["why"]))
    return found


COMMAND_BLOCKS = [b for b in blocks() if b.lang in COMMANDS]
RUN_SH = [b for b in COMMAND_BLOCKS if b.lang == "sh" and b.not_run is None]
RUN_PYTHON = {b.page for b in COMMAND_BLOCKS if b.lang == "python" and b.not_run is None}
ALERTS_TRY_IT = next(
    b for b in COMMAND_BLOCKS if b.text.startswith("artimon up --demo  ") and "alerts" in b.text
)


def allowed_host(host: str) -> bool:
    if host in ("127.0.0.1", "localhost", "0.0.0.0") or host.isupper():
        return True
    if re.fullmatch(r"[\w-]+(\.[\w-]+)*\.example\.(com|net|org)", host):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return any(address in net for net in PLACEHOLDER_NETS)


def hosts(text: str) -> set[str]:
    return {*URL_HOST.findall(text), *HOST_PORT.findall(text), *IPV4.findall(text)}


def test_every_command_block_runs_or_says_why() -> None:
    assert len(COMMAND_BLOCKS) >= 30 and len(RUN_SH) >= 2 and len(RUN_PYTHON) >= 4
    assert all(b.not_run.strip() for b in COMMAND_BLOCKS if b.not_run is not None)
    assert "127.0.0.1:8080" in ALERTS_TRY_IT.text and ALERTS_TRY_IT.not_run is not None


def test_no_command_block_names_another_host() -> None:
    strangers = {b.where: sorted(h for h in hosts(b.text) if not allowed_host(h)) for b in COMMAND_BLOCKS}
    assert {where: found for where, found in strangers.items() if found} == {}
    assert not allowed_host("10.0.0.5") and not allowed_host("namenode") and allowed_host("192.0.2.7")


@dataclass
class Demo:
    """The demo stack's directory, and docs/alerts.md's "Try it" second terminal, started
    beside it at once (its rule needs a minute of pending to fire: that minute runs while
    the other examples do; the module's last test checks it)."""

    cwd: Path
    alerts: Lines


@pytest.fixture(scope="module")
def demo(default_ports: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """``artimon up --demo`` on its default ports (the docs' 8080 and 2181), two rounds in."""
    cwd = tmp_path_factory.mktemp("docs-demo")
    (cwd / "docs" / "examples").mkdir(parents=True)  # the rules file where the page's command finds it
    shutil.copy(ROOT / "docs" / "examples" / "alerts.yaml", cwd / "docs" / "examples")
    (command,) = [line for line in ALERTS_TRY_IT.text.splitlines() if line.startswith("artimon alerts")]
    processes: list[subprocess.Popen[str]] = []

    def start(arguments: list[str]) -> Lines:
        process = subprocess.Popen(
            arguments, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment()
        )
        processes.insert(0, process)  # stopped in reverse
        return Lines(process.stdout)

    try:
        output = start([sys.executable, "-m", "artimon", "up", "--demo"])
        output.until(lambda line: line.startswith("[ready] agent"), 300, "the agent's ready line")
        alerts = start(["bash", "-c", f"exec {command}"])
        output.until(lambda line: line.startswith("[ready] spark"), 300, "Spark's ready line")
        for _ in range(2):
            output.until(lambda line: line.startswith("round "), 60, "a round")
        history = cwd / "artimon-data" / "history" / "parquet"  # what docs/spark.md's analyze reads
        wait_until(lambda: any(history.rglob("*.parquet")), 180, "the demo's first history batch")
        yield Demo(cwd, alerts)
    finally:
        for process in processes:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=240)
            assert process.stdout is not None
            process.stdout.close()


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARTIMON_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # artimon and python
    return env


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN_SH, ids=[b.where for b in RUN_SH])
def test_a_shell_example_runs(demo: Demo, block: Block) -> None:
    done = subprocess.run(
        ["bash", "-e", "-c", block.text],
        cwd=demo.cwd,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, (block.where, done.stdout[-2000:], done.stderr[-4000:])
    assert "Traceback" not in done.stderr, done.stderr
    if "spark analyze" in block.text:  # values, or the warning that there are none
        wrote = re.search(r"wrote (\d+) rows \((.*), (\d+) values\)", done.stdout)
        assert wrote is not None, done.stdout
        assert int(wrote.group(3)) > 0 or "warning: " in done.stderr, (done.stdout, done.stderr)


@pytest.mark.slow
@pytest.mark.parametrize(
    "page", sorted(RUN_PYTHON), ids=[str(p.relative_to(ROOT)) for p in sorted(RUN_PYTHON)]
)
def test_a_pages_python_examples_run_in_order(demo: Demo, page: Path, tmp_path: Path) -> None:
    script = "\n".join(
        b.text for b in COMMAND_BLOCKS if b.page == page and b.lang == "python" and not b.not_run
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (page, done.stderr[-4000:])


@pytest.mark.slow
def test_the_alerts_try_it_pends_then_fires(demo: Demo) -> None:
    demo.alerts.until(lambda line: line.startswith("alerts: 5 rule(s)"), 60, "the header line")
    pending = demo.alerts.until(lambda line: " PENDING " in line, 180, "a PENDING line")
    assert "HotRack" in pending and "rack=r4" in pending, pending
    firing = demo.alerts.until(lambda line: " FIRING " in line and "HotRack" in line, 240, "HotRack FIRING")
    assert "rack=r4" in firing and "(was pending)" in firing, firing
