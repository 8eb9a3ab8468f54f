"""Saved dashboards: JSON files in one directory, a dashboard per file, named by the file's
stem (``web.json`` is the dashboard ``web``). The format (docs/dashboards.md)::

    {"title": "Web tier", "refresh": 30, "range": "1h",
     "panels": [{"title": "Requests/s by status", "type": "line", "width": 6,
                 "query": "fetch(\\"http.requests\\") | map(rate, 5m) | reduce(sum, by=[status])"}]}

Rejected, each with a message naming the file and the reason: a name outside
``NAME_PATTERN`` (so no name can reach outside the directory), a file over
``MAX_FILE_BYTES``, text that is not UTF-8 JSON, an unknown key (a typo must not pass
silently), a missing title or query, a panel type other than ``line`` or ``table``, a width
outside 1-12 (columns of a 12-column grid), a range that is not a duration like ``15m``
``6h`` ``3d`` ``1w``, a refresh outside 0 (never) to 86,400 s, more than ``MAX_PANELS``
panels, and a panel query that does not parse. A listing reads at most ``MAX_DASHBOARDS``
files and shows a bad one with its error instead of failing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from query_dsl.exceptions import DashboardError, DashboardNotFoundError, QuerySyntaxError
from query_dsl.parser import MAX_QUERY_LENGTH, parse

__all__ = [
    "EXAMPLES",
    "MAX_DASHBOARDS",
    "MAX_FILE_BYTES",
    "MAX_PANELS",
    "NAME_PATTERN",
    "Dashboard",
    "DashboardDirectory",
    "DashboardSummary",
    "Panel",
]

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_FILE_BYTES = 256 * 1024
MAX_PANELS = 48
MAX_DASHBOARDS = 1000
_SHOWN_ERRORS = 5
_RANGE = re.compile(r"[1-9][0-9]{0,3}[mhdw]")
# the shipped examples (demo.json: for the series of ``artimon up --demo``)
EXAMPLES = Path(__file__).parent / "examples"


class Panel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str = Field("", max_length=200)
    query: str = Field(..., min_length=1, max_length=MAX_QUERY_LENGTH, description="a query in the DSL")
    type: Literal["line", "table"] = "line"
    width: int = Field(6, ge=1, le=12, description="columns of a 12-column grid")

    @field_validator("query")
    @classmethod
    def _parses(cls, query: str) -> str:
        try:
            parse(query)
        except QuerySyntaxError as exc:
            raise ValueError(str(exc).partition("\n")[0]) from None
        return query


class Dashboard(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str = Field(..., min_length=1, max_length=200)
    refresh: int = Field(60, ge=0, le=86_400, description="seconds between refreshes; 0: never")
    range: str = Field("1h", max_length=8, description="the default time range: a duration like 15m, 6h, 3d")
    panels: list[Panel] = Field(..., min_length=1, max_length=MAX_PANELS)

    @field_validator("range")
    @classmethod
    def _is_duration(cls, range: str) -> str:
        if not _RANGE.fullmatch(range):
            raise ValueError(f"{range!r} is not a duration like 15m, 6h, 3d or 1w")
        return range


class DashboardSummary(BaseModel):
    """One line of a listing: a valid dashboard's title and panel count, or a bad file's error."""

    name: str
    title: str | None = None
    panels: int = 0
    error: str | None = None


class DashboardDirectory:
    """The dashboards saved in ``path`` (read on every call: edit a file, reload the page)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def summaries(self) -> list[DashboardSummary]:
        """Every ``*.json`` file but hidden ones (editors' swap files), by name."""
        found = self.path.glob("*.json") if self.path.is_dir() else []
        files = sorted(f for f in found if not f.name.startswith("."))[:MAX_DASHBOARDS]
        out = []
        for file in files:
            name = file.stem
            try:
                dashboard = self.load(name)
            except DashboardError as exc:
                out.append(DashboardSummary(name=name, error=str(exc)))
            else:
                out.append(DashboardSummary(name=name, title=dashboard.title, panels=len(dashboard.panels)))
        return out

    def load(self, name: str) -> Dashboard:
        if not NAME_PATTERN.fullmatch(name):
            raise DashboardError(
                f"dashboard name {name[:80]!r} is not allowed: 1-64 letters, digits, '_', '-' or '.', "
                "not starting with '.', '_' or '-'"
            )
        file = self.path / f"{name}.json"
        try:
            with file.open("rb") as stream:
                raw = stream.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            raise DashboardNotFoundError(f"no dashboard named {name!r} in {self.path}") from None
        except OSError as exc:
            raise DashboardError(f"{file.name} cannot be read: {exc.strerror}") from None
        if len(raw) > MAX_FILE_BYTES:
            raise DashboardError(f"{file.name} is over the {MAX_FILE_BYTES:,}-byte limit")
        try:
            document = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise DashboardError(f"{file.name} is not UTF-8 JSON: {exc}") from None
        try:
            return Dashboard.model_validate(document)
        except ValidationError as exc:
            raise DashboardError(f"{file.name}: {_explain(exc)}") from None


def _explain(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    shown = "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'document'}: "
        f"{error['msg'].removeprefix('Value error, ')}"
        for error in errors[:_SHOWN_ERRORS]
    )
    more = len(errors) - _SHOWN_ERRORS
    return shown + (f"; and {more} more" if more > 0 else "")
