"""TLS on the endpoint, against certificates of a throwaway CA (trustme): a TLS client reads
a TLS endpoint, with and without client certificates; a plain client, a client that trusts
another CA, a TLS client of a plain endpoint and a silent handshake all fail cleanly,
counted, leaving no thread behind."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support import TlsFiles

from bookkeeper import (
    Bookkeeper,
    EndpointClient,
    EndpointUnavailableError,
    TlsConfigError,
    TlsError,
    WireError,
    read_endpoint,
)
from bookkeeper.wire import FramedThriftServer, ServerLimits, client_context, endpoint_thrift, server_context


class _Handler:
    def __init__(self, bk: Bookkeeper) -> None:
        self.bk = bk

    def ping(self) -> int:
        return 1

    def snapshot(self) -> Any:
        return self.bk.snapshot().to_thrift()


@pytest.fixture
def tls_server(tls_files: TlsFiles) -> Iterator[Callable[..., FramedThriftServer]]:
    started: list[FramedThriftServer] = []
    bk = Bookkeeper("tls", environ={})
    bk.integer("secret").set(42)

    def start(client_ca: bool = False, tls: bool = True, **limits: Any) -> FramedThriftServer:
        context = server_context(tls_files.server, client_ca=tls_files.ca if client_ca else None)
        server = FramedThriftServer(
            endpoint_thrift.BookkeeperEndpoint,
            _Handler(bk),
            limits=ServerLimits(**limits),
            ssl_context=context if tls else None,
            name=f"tls-test-{len(started)}",
        )
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def test_a_tls_client_reads_a_tls_endpoint(tls_files: TlsFiles) -> None:
    bk = Bookkeeper("tls-app", environ={})
    bk.integer("secret").set(42)
    server = bk.serve(register=False, ssl_context=server_context(tls_files.server))
    try:
        context = client_context(tls_files.ca)  # checks that the certificate names 127.0.0.1
        batch = read_endpoint(server.host, server.port, ssl_context=context)
        assert {s.name: s.value for s in batch.samples()} == {"secret": 42}
        with EndpointClient(server.host, server.port, ssl_context=context, server_hostname="localhost") as c:
            assert c.ping() == 1 and len(c.snapshot()) == 1 and len(c.snapshot()) == 1
        assert server.stats["connections"] == 2 and "tls_failures" not in server.stats
    finally:
        bk.close()


def test_mutual_tls_serves_a_client_with_a_certificate_and_refuses_one_without(
    tls_server: Callable[..., FramedThriftServer], tls_files: TlsFiles, wait: Callable[..., None]
) -> None:
    server = tls_server(client_ca=True)
    with EndpointClient(
        server.host, server.port, ssl_context=client_context(tls_files.ca, certfile=tls_files.client)
    ) as client:
        assert client.ping() == 1
    with (
        EndpointClient(
            server.host, server.port, ssl_context=client_context(tls_files.ca), timeout=5
        ) as anonymous,
        pytest.raises(WireError),  # TLS 1.3: the refusal comes with the first read
    ):
        anonymous.ping()
    wait(lambda: server.stats["tls_failures"] == 1, 5, "the refusal counted")


def test_a_plain_client_to_a_tls_endpoint_fails_cleanly(
    tls_server: Callable[..., FramedThriftServer], wait: Callable[..., None]
) -> None:
    server = tls_server()
    for _ in range(5):
        with (
            EndpointClient(server.host, server.port, timeout=5) as plain,
            pytest.raises(EndpointUnavailableError),
        ):
            plain.ping()
    wait(
        lambda: server.stats["tls_failures"] == 5 and server.open_connections == 0,
        5,
        "the failures counted and their connections closed",
    )
    wait(
        lambda: (
            [t.name for t in threading.enumerate() if t.name.startswith(f"{server.name}-")]
            == [f"{server.name}-accept-{server.port}"]
        ),
        5,
        "no connection thread left",
    )


def test_a_client_that_trusts_another_ca_is_refused(
    tls_server: Callable[..., FramedThriftServer], tls_files: TlsFiles, wait: Callable[..., None]
) -> None:
    server = tls_server()
    with (
        EndpointClient(server.host, server.port, ssl_context=client_context(tls_files.other_ca)) as client,
        pytest.raises(TlsError, match="certificate verify failed"),
    ):
        client.ping()
    wait(lambda: server.stats["tls_failures"] == 1, 5, "the server to count the aborted handshake")
    wait(lambda: server.threads == 0, 5, "no connection thread left")


def test_a_certificate_that_names_another_host_is_refused(
    tls_server: Callable[..., FramedThriftServer], tls_files: TlsFiles
) -> None:
    server = tls_server()
    context = client_context(tls_files.ca)
    with (
        EndpointClient(
            server.host, server.port, ssl_context=context, server_hostname="db.example.net"
        ) as client,
        pytest.raises(TlsError, match=r"db\.example\.net"),
    ):
        client.ping()
    unchecked = client_context(tls_files.ca, check_hostname=False)
    with EndpointClient(
        server.host, server.port, ssl_context=unchecked, server_hostname="db.example.net"
    ) as c:
        assert c.ping() == 1


def test_a_tls_client_to_a_plain_endpoint_fails_cleanly(
    tls_server: Callable[..., FramedThriftServer], tls_files: TlsFiles
) -> None:
    server = tls_server(tls=False)
    with (
        EndpointClient(
            server.host, server.port, ssl_context=client_context(tls_files.ca), timeout=5
        ) as client,
        pytest.raises(WireError, match="TLS handshake"),  # a reset, or an end-of-file
    ):
        client.ping()
    assert server.stats["bad_frames"] == 1  # its ClientHello read as a frame length


def test_a_trickled_handshake_is_cut_at_the_first_frame_timeout(
    tls_server: Callable[..., FramedThriftServer],
) -> None:
    """A socket timeout bounds each read of a handshake, not the handshake: the deadline does."""
    server = tls_server(first_frame_timeout=1.0)
    with socket.create_connection((server.host, server.port)) as sock:
        sock.sendall(b"\x16\x03\x01\x02\x00")  # a ClientHello record header, then a byte at a time
        started = time.monotonic()
        cut = False
        while not cut and time.monotonic() - started < 5:
            try:
                sock.sendall(b"\x01")
                sock.settimeout(0.1)
                cut = sock.recv(1) == b""
            except TimeoutError:
                continue
            except OSError:
                cut = True
        assert cut and 0.9 < time.monotonic() - started < 3
    assert server.stats["silent_closed"] == 1


def test_files_that_do_not_load_are_named(tls_files: TlsFiles, tmp_path: Any) -> None:
    with pytest.raises(TlsConfigError, match=r"missing\.pem"):
        server_context(tmp_path / "missing.pem")
    with pytest.raises(TlsConfigError, match=r"ca\.pem"):
        server_context(tls_files.ca)  # a certificate without its key
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    with pytest.raises(TlsConfigError, match=r"garbage\.pem"):
        client_context(garbage)
