"""What a web configuration file asks of every request, as an ASGI middleware in front of
the app (exporter-toolkit's order): the rate limit (429), the response headers, then
basic authentication (401 with ``WWW-Authenticate: Basic``).

bcrypt is slow on purpose (about 70 ms at cost 10), so it runs on worker threads of its own
(:data:`BCRYPT_THREADS`: a flood of wrong passwords waits for them, and leaves the app's
threads and the event loop free), and a user's password once verified is remembered (a SHA-256 of user,
hash and password, at most :data:`CACHE_SIZE` of them), as Prometheus does. An unknown user
costs the same bcrypt as a known one, so the answer's time does not tell which users exist.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio
import bcrypt

from bookkeeper.ground.webconfig import WebConfig

__all__ = ["WebConfigMiddleware"]

CACHE_SIZE = 100
BCRYPT_THREADS = 2
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

# a valid hash (cost 10, Prometheus's documented cost) of no one's password: an unknown
# user's check costs what a known user's does
_DECOY = b"$2b$10$CEr.NTcjSjFg2DRIZ/962.35z5EvR24b5SCHVl5adIebkMLmXf5sS"


class _TokenBucket:
    def __init__(self, interval_s: float, burst: int) -> None:
        self.interval_s = interval_s
        self.burst = burst
        self.tokens = float(burst)
        self.at = time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.at) / self.interval_s)
            self.at = now
            if self.tokens < 1:
                return False
            self.tokens -= 1
            return True


class WebConfigMiddleware:
    """``app`` behind ``config``'s rate limit, headers and users (see the module doc)."""

    def __init__(self, app: App, config: WebConfig) -> None:
        self.app = app
        self.config = config
        self.headers = [(name.lower().encode(), text.encode("latin-1")) for name, text in config.headers]
        self.bucket = None
        if config.rate_interval_s:
            self.bucket = _TokenBucket(config.rate_interval_s, config.rate_burst)
        self._verified: OrderedDict[bytes, None] = OrderedDict()
        self._bcrypt_threads = anyio.CapacityLimiter(BCRYPT_THREADS)
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.bucket is not None and not self.bucket.take():
            await self._answer(send, 429, b"Too Many Requests\n", [])
            return
        if self.config.users and not await self._authorized(scope):
            challenge = (b"www-authenticate", b'Basic realm="artimon"')
            await self._answer(send, 401, b"Unauthorized\n", [challenge])
            return
        if not self.headers:
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *self.headers]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    async def _answer(self, send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]]) -> None:
        headers = [(b"content-type", b"text/plain; charset=utf-8"), *extra, *self.headers]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _authorized(self, scope: Scope) -> bool:
        credentials = _basic_credentials(scope)
        if credentials is None:
            return False
        user, password = credentials
        hashed = self.config.users.get(user)
        key = hashlib.sha256(b"\0".join((user.encode(), hashed or b"", password))).digest()
        with self._lock:
            if hashed is not None and key in self._verified:
                self._verified.move_to_end(key)
                return True
        matches = await anyio.to_thread.run_sync(
            _checkpw, password, hashed or _DECOY, limiter=self._bcrypt_threads
        )
        if not matches or hashed is None:
            return False
        with self._lock:
            self._verified[key] = None
            while len(self._verified) > CACHE_SIZE:
                self._verified.popitem(last=False)
        return True


def _checkpw(password: bytes, hashed: bytes) -> bool:
    try:
        return bcrypt.checkpw(password, hashed)
    except ValueError:  # bcrypt takes at most 72 bytes of password: a longer one is no one's
        return False


def _basic_credentials(scope: Scope) -> tuple[str, bytes] | None:
    """The user and password of the request's ``Authorization: Basic``, else ``None``."""
    for name, value in scope.get("headers", ()):
        if name != b"authorization":
            continue
        scheme, _, encoded = value.partition(b" ")
        if scheme.lower() != b"basic":
            return None
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            return None
        user, colon, password = decoded.partition(b":")
        if not colon:
            return None
        try:
            return user.decode("utf-8"), password
        except UnicodeDecodeError:
            return None
    return None
