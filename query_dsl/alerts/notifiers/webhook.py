"""``type: webhook``: the notification as JSON, POSTed (httpx).

Settings: ``url`` (http or https), ``timeout`` (a duration, 10s), ``headers`` (a mapping; write
``${ENV_NAME}`` for a token). The body is :meth:`Notification.to_dict`. A 2xx answer is
delivered; 408, 425, 429, 5xx and transport errors are retried by the dispatcher; any other
answer is final. The answer's body is never read past 1 KiB.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from query_dsl.alerts.fields import Fields
from query_dsl.alerts.model import Notification
from query_dsl.exceptions import NotifyError

__all__ = ["WebhookNotifier"]

_RETRYABLE = frozenset({408, 425, 429})


@dataclass
class WebhookNotifier:
    name: str
    url: str
    timeout: float = 10.0
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    _http: httpx.Client | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def from_options(cls, name: str, fields: Fields) -> WebhookNotifier:
        url = fields.text("url", env=True)
        try:
            scheme = httpx.URL(url).scheme
        except httpx.InvalidURL as exc:
            raise fields.error("url", f"{url!r} is not a URL: {exc}") from None
        if scheme not in ("http", "https"):
            raise fields.error("url", f"{url!r} is not an http:// or https:// URL")
        return cls(
            name,
            url,
            timeout=fields.seconds("timeout", 10.0, 0.1, 600.0),
            headers=fields.text_map("headers", env=True),
        )

    def send(self, notification: Notification) -> None:
        self.post(notification.to_dict())

    def post(self, body: object) -> None:
        """POST ``body`` as JSON to ``url``; ``NotifyError`` unless the answer is a 2xx."""
        if self._http is None:
            self._http = httpx.Client(timeout=self.timeout, headers=self.headers)
        try:
            with self._http.stream("POST", self.url, json=body) as response:
                if response.is_success:
                    return
                head = b""
                for chunk in response.iter_bytes():
                    head += chunk
                    if len(head) >= 1024:
                        break
        except httpx.HTTPError as exc:
            raise NotifyError(f"POST {self.url}: {type(exc).__name__}: {exc}") from None
        status = response.status_code
        raise NotifyError(
            f"POST {self.url} answered {status}: {head[:1024].decode('utf-8', 'replace')}",
            retryable=status in _RETRYABLE or status >= 500,
        )

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
