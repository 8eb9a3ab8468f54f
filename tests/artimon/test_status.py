"""``artimon status``'s parts against real servers of this session: the service payload and
its refusals, probes bounded in time and size (a silent server, garbage, a flood), the view
of a real ZooKeeper holding registrations (a dead API named down, an emptied kind, an
agent group with no agent alive, two replicas of a shard that disagree), the text and the
page, the command's exit status."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from kazoo.client import KazooClient

from artimon.servers import free_port
from artimon.status import ServiceInfo, SiteStatus, collect, register_service, render_html, render_text
from artimon.status.probes import probe_agent, probe_service
from bookkeeper.zk import resolve_zk
from query_dsl.testing import demo_store
from vhms.server import Store, VhmsService

GOOD = ServiceInfo("api", "127.0.0.1:8080", "http://127.0.0.1:8080", "127.0.0.1", 1, [], 0)


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"kind": "mystery"}, "kind"),
        ({"name": "a b"}, "name"),
        ({"name": 3}, "name"),
        ({"host": ""}, "host"),
        ({"url": "file:///etc/passwd"}, "url"),
        ({"url": "http://" + "a" * 2000}, "url"),
        ({"members": "default/a"}, "members"),
        ({"members": ["a"] * 300}, "members"),
        ({"started": -5}, "started"),
        ({"started": True}, "started"),
        ({"expect": "3"}, "expect"),
    ],
)
def test_a_service_payload_is_refused_with_what_is_wrong(change: dict[str, object], refusal: str) -> None:
    raw = {**json.loads(GOOD.to_json()), **change}
    with pytest.raises(ValueError, match=refusal):
        ServiceInfo.from_json(json.dumps(raw).encode())


@pytest.mark.parametrize("data", [b"", b"[]", b"{", b"\xff\xfe", b"{}", b"x" * (70 * 1024)])
def test_garbage_payloads_are_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        ServiceInfo.from_json(data)


def test_a_payload_round_trips() -> None:
    assert ServiceInfo.from_json(GOOD.to_json()) == GOOD


class _Answers(BaseHTTPRequestHandler):
    """``/flood`` more than a probe reads, ``/garbage`` not JSON, anything else a 500."""

    def do_GET(self) -> None:
        body = {"/flood/metrics": b"[" + b"1," * (3 << 20) + b"1]", "/garbage/metrics": b"\x00not json"}
        data = body.get(self.path)
        self.send_response(500 if data is None else 200)
        self.send_header("Content-Length", str(len(data or b"")))
        self.end_headers()
        self.wfile.write(data or b"")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def _agent(url: str) -> ServiceInfo:
    return ServiceInfo("agent", url.split("://")[1], url, "127.0.0.1", 1, [], 0)


def test_probes_are_bounded_in_time_and_size_and_say_why(http_server: str) -> None:
    with httpx.Client() as http:
        _probes_are_bounded(http, http_server)


def _probes_are_bounded(http: httpx.Client, http_server: str) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections (the kernel does), never answers
    try:
        started = time.monotonic()
        hung = probe_agent(http, _agent(f"http://127.0.0.1:{silent.getsockname()[1]}"), 0.5, 0)
        took = time.monotonic() - started
    finally:
        silent.close()
    assert not hung.up and hung.error == "no answer within 0.5 s"
    assert took < 5, f"a silent agent held the probe {took:.1f} s"

    flood = probe_agent(http, _agent(f"{http_server}/flood"), 5.0, 0)
    assert not flood.up and flood.error.startswith("answer over ")
    garbage = probe_agent(http, _agent(f"{http_server}/garbage"), 5.0, 0)
    assert not garbage.up and garbage.error.startswith("not JSON")
    failing = probe_agent(http, _agent(f"{http_server}/other"), 5.0, 0)
    assert not failing.up and failing.error == "HTTP 500"
    closed = probe_service(
        http, ServiceInfo("spark", f"127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}", "h", 1), 1.0
    )
    assert not closed.up and closed.error.startswith("cannot connect")


def test_the_view_of_a_real_zookeeper_names_what_is_gone(zk_hosts: str) -> None:
    connect, layout = resolve_zk(zk_hosts)
    dead = f"127.0.0.1:{free_port()}"
    api = register_service(zk_hosts, "api", dead, f"http://{dead}")
    gone = register_service(zk_hosts, "spark", dead, f"http://{dead}", expect=2)
    client = KazooClient(connect)
    client.start(timeout=30)
    try:
        client.ensure_path(f"{layout.root}/agents/default")  # a group whose last agent left
        client.create(f"{layout.root}/contexts/app/127.0.0.1:1:u1", b"{}", ephemeral=True, makepath=True)
        api.registered.wait(30)
        gone.registered.wait(30)
        gone.close()
        status = collect(zk_hosts, timeout=1.0)
    finally:
        api.close()
        client.stop()
        client.close()
    assert status.registry == "" and status.leader == status.zookeeper[0].address
    assert status.zookeeper[0].up and status.zookeeper[0].mode == "standalone"
    assert [(g.group, g.members, g.endpoints, g.unowned) for g in status.groups] == [("default", [], 1, 1)]
    why = {f.component: f.why for f in status.degraded}
    assert why["agent group default"] == "no agent alive: 1 endpoints unpolled"
    assert why[f"api {dead}"].startswith("down: cannot connect")
    assert why["spark"].startswith("none alive: /services/spark is empty")
    assert not status.healthy and status.took_s < 10
    text = render_text(status)
    assert "DEGRADED (3)" in text
    assert f"  api {dead}: down: cannot connect" in text
    page = render_html(status)
    assert '<p id="verdict" class="bad">degraded</p>' in page and "&lt;" not in page.split("<pre")[0]


def test_the_command_says_a_dead_zookeeper_at_once_with_exit_status_1() -> None:
    port = free_port()
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "artimon", "status", "--zk", f"127.0.0.1:{port}", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    view = json.loads(done.stdout)
    assert view["zookeeper"] == [
        {
            "address": f"127.0.0.1:{port}",
            "up": False,
            "mode": "",
            "znodes": None,
            "error": "connection refused: not running",
        }
    ]
    assert view["leader"] is None and not view["healthy"]
    assert view["took_s"] < 5, view["took_s"]  # the session's wait is --timeout, not kazoo's retries
    assert done.stderr == "", "a dead member is the view's news, not a warning"
    assert time.monotonic() - started < 60


def test_an_empty_status_renders() -> None:
    empty = SiteStatus(0, 0.0, "127.0.0.1:2181/artimon", [], None, "")
    assert empty.healthy and "healthy" in render_text(empty) and 'class="ok"' in render_html(empty)


def test_replicas_of_a_shard_that_disagree_are_named(zk_hosts: str) -> None:
    """Two real VHMS services registered as replicas of one shard, one holding the demo's
    series and one empty (a replica restarted empty, not caught up yet)."""
    now = int(time.time() * 1000)
    full, empty = (
        VhmsService(store, shard="s1", http_port=0) for store in (demo_store(now), Store("60s:60"))
    )
    for service in (full, empty):
        service.start(zk_hosts)
    try:
        for service in (full, empty):
            assert service.registration is not None and service.registration.registered.wait(30)
        status = collect(zk_hosts, timeout=2.0)
    finally:
        for service in (full, empty):
            service.stop()
    (shard,) = status.shards
    assert [r.up for r in shard.replicas] == [True, True] and not shard.agree
    assert sorted(r.series for r in shard.replicas if r.series is not None) == [0, full.store.series]
    (finding,) = [f for f in status.degraded if f.component == "vhms shard s1"]
    assert finding.why.startswith("replicas disagree: ") and f"{full.store.series} series" in finding.why
    assert "REPLICAS DISAGREE" in render_text(status)
