"""VHMS's in-process client: :class:`LocalClient` reads a :class:`~vhms.server.Store` of this
process through the same calls as :class:`~vhms.client.VhmsClient` and
:class:`~vhms.client.ShardedClient` (``fetch``, ``series``, ``label_names``,
``label_values``, ``strings``), so a reader (the query API of ``artimon up``, tests,
benchmarks) has one code path whether the store is here or behind Thrift.

Nothing is copied on the way: a fetch answers the store's own :class:`~vhms.results.FetchResult`
(no Thrift encoding, no merge), and errors are the store's (:class:`~vhms.exceptions.VhmsError`
and ``ValueError``), as a remote member raises them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vhms.results import FetchResult

if TYPE_CHECKING:  # the client surface does not load the server's code; a caller holds a store
    from vhms.server.store import Reading, Store

__all__ = ["LocalClient"]


class LocalClient:
    """Reads ``store``, held by this process."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def fetch(
        self,
        selector: str,
        start_ms: int,
        end_ms: int,
        resolution: str | int = "auto",
        *,
        sample_times: bool = False,
    ) -> FetchResult:
        """Buckets of the selected series whose start lies in ``[start_ms, end_ms)``; with
        ``sample_times``, samples with their own times, stitched from the rings
        (:meth:`Store.fetch`)."""
        return self.store.fetch(selector, start_ms, end_ms, resolution, sample_times=sample_times)

    def reading(self, selector: str, start_ms: int, end_ms: int, *, sample_times: bool = False) -> Reading:
        """:meth:`fetch`'s series chosen, their samples then read a block of series at a time
        (:meth:`Store.reading`): what a reader that reduces over series asks of a store it
        holds, so that no block's arrays grow with the series."""
        return self.store.reading(selector, start_ms, end_ms, sample_times=sample_times)

    def series(self, selector: str) -> list[str]:
        """The canonical keys of the selected series, in the store's order."""
        return self.store.series_keys(selector)

    def label_names(self) -> list[str]:
        return self.store.label_names()

    def label_values(self, label: str) -> list[str]:
        return self.store.label_values(label)

    def strings(self, selector: str) -> dict[str, tuple[int, str]]:
        """The last value and its time of each selected STRING series, by key."""
        return dict(sorted(self.store.last_strings(selector).items()))
