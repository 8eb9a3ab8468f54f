"""The app library is light: the README's bookkeeper example, run as an application would
(its own process, serving until SIGTERM, registered in the session's real ZooKeeper), and read
back with the bookkeeper's own client, imports none of the platform's heavy packages; and an
install of the repository without extras installs none of them, nor needs them."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from support import wait_until

from bookkeeper import EndpointClient, EndpointInfo, resolve_zk
from bookkeeper.ground import list_endpoints

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("pyspark", "pandas", "fastapi", "uvicorn", "matplotlib", "confluent_kafka", "fastavro", "pyarrow")
# printed once the example's serve(block=True) has returned (SIGTERM): every module it imported
REPORT = f"\nimport json, sys\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"


def readme_example() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Using the bookkeeper") :]
    return re.search(r"```python\n(.*?)```", section, re.S)[1]  # type: ignore[index]


def run_example(python: str, zk_hosts: str, cwd: Path) -> list[str]:
    """Run the README's example with ``python`` in ``cwd`` (not the repository's root, which
    ``python -c`` would put first on its path) as an application, read its variables from its
    registered endpoint, stop it; the heavy modules it had imported."""
    context = f"light-{uuid.uuid4().hex[:8]}"
    env = {"ARTIMON_ZK": zk_hosts, "ARTIMON_CONTEXT": context, "PATH": "/usr/bin:/bin"}
    app = subprocess.Popen(
        [python, "-c", readme_example() + REPORT],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    connect, layout = resolve_zk(zk_hosts)
    zk = KazooClient(hosts=connect)
    zk.start(timeout=30)
    try:
        found: list[EndpointInfo] = []

        def registered() -> bool:
            assert app.poll() is None, app.communicate()[1]
            found[:] = [info for info in list_endpoints(zk, layout) if info.context == context]
            return bool(found)

        wait_until(registered, 30, f"the example's endpoint under /contexts/{context}")
        with EndpointClient(found[0].host, found[0].port) as client:
            values = {sample.name: sample.value for sample in client.snapshot().samples()}
        assert values == {"http.requests": 1, "pool.usage": 0.42}
        app.send_signal(signal.SIGTERM)
        out, err = app.communicate(timeout=30)
    finally:
        if app.poll() is None:
            app.kill()
            app.communicate()
        zk.stop()
        zk.close()
    assert app.returncode == 0, err
    return list(json.loads(out))


def test_the_readme_example_serves_without_the_platform_modules(zk_hosts: str, tmp_path: Path) -> None:
    assert run_example(sys.executable, zk_hosts, tmp_path) == []


@pytest.mark.slow
def test_an_install_without_extras_is_the_app_library_alone(zk_hosts: str, tmp_path: Path) -> None:
    source = tmp_path / "artimon"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source)
    for package in ("bookkeeper", "collector_agent", "vhms", "query_dsl", "spark_jobs", "artimon"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=60)
    pip = [venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", source]
    subprocess.run(pip, check=True, timeout=300)
    listed = subprocess.run(
        [venv / "bin" / "python", "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    )
    installed = {package["name"].lower() for package in json.loads(listed.stdout)}
    assert {"thriftpy2", "kazoo", "numpy"} <= installed
    assert not installed & {
        "pyspark",
        "pandas",
        "fastapi",
        "uvicorn",
        "matplotlib",
        "confluent-kafka",
        "fastavro",
    }
    assert run_example(str(venv / "bin" / "python"), zk_hosts, tmp_path) == []
    command = subprocess.run([venv / "bin" / "artimon", "up"], capture_output=True, text=True, timeout=60)
    assert command.returncode == 1
    assert command.stderr.startswith("artimon up needs the platform: pip install 'artimon[platform]'")
    assert "Traceback" not in command.stderr
