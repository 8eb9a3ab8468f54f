"""The PromQL compliance run: Prometheus's official compliance tester against Artimon's
``/prometheus`` API in two set-ups at once, both fed by one real Prometheus's remote write.

    python benchmarks/promql_compliance.py --snapshots DIR [--wait 85]

1. Tools, built from snapshots of their public repositories (the Go module proxy refuses
   both modules; it serves their dependencies): ``promql/cmd/promql-compliance-tester`` of
   ``github.com/prometheus/compliance`` (and its ``promql/promql-test-queries.yml``), and
   ``github.com/juliusv/prometheus_demo_service``. A snapshot is a bare git directory or a
   work tree, found as ``DIR/<owner>+<name>/repo``, ``DIR/<owner>+<name>`` or ``DIR/<name>``
   (``--compliance`` and ``--demo-repo`` name one each); the script prints where it looks
   and what is missing. ``go build`` (``GOFLAGS=-mod=mod``, the machine's ``GOPROXY``) puts
   the binaries, named by commit, in ``~/.cache/artimon/go/bin``; a later run reuses them.
2. Three demo services on free ports of 127.0.0.1, scraped by a real Prometheus (Debian's)
   every 5 s as job ``demo`` with the ``instance`` labels the tester's queries name
   (``demo.promlabs.com:10000..10002``): the queries are used unchanged.
3. That Prometheus remote-writes every sample to two Artimons:
   ``separate``: ``artimon vhms --resolutions 5s:2880,...``, ``artimon agent`` (a
   ``prometheus_remote_write`` source, a file channel, a vhms sink) and ``artimon api``, three
   processes as docs/operations.md section 2 runs them (shards listed statically: no
   ZooKeeper needed);
   ``up``: ``artimon up --interval 5 --no-spark`` (the README's path) with the receiver
   added to the ``agent.properties`` it would write, into its ``durable`` channel.
4. After ``--wait`` minutes (the tester's range queries end 12 minutes ago and span 10, and
   its windows reach 1h back: 85 minutes for every case to see full data), the tester runs
   once per set-up, Prometheus as its reference; each summary (``Total: N / M (P%) passed``)
   is printed and each text output kept in ``benchmarks/results/promql_compliance_<set-up>.txt``
   under a header with the date, the commits (tester, demo service, Artimon) and the load.

Every process started here dies with this one (SIGTERM at the end, and with the parent if
it is killed); everything binds 127.0.0.1; nothing outside a temporary directory, the Go
cache and ``benchmarks/results`` is written.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from artimon.servers import PrometheusServer, answers_ok, free_port
from artimon.stack import agent_properties, up_agent
from bookkeeper.ground import spawn, terminate
from vhms import DEFAULT_RESOLUTIONS

GO_BIN = Path.home() / ".cache" / "artimon" / "go" / "bin"
RESULTS = Path(__file__).with_name("results")
ROOT = Path(__file__).resolve().parent.parent
ARTIMON = [sys.executable, "-m", "artimon"]
QUERIES = "promql/promql-test-queries.yml"
PROGRESS = re.compile(r"\d+ / \d+ \[[-_>]*\] +[\d.]+% +(?:\?|[\d.]+) p/s")  # the tester's progress bar
SEPARATE_RESOLUTIONS = "5s:2880," + DEFAULT_RESOLUTIONS.partition(",")[2]


@dataclass(frozen=True)
class Repo:
    """A public repository the run builds a binary from."""

    owner: str
    name: str
    module_dir: str  # where its go.mod is
    package: str  # the main package, relative to module_dir
    binary: str

    def candidates(self, snapshots: Path) -> list[Path]:
        slug = f"{self.owner}+{self.name}"
        return [snapshots / slug / "repo", snapshots / slug, snapshots / self.name]


TESTER = Repo(
    "prometheus", "compliance", "promql", "./cmd/promql-compliance-tester", "promql-compliance-tester"
)
DEMO = Repo("juliusv", "prometheus_demo_service", ".", ".", "prometheus_demo_service")


class Missing(RuntimeError):
    """A snapshot or tool that is not there (the message says where the script looked)."""


@dataclass(frozen=True)
class Snapshot:
    """A repository on disk: a bare git directory or a work tree."""

    path: Path
    bare: bool

    def _git(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        where = ["--git-dir", str(self.path)] if self.bare else ["-C", str(self.path)]
        return subprocess.run(["git", *where, *args], capture_output=True, timeout=300, check=True)

    def commit(self) -> str:
        if not self.bare and not (self.path / ".git").exists():
            return "unknown"
        return self._git("rev-parse", "HEAD").stdout.decode().strip()

    def tree(self, into: Path) -> Path:
        """The files of HEAD (a bare directory's, exported with git archive) or the work tree."""
        if not self.bare:
            return self.path
        archive = self._git("archive", "HEAD").stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, timeout=300, check=True)
        return into


