"""Notifiers against real servers: mail through aiosmtpd (plain, and STARTTLS with a login),
webhooks through uvicorn (failing first, to see the retries and their backoff), commands
as real processes; and the dispatcher keeping a stuck notifier from holding up others."""

from __future__ import annotations

import json
import re
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterator
from email import message_from_bytes
from pathlib import Path
from typing import Any

import pytest
import trustme
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP as SMTPServer
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword, Session
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from artimon.servers import free_port
from bookkeeper.ground import BackgroundServer
from query_dsl.alerts import (
    Alert,
    AlertState,
    CommandNotifier,
    Dispatcher,
    EmailNotifier,
    Notification,
    NotifyError,
    Receiver,
    RetryPolicy,
    WebhookNotifier,
)

T = 1_700_000_000_000


def notification(status: str = "firing", count: int = 1) -> Notification:
    alerts = tuple(
        Alert(
            rule="DiskFull",
            series=f"disk.used{{host=db{i},volume=/}}",
            labels={"host": f"db{i}", "volume": "/", "severity": "page", "alertname": "DiskFull"},
            state=AlertState.FIRING if status == "firing" else AlertState.RESOLVED,
            value=0.93,
            active_since_ms=T,
            fired_ms=T + 300_000,
            resolved_ms=T + 900_000 if status == "resolved" else None,
            annotations={"summary": f"db{i}:/ is 93% full"},
        )
        for i in range(count)
    )
    return Notification("DiskFull", status, alerts, T + 300_000)


# -- e-mail ---------------------------------------------------------------------------------


class Mailbox:
    def __init__(self) -> None:
        self.envelopes: list[Envelope] = []

    async def handle_DATA(self, server: SMTPServer, session: Session, envelope: Envelope) -> str:
        self.envelopes.append(envelope)
        return "250 OK"


