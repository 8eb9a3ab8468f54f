"""Known but not live (issue 29): a component that registered once and is not registered now
is *missing* in ``artimon status``, not forgotten. On the session's real ZooKeeper: a VHMS
member killed -9 is named missing (with its last address) once its session expired, one
stopped cleanly is not listed at all, ``--forget`` forgets the missing one (and refuses a
live one, an unknown one, an id that is not one); garbage in a known record is named, never a
crash; ``artimon up``'s start on a ZooKeeper of its own forgets everything its killed last run
left known. Waits poll the view with deadlines (a loaded machine takes its time), never sleep."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from support import wait_until

from artimon.servers import free_port
from artimon.status import collect, forget, forget_everything
from artimon.status.model import component_id, split_component_id
from artimon.testing import start_ready_process
from bookkeeper.exceptions import MalformedFrameError
from bookkeeper.zk import KnownRecord, resolve_zk

LOADED = 180.0  # seconds: generous deadlines for a machine at load 10+


def _artimon(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "artimon", *arguments], capture_output=True, text=True, timeout=120
    )


def _view(zk: str, *, command: bool = False) -> dict[str, Any]:
    """The view as ``artimon status --json`` prints it (with ``command``, printed by it)."""
    if not command:
        return collect(zk, timeout=5.0).to_json()
    done = _artimon("status", "--zk", zk, "--json", "--timeout", "5")
    assert "Traceback" not in done.stderr, done.stderr
    view: dict[str, Any] = json.loads(done.stdout)
    assert done.returncode == (0 if view["healthy"] else 1), done.stderr
    return view


def _vhms(zk: str, shard: str, directory: Path) -> tuple[subprocess.Popen[str], str]:
    """``artimon vhms`` of ``shard`` on a port of its own: the process and its member's name."""
    port = free_port()
    command = [sys.executable, "-m", "artimon", "vhms", "--zk", zk, "--shard", shard, "--port", str(port)]
    command += ["--data-dir", str(directory), "--snapshot-every", "0"]
    process, _ = start_ready_process(command, directory.with_suffix(".log"), "serving", LOADED)
    return process, f"127.0.0.1:{port}"


def test_component_ids_split_back_and_garbage_ids_are_refused() -> None:
    for parent in ("site", "a/b", "100%", "%2F"):
        assert split_component_id(component_id("agents", parent, "h6/x")) == ("agents", parent, "h6/x")
    for bad in ("", "agents", "agents/site", "agents//x", "contexts/a/b", "vhms/s1/" + "x" * 2000):
        with pytest.raises(ValueError, match="is not a component id"):
            split_component_id(bad)


@pytest.mark.parametrize(
    "data",
    [b"", b"[]", b"{", b"\xff\xfe", b"{}", b'{"registered": -1, "payload": "{}"}', b'{"registered": 1}'],
)
def test_garbage_known_records_are_refused(data: bytes) -> None:
    with pytest.raises(MalformedFrameError):
        KnownRecord.from_json(data)


def test_a_killed_member_is_missing_a_stopped_one_is_not_and_forget_forgets(
    zk_hosts: str, tmp_path: Path
) -> None:
    killed, killed_name = _vhms(zk_hosts, "a", tmp_path / "a")
    stopped, stopped_name = _vhms(zk_hosts, "b", tmp_path / "b")
    gone, left = f"vhms/a/{killed_name}", f"vhms/b/{stopped_name}"
    try:
        wait_until(
            lambda: sum(len(s["replicas"]) for s in _view(zk_hosts)["shards"]) == 2, LOADED, "both registered"
        )
        refused = _artimon("status", "--zk", zk_hosts, "--forget", gone)
        assert refused.returncode == 1 and "registered now, not forgotten" in refused.stderr, refused

        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=60)
        stopped.send_signal(signal.SIGTERM)
        assert stopped.wait(timeout=120) == 0
        views: list[dict[str, Any]] = []

        def named_missing() -> bool:
            views.append(_view(zk_hosts))
            return bool(views[-1]["missing"]) and not any(s["replicas"] for s in views[-1]["shards"])

        wait_until(named_missing, LOADED, "the killed member missing once its session expired")
        views.append(_view(zk_hosts, command=True))
    finally:
        for process in (killed, stopped):
            if process.poll() is None:
                process.kill()
                process.wait(timeout=60)
            assert process.stdout is not None
            process.stdout.close()
    view = views[-1]
    ((missing,),) = [view["missing"]]
    assert missing["id"] == gone and missing["component"] == f"vhms shard a replica {killed_name}"
    assert missing["address"].startswith(f"{killed_name} (http://127.0.0.1:")
    assert missing["registered"] > 0 and not view["healthy"]
    why = {f["component"]: f["why"] for f in view["degraded"]}
    assert why[missing["component"]].startswith("missing: known, not registered now")
    assert f"artimon status --forget {gone}" in why[missing["component"]]
    assert not any(left in f["component"] or left in f["why"] for f in view["degraded"]), view["degraded"]
    text = _artimon("status", "--zk", zk_hosts).stdout
    assert f"  {gone}" in text and "missing (known, not registered now" in text

    forgotten = _artimon("status", "--zk", zk_hosts, "--forget", gone)
    assert (forgotten.returncode, forgotten.stdout) == (0, f"forgot {gone}\n"), forgotten.stderr
    assert _view(zk_hosts)["missing"] == []
    again = _artimon("status", "--zk", zk_hosts, "--forget", gone, "--forget", left)
    assert again.returncode == 1 and again.stderr == f"{gone}: not known\n{left}: not known\n"
    nothing = _artimon("status", "--zk", zk_hosts, "--forget-missing")
    assert (nothing.returncode, nothing.stdout) == (0, "nothing missing: nothing forgotten\n")


def test_garbage_in_known_records_is_named_not_a_crash(zk_hosts: str) -> None:
    connect, layout = resolve_zk(zk_hosts)
    client = KazooClient(connect)
    client.start(timeout=30)
    record = KnownRecord(1, "not a service's payload").to_json()
    try:
        client.create(layout.known_record(layout.service("api", "127.0.0.1:1")), b"\xff{", makepath=True)
        client.create(layout.known_record(layout.service("api", "127.0.0.1:2")), record, makepath=True)
        agent = layout.known_record(layout.agent("site", "h6"))
        client.create(
            agent, KnownRecord(1, '{"host": "h6", "started": 1, "source": "s"}').to_json(), makepath=True
        )
        view = _view(zk_hosts, command=True)
        forgotten = _artimon("status", "--zk", zk_hosts, "--forget-missing")
        left = client.get_children(f"{layout.known}/agents/site")
        everything = forget_everything(zk_hosts)  # artimon up's start on a ZooKeeper of its own
        assert client.exists(layout.known) is None
    finally:
        client.stop()
        client.close()
    why = [f["why"] for f in view["degraded"] if f["component"] == "registry"]
    assert why == [
        "known record services/api/127.0.0.1:1 does not parse: known record is not JSON: b'\\xff{'",
        "known record services/api/127.0.0.1:2 does not parse: service payload is not JSON: "
        'b"not a service\'s payload"',
    ]
    assert [m["id"] for m in view["missing"]] == ["agents/site/h6"]
    assert (forgotten.returncode, forgotten.stdout, left) == (0, "forgot agents/site/h6\n", []), (
        forgotten.stderr
    )
    assert everything == ["services/api/127.0.0.1:1", "services/api/127.0.0.1:2"]
    with pytest.raises(ValueError, match="'contexts/app/x' is not a component id"):
        forget(zk_hosts, ["contexts/app/x"])