def find_snapshot(repo: Repo, given: Path | None, snapshots: Path | None) -> Snapshot:
    """The snapshot of ``repo``: ``given``, else the first candidate under ``snapshots``."""
    places = [given] if given is not None else repo.candidates(snapshots) if snapshots is not None else []
    for place in places:
        if (place / "HEAD").is_file() and (place / "objects").is_dir():
            return Snapshot(place, bare=True)
        if (place / repo.module_dir / "go.mod").is_file():
            return Snapshot(place, bare=False)
    where = ", ".join(str(p) for p in places) or "nowhere (give --snapshots DIR or a flag per repository)"
    raise Missing(
        f"no snapshot of github.com/{repo.owner}/{repo.name} (a bare git directory or a work tree "
        f"with {repo.module_dir}/go.mod); looked in {where}"
    )


def run_child(command: list[str], timeout: float, **popen: Any) -> tuple[int, str]:
    """``command`` as a child that dies with this process: its exit code and output."""
    process = spawn(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)
    try:
        output, _ = process.communicate(timeout=timeout)
    finally:
        terminate(process, 5)
    return process.returncode, output


def build(repo: Repo, snapshot: Snapshot, work: Path) -> tuple[Path, str, Path]:
    """``go build`` of ``repo`` from ``snapshot`` (a bare one exported under ``work``) into
    :data:`GO_BIN`, reused when there: the binary, its commit, the tree of files."""
    commit = snapshot.commit()
    GO_BIN.mkdir(parents=True, exist_ok=True)
    binary = GO_BIN / f"{repo.binary}-{commit[:12]}"
    (work / repo.name).mkdir(parents=True)
    tree = snapshot.tree(work / repo.name)
    if binary.exists() and commit != "unknown":
        return binary, commit, tree
    print(f"building {repo.binary} at {commit[:12]} from {snapshot.path} ...", flush=True)
    returncode, output = run_child(
        ["go", "build", "-o", str(binary), repo.package],
        1800,
        cwd=tree / repo.module_dir,
        env={**os.environ, "GOFLAGS": "-mod=mod"},
    )
    if returncode:
        raise Missing(f"go build of {repo.binary} failed:\n{output.strip()[-3000:]}")
    return binary, commit, tree


