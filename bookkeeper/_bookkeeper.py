"""The Bookkeeper: the labeled variables of one context, their snapshot, their serving."""

from __future__ import annotations

import math
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, TypeVar

import numpy as np

from bookkeeper.batch import SampleBatch
from bookkeeper.exceptions import InvalidLabelError, InvalidValueError, VariableTypeError
from bookkeeper.framework_labels import framework_labels
from bookkeeper.histogram import DEFAULT_BUCKETS, Histogram, check_buckets, format_bound
from bookkeeper.labels import format_labels, validate_labels, validate_name
from bookkeeper.variables import (
    BooleanVar,
    DoubleVar,
    IntegerVar,
    StringVar,
    Variable,
    wrap_int64,
)
from bookkeeper.vartype import VarType

if TYPE_CHECKING:
    import ssl

    from bookkeeper.export import FileExporter
    from bookkeeper.server import EndpointServer
    from bookkeeper.wire.thrift_server import ServerLimits
    from bookkeeper.zk.acl import ZkAuth

__all__ = ["Bookkeeper"]

V = TypeVar("V", bound=Variable)  # type: ignore[type-arg]
_Key = tuple[str, tuple[tuple[str, str], ...]]
_EMPTY: Mapping[str, str] = {}


class Bookkeeper:
    """The labeled variables of one context, thread-safe.

    ``Bookkeeper.default()`` is the process-wide one (context from ``ARTIMON_CONTEXT``,
    else ``default``); ``Bookkeeper.for_context(name)`` the process-wide one of a context.
    ``labels`` override the framework labels (see :mod:`bookkeeper.framework_labels`).
    """

    _shared: ClassVar[dict[str, Bookkeeper]] = {}
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        context: str = "default",
        *,
        labels: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.context = validate_labels({"context": context})["context"]
        self.framework_labels = framework_labels(context, labels, environ)
        self._lock = threading.Lock()
        self._vars: dict[_Key, Variable] = {}  # type: ignore[type-arg]
        self._histograms: dict[_Key, Histogram] = {}
        self._servers: list[EndpointServer] = []
        self._exporters: list[FileExporter] = []

    @classmethod
    def for_context(cls, context: str) -> Bookkeeper:
        """The process-wide bookkeeper of ``context``, created on first use."""
        with cls._shared_lock:
            bk = cls._shared.get(context)
            if bk is None:
                bk = cls._shared[context] = cls(context)
            return bk

    @classmethod
    def default(cls) -> Bookkeeper:
        """The process-wide bookkeeper of ``$ARTIMON_CONTEXT`` (``default`` when unset)."""
        return cls.for_context(os.environ.get("ARTIMON_CONTEXT", "default"))

    # -- handles ---------------------------------------------------------------------------

    def _handle(
        self, cls: type[V], name: str, labels: Mapping[str, str] | None, extra: Mapping[str, str]
    ) -> V:
        if extra:
            merged = dict(labels) if labels else {}
            merged.update(extra)
            labels = merged
        elif labels is None:
            labels = _EMPTY
        key = (name, tuple(sorted(labels.items())))
        var = self._vars.get(key)
        if var is None:
            var = self._create(cls, name, labels, key)
        if var.__class__ is not cls:
            raise VariableTypeError(
                f"{name}{{{var.label_text}}} is a {var.type.name} variable, not {cls.type.name}"
            )
        return var

    def _create(self, cls: type[V], name: str, labels: Mapping[str, str], key: _Key) -> V:
        validate_name(name)
        checked = validate_labels(labels)
        with self._lock:
            var = self._vars.get(key)
            if var is None:
                var = self._vars[key] = cls(self, self._lock, name, checked, format_labels(checked), key)
        return var  # type: ignore[return-value]

    def integer(self, name: str, labels: Mapping[str, str] | None = None, /, **kw: str) -> IntegerVar:
        """The cached handle of INTEGER ``name{labels, **kw}``, created at 0 on first use."""
        return self._handle(IntegerVar, name, labels, kw)

    def double(self, name: str, labels: Mapping[str, str] | None = None, /, **kw: str) -> DoubleVar:
        """The cached handle of DOUBLE ``name{labels, **kw}``, created at 0.0 on first use."""
        return self._handle(DoubleVar, name, labels, kw)

    def boolean(self, name: str, labels: Mapping[str, str] | None = None, /, **kw: str) -> BooleanVar:
        """The cached handle of BOOLEAN ``name{labels, **kw}``, created False on first use."""
        return self._handle(BooleanVar, name, labels, kw)

    def string(self, name: str, labels: Mapping[str, str] | None = None, /, **kw: str) -> StringVar:
        """The cached handle of STRING ``name{labels, **kw}``, created empty on first use."""
        return self._handle(StringVar, name, labels, kw)

    def histogram(
        self,
        name: str,
        labels: Mapping[str, str] | None = None,
        /,
        buckets: Sequence[float] = DEFAULT_BUCKETS,
        **kw: str,
    ) -> Histogram:
        """The cached histogram ``name{labels, **kw}`` (:mod:`bookkeeper.histogram`): the
        INTEGER series ``<name>_bucket{le=...}`` (cumulative, one per bound and ``+Inf``), the
        DOUBLE ``<name>_sum`` and the INTEGER ``<name>_count``. Asking again with other
        ``buckets`` raises ``InvalidValueError``."""
        merged = {**(labels or {}), **kw}
        key = (name, tuple(sorted(merged.items())))
        found = self._histograms.get(key)
        bounds = check_buckets(buckets)
        if found is None:
            if "le" in merged:
                raise InvalidLabelError(f"histogram {name}: the label 'le' is the histogram's own")
            bucket_vars = [
                self.integer(f"{name}_bucket", merged, le=format_bound(bound))
                for bound in (*bounds, math.inf)
            ]
            histogram = Histogram(
                name,
                bounds,
                self._lock,
                bucket_vars,
                self.double(f"{name}_sum", merged),
                self.integer(f"{name}_count", merged),
            )
            with self._lock:
                found = self._histograms.setdefault(key, histogram)
        if found.bounds != bounds:
            raise InvalidValueError(
                f"histogram {name}{{{format_labels(merged)}}} has the buckets {list(found.bounds)}, "
                f"not {list(bounds)}"
            )
        return found

    def _find(self, cls: type[V], name: str, labels: Mapping[str, str]) -> V | None:
        var = self._vars.get((name, tuple(sorted(labels.items()))))
        if var is None:
            return None
        if var.__class__ is not cls:
            raise VariableTypeError(
                f"{name}{{{var.label_text}}} is a {var.type.name} variable, not {cls.type.name}"
            )
        return var

    def _remove(self, var: Variable) -> bool:  # type: ignore[type-arg]
        with self._lock:
            if var._removed:
                return False
            var._removed = True
            del self._vars[var.key]
            return True

    def _reattach(self, var: Variable) -> None:  # type: ignore[type-arg]
        """Bring a removed handle back (called with the lock held)."""
        current = self._vars.get(var.key)
        if current is not None:
            var._value, var._ts = current._value, current._ts
            current._removed = True
        self._vars[var.key] = var
        var._removed = False

    # -- Artimon's API ---------------------------------------------------------------------

    def set_integer_var(self, name: str, labels: Mapping[str, str], value: int) -> None:
        self._handle(IntegerVar, name, labels, _EMPTY).set(value)

    def add_to_integer_var(self, name: str, labels: Mapping[str, str], delta: int) -> int:
        return self._handle(IntegerVar, name, labels, _EMPTY).add_and_get(delta)

    def get_integer_var(self, name: str, labels: Mapping[str, str]) -> int | None:
        var = self._find(IntegerVar, name, labels)
        return None if var is None else var.get()

    def remove_integer_var(self, name: str, labels: Mapping[str, str]) -> bool:
        var = self._find(IntegerVar, name, labels)
        return var is not None and var.remove()

    def set_double_var(self, name: str, labels: Mapping[str, str], value: float) -> None:
        self._handle(DoubleVar, name, labels, _EMPTY).set(value)

    def add_to_double_var(self, name: str, labels: Mapping[str, str], delta: float) -> float:
        return self._handle(DoubleVar, name, labels, _EMPTY).add_and_get(delta)

    def get_double_var(self, name: str, labels: Mapping[str, str]) -> float | None:
        var = self._find(DoubleVar, name, labels)
        return None if var is None else var.get()

    def remove_double_var(self, name: str, labels: Mapping[str, str]) -> bool:
        var = self._find(DoubleVar, name, labels)
        return var is not None and var.remove()

    def set_string_var(self, name: str, labels: Mapping[str, str], value: str) -> None:
        self._handle(StringVar, name, labels, _EMPTY).set(value)

    def get_string_var(self, name: str, labels: Mapping[str, str]) -> str | None:
        var = self._find(StringVar, name, labels)
        return None if var is None else var.get()

    def remove_string_var(self, name: str, labels: Mapping[str, str]) -> bool:
        var = self._find(StringVar, name, labels)
        return var is not None and var.remove()

    def set_boolean_var(self, name: str, labels: Mapping[str, str], value: bool) -> None:
        self._handle(BooleanVar, name, labels, _EMPTY).set(value)

    def get_boolean_var(self, name: str, labels: Mapping[str, str]) -> bool | None:
        var = self._find(BooleanVar, name, labels)
        return None if var is None else var.get()

    def remove_boolean_var(self, name: str, labels: Mapping[str, str]) -> bool:
        var = self._find(BooleanVar, name, labels)
        return var is not None and var.remove()

    # -- snapshot, serving, export ---------------------------------------------------------

    def __len__(self) -> int:
        return len(self._vars)

    def snapshot(self) -> SampleBatch:
        """Every variable as one columnar batch, a consistent cut taken under the lock."""
        with self._lock:
            for histogram in self._histograms.values():
                histogram._publish()
            snapshot_ms = int(time.time() * 1000)
            rows = [(var, var._value, var._ts) for var in self._vars.values()]
        names: dict[str, int] = {}
        label_sets: dict[str, int] = {}
        name_ids = [names.setdefault(var.name, len(names)) for var, _, _ in rows]
        label_set_ids = [label_sets.setdefault(var.label_text, len(label_sets)) for var, _, _ in rows]
        types = bytes([var.type for var, _, _ in rows])
        values = np.zeros(len(rows), dtype=np.int64)
        int_rows: list[int] = []
        int_values: list[int] = []
        double_rows: list[int] = []
        double_values: list[float] = []
        string_rows: list[int] = []
        strings: list[str] = []
        for row, (var, value, _) in enumerate(rows):
            vartype = var.type
            if vartype is VarType.DOUBLE:
                double_rows.append(row)
                double_values.append(value)
            elif vartype is VarType.STRING:
                string_rows.append(row)
                strings.append(value)
            else:
                int_rows.append(row)
                int_values.append(value)
        try:
            values[int_rows] = int_values
        except OverflowError:  # counters past 2**63 wrap on read, as documented
            values[int_rows] = [wrap_int64(v) for v in int_values]
        values.view(np.float64)[double_rows] = double_values
        values[string_rows] = np.arange(len(strings))
        timestamps = (np.array([ts for _, _, ts in rows], dtype=np.float64) * 1000).astype(np.int64)
        return SampleBatch(
            context=self.context,
            snapshot_ms=snapshot_ms,
            common_labels=dict(self.framework_labels),
            names=list(names),
            label_sets=list(label_sets),
            name_ids=np.array(name_ids, dtype=np.int32),
            label_set_ids=np.array(label_set_ids, dtype=np.int32),
            types=np.frombuffer(types, dtype=np.uint8),
            values=values,
            timestamps=timestamps,
            strings=strings,
        )

    def serve(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        zk_hosts: str | None = None,
        register: bool = True,
        advertise_host: str | None = None,
        session_timeout: float = 10.0,
        zk_auth: ZkAuth | str | None = None,
        limits: ServerLimits | None = None,
        ssl_context: ssl.SSLContext | None = None,
        block: bool = False,
    ) -> EndpointServer:
        """Serve the variables over Thrift on ``host:port`` (0 = ephemeral) and, unless
        ``register`` is false, register the endpoint in ZooKeeper (``zk_hosts``, else
        ``$ARTIMON_ZK``, else ``127.0.0.1:2181``) with the credentials ``zk_auth``
        (``user:password``; default ``$ARTIMON_ZK_AUTH``, then ``$ARTIMON_ZK_AUTH_FILE``).
        ``limits`` and ``ssl_context``: see :class:`~bookkeeper.EndpointServer`. Returns the
        running server; with ``block``, it prints where it serves (one line on stderr) and
        returns only once Ctrl-C or SIGTERM has stopped it and every
        other server and exporter of this bookkeeper (:meth:`close`): a script that only
        serves its variables then runs until it is stopped, instead of ending at once (the
        server's threads are daemons)."""
        from bookkeeper.server import DEFAULT_ENDPOINT_LIMITS, EndpointServer

        server = EndpointServer(
            self, host, port, limits=limits or DEFAULT_ENDPOINT_LIMITS, ssl_context=ssl_context
        )
        server.start()
        if register:
            server.register(
                zk_hosts, advertise_host=advertise_host, session_timeout=session_timeout, zk_auth=zk_auth
            )
        self._servers.append(server)
        if block:
            where = server.registration
            print(
                f"bookkeeper {self.context}: serving on {server.host}:{server.port}"
                + (f", registered in ZooKeeper {where.connect} as {where.path}" if where else "")
                + "; Ctrl-C stops",
                file=sys.stderr,
                flush=True,
            )
            self._serve_until_stopped()
        return server

    def _serve_until_stopped(self) -> None:
        stopped = threading.Event()
        previous = None
        if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
            previous = signal.signal(signal.SIGTERM, lambda *_: stopped.set())
        try:
            stopped.wait()
        except KeyboardInterrupt:
            pass
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
            self.close()

    def export_to_file(
        self, directory: str | os.PathLike[str], every: float = 60.0, module: str | None = None
    ) -> FileExporter:
        """Write ``<module>.artimon`` into ``directory`` every ``every`` seconds (first write
        now), for processes that cannot serve Thrift. Returns the running exporter."""
        from bookkeeper.export import FileExporter

        exporter = FileExporter(self, Path(directory), every=every, module=module)
        exporter.start()
        self._exporters.append(exporter)
        return exporter

    def close(self) -> None:
        """Stop every server and exporter this bookkeeper started."""
        for server in self._servers:
            server.stop()
        for exporter in self._exporters:
            exporter.stop()
        self._servers.clear()
        self._exporters.clear()
