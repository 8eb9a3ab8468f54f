"""A client of the VHMS service (the agent's sink and the query layer use it)."""

from __future__ import annotations

import socket
import time
from typing import Any

import numpy as np

from bookkeeper.exceptions import EndpointUnavailableError
from bookkeeper.wire.framed import call
from vhms.exceptions import QueryLimitError, SelectorError, VhmsError
from vhms.idl import vhms_thrift
from vhms.store import FetchResult

__all__ = ["VhmsClient"]

_KINDS: dict[str, type[VhmsError]] = {"SelectorError": SelectorError, "QueryLimitError": QueryLimitError}


class VhmsClient:
    """One connection to a VHMS, re-opened after a failure. ``timeout`` bounds each call."""

    def __init__(
        self, host: str, port: int, *, timeout: float = 30.0, max_frame_size: int = 512 * 1024 * 1024
    ) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.max_frame_size = max_frame_size
        self._sock: socket.socket | None = None
        self._seqid = 0

    def _call(self, api: str, *args: Any) -> Any:
        if self._sock is None:
            try:
                self._sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
            except OSError as exc:
                raise EndpointUnavailableError(f"connect to VHMS {self.host}:{self.port}: {exc}") from None
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._seqid = (self._seqid + 1) & 0x7FFFFFFF
        try:
            return call(
                self._sock,
                vhms_thrift.Vhms,
                api,
                *args,
                max_frame_size=self.max_frame_size,
                seqid=self._seqid,
                deadline=time.monotonic() + self.timeout,
            )
        except vhms_thrift.VhmsException as exc:
            raise _KINDS.get(exc.kind, VhmsError)(exc.message) from None
        except BaseException:
            self.close()
            raise

    def ingest(
        self,
        keys: list[str],
        values: np.ndarray,
        timestamps: np.ndarray,
        strings: tuple[list[str], list[str], np.ndarray] | None = None,
    ) -> tuple[int, int]:
        """Send numeric samples (and STRING ones as ``(keys, values, timestamps)``);
        returns ``(stored, refused)``."""
        string_keys, texts, string_times = strings or ([], [], np.zeros(0, dtype=np.int64))
        reply = self._call(
            "ingest",
            keys,
            np.asarray(values, dtype="<f8").tobytes(),
            np.asarray(timestamps, dtype="<i8").tobytes(),
            string_keys,
            texts,
            np.asarray(string_times, dtype="<i8").tobytes(),
        )
        return int(reply.stored), int(reply.refused)

    def fetch(self, selector: str, start_ms: int, end_ms: int, resolution: str | int = "auto") -> FetchResult:
        reply = self._call("fetch", selector, start_ms, end_ms, str(resolution))
        timestamps = np.frombuffer(reply.timestamps, dtype="<i8")
        values = np.frombuffer(reply.values, dtype="<f8").reshape(len(reply.keys), len(timestamps))
        return FetchResult(list(reply.keys), timestamps, values, int(reply.step_ms))

    def series(self, selector: str) -> list[str]:
        return list(self._call("series", selector))

    def label_names(self) -> list[str]:
        return list(self._call("label_names"))

    def label_values(self, label: str) -> list[str]:
        return list(self._call("label_values", label))

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> VhmsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