def wait_until(
    what: str, ready: Callable[[], bool], processes: list[subprocess.Popen[Any]], timeout: float
) -> None:
    """Poll ``ready`` (a readiness probe) until true; ``RuntimeError`` with the log's tail
    when one of ``processes`` (started by :func:`start`) exits first, or after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not ready():
        for process in processes:
            if process.poll() is not None:
                tail = Path(process.stdout_log).read_text(errors="replace")[-3000:]  # type: ignore[attr-defined]
                raise RuntimeError(f"{what}: {process.args} exited with {process.returncode}:\n{tail}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not ready after {timeout:g} s")
        time.sleep(0.5)


def start(stack: ExitStack, command: list[str], log: Path, grace: float = 30.0) -> subprocess.Popen[Any]:
    """``command`` as a child that dies with this process, its output in ``log`` (its working
    directory ``log``'s: no directory there may be named like a package, ``python -m`` would
    import it); ended (SIGTERM, then SIGKILL after ``grace`` s) when ``stack`` closes."""
    out = stack.enter_context(log.open("ab"))
    process = spawn(command, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent)
    process.stdout_log = log  # type: ignore[attr-defined]
    stack.callback(terminate, process, grace)
    return process


def listening(port: int) -> Callable[[], bool]:
    def probe() -> bool:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1.0).close()
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False
        return True

    return probe


def separate(stack: ExitStack, work: Path) -> tuple[str, str]:
    """VHMS, agent and query API as three processes; (remote-write URL, PromQL base URL)."""
    work.mkdir()
    vhms_port, receiver, api_port = free_port(), free_port(), free_port()
    vhms = start(
        stack,
        [
            *ARTIMON,
            "vhms",
            "--no-register",
            "--port",
            str(vhms_port),
            "--data-dir",
            str(work / "store"),
            "--resolutions",
            SEPARATE_RESOLUTIONS,
            "--wal-fsync",
            "periodic",
        ],
        work / "vhms.log",
    )
    (work / "agent.properties").write_text(
        agent_properties(
            "c",
            sources={
                "prom": {
                    "type": "prometheus_remote_write",
                    "bind": "127.0.0.1",
                    "port": receiver,
                    "channels": "ch",
                }
            },
            channels={"ch": {"type": "file", "dataDirs": str(work / "channel")}},
            sinks={
                "vhms": {
                    "type": "vhms",
                    "channel": "ch",
                    "servers": f"default@127.0.0.1:{vhms_port}",
                    "batchSize": 1000,
                }
            },
        )
    )
    agent = start(
        stack,
        [*ARTIMON, "agent", "-f", str(work / "agent.properties"), "-n", "c", "--monitor-port", "0"],
        work / "agent.log",
    )
    api = start(
        stack,
        [*ARTIMON, "api", "--port", str(api_port), "--vhms", f"127.0.0.1:{vhms_port}", "--timeout", "60"],
        work / "api.log",
    )
    base = f"http://127.0.0.1:{api_port}/prometheus"
    processes = [vhms, agent, api]
    wait_until("separate: query API", lambda: answers_ok(f"{base}/api/v1/query?query=1"), processes, 120)
    wait_until("separate: remote-write receiver", listening(receiver), processes, 120)
    return f"http://127.0.0.1:{receiver}/api/v1/write", base


def up(stack: ExitStack, work: Path) -> tuple[str, str]:
    """``artimon up --interval 5 --no-spark`` with a remote-write receiver added to its agent;
    (remote-write URL, PromQL base URL)."""
    work.mkdir()
    receiver, api_port = free_port(), free_port()
    properties = re.sub(r"^(up\.sources = .*)$", r"\1 prom", up_agent(), count=1, flags=re.MULTILINE)
    properties += "".join(
        f"up.sources.prom.{key} = {value}\n"
        for key, value in [
            ("type", "prometheus_remote_write"),
            ("bind", "127.0.0.1"),
            ("port", receiver),
            ("channels", "durable"),
        ]
    )
    (work / "data").mkdir()
    (work / "data" / "agent.properties").write_text(properties)
    process = start(
        stack,
        [
            *ARTIMON,
            "up",
            "--interval",
            "5",
            "--no-spark",
            "--data-dir",
            str(work / "data"),
            "--zk-port",
            "0",
            "--api-port",
            str(api_port),
            "--thrift-port",
            "0",
        ],
        work / "up.log",
        grace=120,
    )
    base = f"http://127.0.0.1:{api_port}/prometheus"
    wait_until("up: query API", lambda: answers_ok(f"{base}/api/v1/query?query=1"), [process], 300)
    wait_until("up: remote-write receiver", listening(receiver), [process], 120)
    return f"http://127.0.0.1:{receiver}/api/v1/write", base


PROMETHEUS = """
global:
  scrape_interval: 5s
  evaluation_interval: 5s
scrape_configs:
  - job_name: demo
    static_configs:
{targets}
remote_write:
{writes}
"""


def prometheus_config(demo_ports: list[int], receivers: dict[str, str]) -> str:
    targets = "".join(
        f"      - targets: ['127.0.0.1:{port}']\n"
        f"        labels: {{instance: 'demo.promlabs.com:{10000 + i}'}}\n"
        for i, port in enumerate(demo_ports)
    )
    writes = "".join(
        f"  - url: '{url}'\n    name: {name}\n    queue_config: {{batch_send_deadline: 1s}}\n"
        for name, url in receivers.items()
    )
    return PROMETHEUS.format(targets=targets.rstrip("\n"), writes=writes)


def remote_write_counts(prometheus: str) -> str:
    """Samples sent and failed per remote write, from Prometheus's own /metrics."""
    with urllib.request.urlopen(f"{prometheus}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    counts: dict[str, dict[str, float]] = {}
    for kind, name, value in re.findall(
        r'^prometheus_remote_storage_samples_(total|failed_total)\{remote_name="(\w+)"[^}]*\} (\S+)$',
        text,
        re.MULTILINE,
    ):
        counts.setdefault(name, {})[kind] = float(value)
    return "; ".join(
        f"{name}: {c.get('total', 0):.0f} samples sent, {c.get('failed_total', 0):.0f} failed"
        for name, c in counts.items()
    )


def run_tester(
    tester: Path,
    queries: Path,
    work: Path,
    name: str,
    reference: str,
    target: str,
    header: str,
    results: Path,
) -> str:
    """The tester against ``target``; its summary line (the text output kept in results/)."""
    targets = work / f"targets-{name}.yml"
    targets.write_text(
        f"reference_target_config:\n  query_url: '{reference}'\n"
        f"test_target_config:\n  query_url: '{target}'\n"
    )
    returncode, output = run_child(
        [str(tester), f"-config-file={queries}", f"-config-file={targets}", "-query-parallelism=4"], 3600
    )
    output = PROGRESS.sub("", output)
    results.mkdir(parents=True, exist_ok=True)
    (results / f"promql_compliance_{name}.txt").write_text(f"{header}set-up: {name}\n\n{output}")
    summary = re.search(r"Total: .*", output)
    return summary[0] if summary else f"no summary; the tester exited with {returncode}: {output[-2000:]}"


def artimon_commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30
    )
    return done.stdout.strip() or "unknown"


