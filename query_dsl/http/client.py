"""``query_dsl.Client(url)``: the query API from Python, for alert scripts and notebooks."""

from __future__ import annotations

from typing import Any

import numpy as np

from query_dsl.exceptions import QueryError, QueryLimitError, QuerySyntaxError
from query_dsl.matrix import Matrix

__all__ = ["Client"]


class Client:
    """``Client("http://host:8080", token=None)``; ``query()`` returns a Matrix or a float."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 60.0) -> None:
        import httpx  # here: the query API's own process exports this class and never uses it

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url.rstrip("/")
        self.warnings: list[str] = []  # the last query's: why (parts of) its answer are empty
        self.strings: list[
            dict[str, Any]
        ] = []  # the last query's STRING series: name, labels, value, timestamp
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer of one request; a query API that cannot be reached, or that
        answers what is not JSON, is a ``QueryError`` saying so in one line."""
        import httpx

        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise QueryError(
                f"the query API at {self.url} does not answer: {exc or type(exc).__name__}"
            ) from None
        try:
            body = response.json()
        except ValueError:  # not JSON: not our API
            raise QueryError(
                f"{self.url}{path} answered {response.status_code}, not the query API's JSON"
            ) from None
        if response.status_code >= 400:
            error = body.get("error", {})
            message = error.get("message", response.text)
            if error.get("kind") == "QuerySyntaxError":
                raise QuerySyntaxError(message, error.get("line") or 0, error.get("column") or 0)
            if response.status_code == 413:
                raise QueryLimitError(message)
            raise QueryError(f"{response.status_code}: {message}")
        return body

    def query(self, query: str, start_ms: int | None = None, end_ms: int | None = None) -> Matrix | float:
        body = self._send("POST", "/api/v1/query", json={"query": query, "start": start_ms, "end": end_ms})
        self.warnings = [str(w) for w in body.get("warnings") or []]
        self.strings = list(body.get("strings") or [])
        if "series" not in body or body["series"] is None:
            scalar = body.get("scalar")
            return float("nan") if scalar is None else float(scalar)
        series = body["series"]
        timestamps = np.array(series[0]["timestamps"] if series else [], dtype=np.int64)
        values = np.array(
            [[np.nan if v is None else v for v in s["values"]] for s in series], dtype=np.float64
        ).reshape(len(series), len(timestamps))
        return Matrix(
            [s["name"] for s in series], [s["labels"] for s in series], timestamps, values, body["step_ms"]
        )

    def query_frame(self, query: str, start_ms: int | None = None, end_ms: int | None = None) -> Any:
        """The result as a pandas DataFrame (a column per series), or a float."""
        result = self.query(query, start_ms, end_ms)
        return result.to_pandas() if isinstance(result, Matrix) else result

    def series(self, selector: str = "{}") -> list[str]:
        return list(self._send("GET", "/api/v1/series", params={"match": selector})["series"])

    def labels(self) -> list[str]:
        return list(self._send("GET", "/api/v1/labels")["labels"])

    def label_values(self, label: str) -> list[str]:
        return list(self._send("GET", f"/api/v1/label/{label}/values")["values"])