@pytest.fixture
def smtp() -> Iterator[tuple[Controller, Mailbox]]:
    mailbox = Mailbox()
    controller = Controller(mailbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield controller, mailbox
    controller.stop()


def test_email_is_delivered_with_subject_body_and_recipients(smtp: tuple[Controller, Mailbox]) -> None:
    controller, mailbox = smtp
    notifier = EmailNotifier(
        "ops",
        to=["ops@example.com", "oncall@example.com"],
        sender="Artimon <artimon@example.com>",
        smtp_host="127.0.0.1",
        smtp_port=controller.port,
        timeout=10,
    )
    notifier.send(notification(count=2))
    notifier.send(notification("resolved"))
    firing, resolved = mailbox.envelopes
    assert firing.mail_from == "artimon@example.com"
    assert firing.rcpt_tos == ["ops@example.com", "oncall@example.com"]
    assert isinstance(firing.content, bytes)
    message = message_from_bytes(firing.content)
    assert (
        message["Subject"] == "[FIRING:2] DiskFull" and message["To"] == "ops@example.com, oncall@example.com"
    )
    body = message.get_payload(decode=True).decode()  # type: ignore[union-attr]
    assert "disk.used{host=db0,volume=/}  value 0.93  active since 2023-11-14T22:13:20Z" in body
    assert "  summary: db1:/ is 93% full" in body and "alertname=DiskFull, host=db1" in body
    assert isinstance(resolved.content, bytes)
    assert message_from_bytes(resolved.content)["Subject"] == "[RESOLVED] DiskFull"


def test_email_over_starttls_with_a_login(tmp_path: Path) -> None:
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    logins: list[tuple[bytes, bytes]] = []

    def authenticate(
        server: SMTPServer, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        assert isinstance(data, LoginPassword)
        logins.append((data.login, data.password))
        return AuthResult(success=data.password == b"s3cret", handled=False)

    mailbox = Mailbox()
    controller = Controller(
        mailbox,
        hostname="127.0.0.1",
        port=free_port(),
        tls_context=server_context,
        require_starttls=True,
        authenticator=authenticate,
        auth_require_tls=True,
    )
    controller.start()
    try:

        def notifier(**login: Any) -> EmailNotifier:
            return EmailNotifier(
                "ops",
                to=["ops@example.com"],
                sender="artimon@example.com",
                smtp_host="127.0.0.1",
                smtp_port=controller.port,
                starttls=True,
                timeout=10,
                **login,
            )

        notifier(ca_file=str(ca_file), username="artimon", password="s3cret").send(notification())
        assert len(mailbox.envelopes) == 1 and logins == [(b"artimon", b"s3cret")]
        wrong = notifier(ca_file=str(ca_file), username="artimon", password="nope")
        with pytest.raises(NotifyError, match="answered 535") as caught:
            wrong.send(notification())
        assert not caught.value.retryable
        with pytest.raises(NotifyError, match="CERTIFICATE_VERIFY_FAILED") as caught:
            notifier().send(notification())
        assert caught.value.retryable
    finally:
        controller.stop()
    assert len(mailbox.envelopes) == 1


def test_email_to_a_closed_port_is_a_retryable_error() -> None:
    notifier = EmailNotifier(
        "ops", to=["a@b.c"], sender="a@b.c", smtp_host="127.0.0.1", smtp_port=free_port()
    )
    with pytest.raises(NotifyError, match=r"cannot send mail through 127\.0\.0\.1") as caught:
        notifier.send(notification())
    assert caught.value.retryable


# -- webhook --------------------------------------------------------------------------------


class Hook:
    """An HTTP endpoint that fails its first ``fail_first`` requests with ``status``."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self.bodies: list[Any] = []
        self.headers: list[dict[str, str]] = []
        self.fail_first = 0
        self.status = 503
        self.lock = threading.Lock()
        self.app = FastAPI()

        @self.app.post("/hook")
        async def hook(request: Request) -> JSONResponse:
            body = await request.json()
            with self.lock:
                self.arrivals.append(time.monotonic())
                self.bodies.append(body)
                self.headers.append(dict(request.headers))
                failing = len(self.arrivals) <= self.fail_first
            return JSONResponse({"ok": not failing}, status_code=self.status if failing else 200)

        @self.app.post("/slow")
        async def slow() -> JSONResponse:
            import asyncio

            await asyncio.sleep(3)
            return JSONResponse({})


@pytest.fixture(scope="module")
def hook_server() -> Iterator[tuple[BackgroundServer, Hook]]:
    hook = Hook()
    server = BackgroundServer(hook.app, "127.0.0.1", 0, name="test-webhook")
    server.start()
    yield server, hook
    server.stop()


@pytest.fixture
def hook(hook_server: tuple[BackgroundServer, Hook]) -> Iterator[tuple[str, Hook]]:
    server, endpoint = hook_server
    with endpoint.lock:
        endpoint.arrivals.clear()
        endpoint.bodies.clear()
        endpoint.headers.clear()
        endpoint.fail_first, endpoint.status = 0, 503
    yield server.url, endpoint


def test_webhook_retries_with_exponential_backoff(hook: tuple[str, Hook], wait: Callable[..., None]) -> None:
    url, endpoint = hook
    endpoint.fail_first = 2
    notifier = WebhookNotifier("hook", f"{url}/hook", timeout=10, headers={"Authorization": "Bearer t0k"})
    dispatcher = Dispatcher({"hook": Receiver("hook", notifier, RetryPolicy(retries=3, backoff_s=0.3))})
    dispatcher.start()
    try:
        dispatcher.submit(notification(count=2), ["hook"])
        assert dispatcher.flush(60)
    finally:
        dispatcher.close()
    stats = dispatcher.stats()["hook"]
    assert (stats.delivered, stats.failed_attempts, stats.given_up) == (1, 2, 0)
    assert "answered 503" in (stats.last_error or "")
    first, second, third = endpoint.arrivals
    assert second - first >= 0.3 * 0.95 and third - second >= 0.6 * 0.95  # 0.3 s, then doubled
    body = endpoint.bodies[-1]
    assert body["rule"] == "DiskFull" and body["status"] == "firing" and body["version"] == 1
    assert [a["labels"]["host"] for a in body["alerts"]] == ["db0", "db1"]
    assert body["alerts"][0]["annotations"]["summary"] == "db0:/ is 93% full"
    assert endpoint.headers[-1]["authorization"] == "Bearer t0k"


def test_webhook_4xx_is_not_retried_and_retries_are_capped(hook: tuple[str, Hook]) -> None:
    url, endpoint = hook
    endpoint.fail_first, endpoint.status = 100, 400
    notifier = WebhookNotifier("hook", f"{url}/hook", timeout=10)
    with pytest.raises(NotifyError, match=re.escape('answered 400: {"ok":false}')) as caught:
        notifier.send(notification())
    assert not caught.value.retryable
    endpoint.status = 500
    dispatcher = Dispatcher({"hook": Receiver("hook", notifier, RetryPolicy(retries=2, backoff_s=0.05))})
    dispatcher.start()
    dispatcher.submit(notification(), ["hook"])
    assert dispatcher.flush(60)
    dispatcher.close()
    stats = dispatcher.stats()["hook"]
    assert (stats.delivered, stats.failed_attempts, stats.given_up) == (0, 3, 1)
    assert len(endpoint.arrivals) == 1 + 3
    assert RetryPolicy(retries=10, backoff_s=1, max_backoff_s=5).delay_s(8) == 5.0


def test_webhook_timeout_and_refused_connection(hook: tuple[str, Hook]) -> None:
    url, _ = hook
    with pytest.raises(NotifyError, match="ReadTimeout") as caught:
        WebhookNotifier("hook", f"{url}/slow", timeout=0.3).send(notification())
    assert caught.value.retryable
    with pytest.raises(NotifyError, match="ConnectError"):
        WebhookNotifier("hook", f"http://127.0.0.1:{free_port()}/hook", timeout=5).send(notification())


# -- command --------------------------------------------------------------------------------


def test_command_gets_the_json_on_stdin_and_the_environment(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    script = (
        "import os, sys, json\n"
        "env = {k: v for k, v in os.environ.items() if k.startswith('ARTIMON_')}\n"
        "json.dump({'env': env, 'stdin': json.load(sys.stdin)}, open(sys.argv[1], 'w'))\n"
    )
    CommandNotifier("script", [sys.executable, "-c", script, str(out)], timeout=30).send(
        notification("resolved")
    )
    written = json.loads(out.read_text())
    assert written["env"] == {
        "ARTIMON_ALERT_RULE": "DiskFull",
        "ARTIMON_ALERT_STATUS": "resolved",
        "ARTIMON_ALERT_COUNT": "1",
        "ARTIMON_NOTIFIER": "script",
    }
    assert written["stdin"]["alerts"][0]["resolved_ms"] == T + 900_000


def test_command_failures(tmp_path: Path) -> None:
    failing = CommandNotifier(
        "script", [sys.executable, "-c", "import sys; sys.stderr.write('x' * 2000 + 'boom'); sys.exit(3)"]
    )
    with pytest.raises(NotifyError, match=r"exited with status 3: x+boom$") as caught:
        failing.send(notification())
    assert caught.value.retryable and len(str(caught.value)) < 700
    started = time.monotonic()
    slow = CommandNotifier("script", [sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.5)
    with pytest.raises(NotifyError, match=r"ran longer than 0\.5 s and was killed"):
        slow.send(notification())
    assert time.monotonic() - started < 30
    with pytest.raises(NotifyError, match="cannot run") as caught:
        CommandNotifier("script", [str(tmp_path / "no-such-program")]).send(notification())
    assert not caught.value.retryable
    deaf = CommandNotifier("script", [sys.executable, "-c", "pass"])  # never reads its stdin
    deaf.send(notification(count=500))


# -- dispatcher -----------------------------------------------------------------------------


class Stuck:
    """A notifier that blocks until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def send(self, notification: Notification) -> None:
        self.entered.set()
        self.release.wait(60)

    def close(self) -> None:
        self.release.set()


class Collecting:
    def __init__(self) -> None:
        self.received: list[Notification] = []

    def send(self, notification: Notification) -> None:
        self.received.append(notification)

    def close(self) -> None:
        """Nothing to close."""


class Broken:
    def send(self, notification: Notification) -> None:
        raise RuntimeError("a bug")

    def close(self) -> None:
        raise RuntimeError("another bug")


def test_a_stuck_notifier_blocks_nobody_and_a_full_queue_drops_and_counts(wait: Callable[..., None]) -> None:
    stuck, collecting = Stuck(), Collecting()
    dispatcher = Dispatcher(
        {
            "stuck": Receiver("stuck", stuck),
            "ok": Receiver("ok", collecting),
            "broken": Receiver("broken", Broken(), RetryPolicy(retries=5)),
        },
        queue_size=1,
    )
    dispatcher.start()
    dispatcher.submit(notification(), ["stuck", "ok", "broken"])
    assert stuck.entered.wait(30)
    wait(lambda: len(collecting.received) == 1, what="the first notification to the healthy one")
    started = time.monotonic()
    for _ in range(3):
        dispatcher.submit(notification(), ["stuck"])  # one waits in the queue, two are dropped
    assert time.monotonic() - started < 10.0  # submit never blocks (a blocked one would wait forever)
    for count in (2, 3, 4):  # meanwhile the healthy notifier goes on
        dispatcher.submit(notification(), ["ok"])
        wait(lambda n=count: len(collecting.received) == n, what=f"notification {count} to the healthy one")
    wait(lambda: dispatcher.stats()["broken"].given_up == 1, what="the broken notifier to give up")
    stats = dispatcher.stats()
    assert stats["stuck"].dropped == 2 and stats["ok"].dropped == 0
    assert (stats["broken"].given_up, stats["broken"].failed_attempts) == (1, 1)  # a bug is not retried
    assert stats["broken"].last_error == "RuntimeError: a bug"
    assert not dispatcher.flush(0.2)
    stuck.release.set()
    assert dispatcher.flush(30)
    dispatcher.close()
    assert dispatcher.stats()["stuck"].delivered == 2
    with pytest.raises(KeyError, match="no notifier named 'nope'"):
        dispatcher.submit(notification(), ["nope"])


def test_close_drops_what_cannot_be_delivered_in_time(wait: Callable[..., None]) -> None:
    stuck = Stuck()
    dispatcher = Dispatcher({"stuck": Receiver("stuck", stuck)}, queue_size=10)
    dispatcher.start()
    for _ in range(3):
        dispatcher.submit(notification(), ["stuck"])
    assert stuck.entered.wait(30)
    started = time.monotonic()
    dispatcher.close(timeout=0.5)
    assert time.monotonic() - started < 10
    assert dispatcher.stats()["stuck"].dropped == 2  # the queued two
    wait(lambda: dispatcher.stats()["stuck"].delivered == 1, what="the send under way (released by close)")