def tools(args: argparse.Namespace, work: Path) -> tuple[Path, Path, Path, str]:
    """The tester, the demo service, the queries file and a header naming their commits."""
    print(f"looking for snapshots in {args.snapshots or '(no --snapshots)'}", flush=True)
    found: dict[Repo, Snapshot] = {}
    missing = []
    for repo, given in ((TESTER, args.compliance), (DEMO, args.demo_repo)):
        try:
            found[repo] = find_snapshot(repo, given, args.snapshots)
        except Missing as exc:
            missing.append(str(exc))
    if missing:
        raise Missing("\n".join(missing))
    tester, tester_commit, tree = build(TESTER, found[TESTER], work)
    queries = GO_BIN / f"promql-test-queries-{tester_commit[:12]}.yml"
    shutil.copyfile(tree / QUERIES, queries)
    demo, demo_commit, _ = build(DEMO, found[DEMO], work)
    header = (
        f"date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}\n"
        f"tester: github.com/prometheus/compliance {tester_commit}\n"
        f"demo service: github.com/juliusv/prometheus_demo_service {demo_commit}\n"
        f"artimon: {artimon_commit()}\n"
    )
    return tester, demo, queries, header


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--snapshots", type=Path, help="a directory holding both repositories' snapshots")
    parser.add_argument("--compliance", type=Path, help="the snapshot of github.com/prometheus/compliance")
    parser.add_argument(
        "--demo-repo", type=Path, help="the snapshot of github.com/juliusv/prometheus_demo_service"
    )
    parser.add_argument(
        "--wait", type=float, default=85.0, help="minutes of data before the tester runs (85)"
    )
    parser.add_argument(
        "--results", type=Path, default=RESULTS, help="where the outputs go (benchmarks/results)"
    )
    parser.add_argument("--setups", default="separate,up", help="which set-ups (separate,up)")
    args = parser.parse_args(argv)
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="promql-compliance-")))
        try:
            tester, demo, queries, header = tools(args, work / "src")
        except Missing as exc:
            print(f"promql_compliance: {exc}", file=sys.stderr)
            return 2
        print(header, end="", flush=True)
        status = measure(args, stack, work, (tester, demo, queries), header)
    return status


def measure(
    args: argparse.Namespace, stack: ExitStack, work: Path, built: tuple[Path, Path, Path], header: str
) -> int:
    """Demo services, the set-ups, Prometheus; the tester after ``--wait`` minutes; 0 when
    every set-up's tester printed a summary."""
    tester, demo, queries = built
    demo_ports = [free_port() for _ in range(3)]
    for i, port in enumerate(demo_ports):
        start(stack, [str(demo), f"-listen-address=127.0.0.1:{port}"], work / f"demo-{i}.log", grace=5)
    setups = {"separate": separate, "up": up}
    receivers, targets = {}, {}
    for name in args.setups.split(","):
        receivers[name], targets[name] = setups[name](stack, work / name)
        print(f"{name}: remote write {receivers[name]}, PromQL {targets[name]}", flush=True)
    config = prometheus_config(demo_ports, receivers)
    prometheus = stack.enter_context(PrometheusServer(work / "prometheus", config=config)).url
    print(f"Prometheus {prometheus}; waiting {args.wait:g} min for data", flush=True)
    deadline = time.monotonic() + args.wait * 60
    while time.monotonic() < deadline:
        time.sleep(min(300.0, max(0.0, deadline - time.monotonic())))
        print(f"  {time.strftime('%H:%M:%S')} {remote_write_counts(prometheus)}", flush=True)
    load = "load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + "\n"
    summaries = {
        name: run_tester(tester, queries, work, name, prometheus, target, header + load, args.results)
        for name, target in targets.items()
    }
    for name, summary in summaries.items():
        print(f"{name}: {summary}")
    return 0 if all(s.startswith("Total:") for s in summaries.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
