"""``prometheus``: scrapes Prometheus text and OpenMetrics endpoints every interval.

Rounds start on interval boundaries (``floor(t / interval) * interval``), as the artimon
source's do. In each round every target is scraped concurrently, on a bounded pool, within
``scrapeTimeout``; each target gives one event whose body is an Avro sample batch
(``bookkeeper/ground/sample_batch.avsc``) of its samples, stamped with the round's time, and
of the three series Prometheus writes per target: ``up`` (1, or 0 when the scrape failed),
``scrape_duration_seconds`` and ``scrape_samples_scraped``, each with the target's labels.
Headers: ``artimon.context`` (the job), ``artimon.target`` (the URL), ``artimon.round`` (the
round's start, epoch ms) and ``artimon.agent``. Events go to the channel in batches of
``batchSize``; what the channel still refuses at the round's deadline is dropped and counted
(``EventDroppedCount``).

The body is parsed by :mod:`collector_agent.sources.exposition` (the name and type mapping is
there and in docs/agent.md). A target that fails (refuses, hangs past ``scrapeTimeout``,
answers an HTTP error, more than ``bodySizeLimit`` bytes, more samples than
``sampleLimit`` (counted before the parse), a line over ``maxLineLength``,
bytes that are not UTF-8, a body the parser refuses, a series twice) is counted
(``ScrapeFailCount``, per target in ``target_failures``, its last error in
``target_errors``), logged once per burst and per new error, and reported with ``up`` 0; the
other targets' scrapes are not affected and nothing another target gave is lost. Samples our
label rules refuse are left out and counted (``SampleRefusedCount``, and by reason
``SampleRefused<reason>Count``: :data:`collector_agent.sources.exposition.SAMPLE_REFUSALS`),
the rest kept.

Targets: ``targets`` (static, space-separated URLs, or ``host:port`` for
``http://host:port<metricsPath>``) under the job ``job`` (default: the source's name); or,
with ``zk``, the members under ``zkPath`` (default ``<root>/targets``):
``<zkPath>/<job>/<member>``, whose payload is JSON ``{"url": ..., "labels": {...}}`` or
empty (the member's name is then ``host:port``), watched by :class:`bookkeeper.ground.Membership`.
Each target's labels: ``job``, ``instance`` (the URL's ``host:port``, unless a label
``instance`` of the configuration or the payload names it: a name that outlives a port
change), the ``labels.<key>`` of the configuration and those of its payload.

The round scheduler's states (``PrometheusSource.round_state``)::

    WAITING --the next interval boundary--> SCRAPING --all answered or the deadline--> WAITING
    SCRAPING --the round ran past the next boundary--> WAITING, the rounds missed meanwhile
        counted (RoundOverrunCount, RoundSkippedCount), never queued
    any state --stop()--> STOPPED

Keys: ``targets``, ``job``, ``metricsPath`` (``/metrics``), ``labels.<key>``, ``zk``,
``zkPath``, ``sessionTimeout`` (s, 10), ``interval`` (s, 60), ``scrapeTimeout`` (s, 10,
at most the interval), ``honorLabels`` (false), ``bodySizeLimit`` (bytes, 32 MiB),
``maxLineLength`` (characters, 64 KiB), ``sampleLimit`` (200,000), ``threads`` (32),
``batchSize`` (100); how targets are reached, Prometheus's ``scheme``, ``tls_config`` and
``basic_auth``: ``scheme``, ``tls*``, ``basicAuth*`` (:mod:`collector_agent.sources.scrape_client`).
"""

from __future__ import annotations

import concurrent.futures
import enum
import logging
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Mapping
from urllib.parse import urlsplit

import urllib3

from bookkeeper import ZkAuthError
from bookkeeper.ground import Member, Membership, encode_sample_batch
from bookkeeper.wire import validate_labels
from bookkeeper.zk import make_client, resolve_zk, resolve_zk_auth
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import ScrapeError
from collector_agent.sources.base import EventDrivenSource
from collector_agent.sources.exposition import (
    DEFAULT_SAMPLE_LIMIT,
    OPENMETRICS,
    SAMPLE_REFUSALS,
    ExpositionParser,
    Scrape,
)
from collector_agent.sources.rounds import emit_until, next_round_after
from collector_agent.sources.scrape import (
    Target,
    decode_target,
    failure_text,
    report_batch,
    target_url,
    with_report,
)
from collector_agent.sources.scrape_client import scrape_pool_options

__all__ = ["PrometheusSource", "ScrapeState"]

log = logging.getLogger(__name__)
# urllib3 warns of every connection it drops from a full pool: one a scrape at worst;
# failures are logged here, once per burst
logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)

# What Prometheus asks for: OpenMetrics first, the text format otherwise.
ACCEPT = (
    f"{OPENMETRICS};version=1.0.0,{OPENMETRICS};version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
_MAX_KEPT_ALIVE = 10_000  # targets whose connection is kept between rounds (the rest reconnect)


class ScrapeState(enum.Enum):
    WAITING = "waiting"
    SCRAPING = "scraping"
    STOPPED = "stopped"


class PrometheusSource(EventDrivenSource):
    counter_names = (
        *EventDrivenSource.counter_names,
        "RoundCount",
        "RoundOverrunCount",
        "RoundSkippedCount",
        "ScrapeAttemptCount",
        "ScrapeSuccessCount",
        "ScrapeFailCount",
        "ScrapeRetryCount",
        "ScrapeTimeoutCount",
        "SampleRefusedCount",
        *(f"SampleRefused{reason}Count" for reason in SAMPLE_REFUSALS),
        "EventDroppedCount",
        "TargetCount",
    )

    def configure(self, context: Context) -> None:
        super().configure(context)
        self.job = context.get_str("job", self.name)
        self.metrics_path = context.get_str("metricsPath", self.default_path(context))
        self.scheme = context.get_str("scheme", "http")
        if self.scheme not in ("http", "https"):
            raise context.error("scheme", f"{self.scheme!r} is not http or https")
        self._pool_options, self._auth_headers = scrape_pool_options(context)
        self.static_labels = dict(context.subset("labels").values)
        self.interval = context.get_float("interval", 60.0, minimum=0.1)
        self.scrape_timeout = context.get_float("scrapeTimeout", min(10.0, self.interval), minimum=0.01)
        if self.scrape_timeout > self.interval:
            raise context.error("scrapeTimeout", f"{self.scrape_timeout} s is longer than the interval")
        self.honor_labels = context.get_bool("honorLabels", False)
        self.body_size_limit = context.get_int("bodySizeLimit", 32 * 1024 * 1024, minimum=1024)
        self.max_line = context.get_int("maxLineLength", 64 * 1024, minimum=256)
        self.sample_limit = context.get_int("sampleLimit", DEFAULT_SAMPLE_LIMIT, minimum=1)
        self.threads = context.get_int("threads", 32, minimum=1)
        self.batch_size = context.get_int("batchSize", 100, minimum=1)
        self.session_timeout = context.get_float("sessionTimeout", 10.0, minimum=1.0)
        self.agent_id = f"{socket.gethostname()}-{os.getpid()}"
        self.zk_hosts = context.get_optional("zk")
        self.zk_path = context.get_optional("zkPath")
        specs = context.get_list("targets", [])
        if not specs and not self.zk_hosts:
            raise context.error("targets", "is required (or zk, to discover targets)")
        try:
            validate_labels(self.static_labels)
            self._static = {url: self._new_target(url, self.job, {}) for url in self._urls(specs)}
            self.zk_auth = resolve_zk_auth() if self.zk_hosts else None
        except ZkAuthError as exc:
            raise context.error("zk", str(exc)) from None
        except ValueError as exc:
            raise context.error("targets", str(exc)) from None
        self._targets: dict[str, Target] = dict(self._static)
        self.target_failures: Counter[str] = Counter()
        self.target_errors: dict[str, str] = {}
        self._refusals: dict[str, str] = {}  # per target, the last reason a sample was refused
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.round_state = ScrapeState.WAITING

    def default_path(self, context: Context) -> str:
        """The path of a ``host:port`` target when ``metricsPath`` is not given."""
        return "/metrics"

    def _urls(self, specs: list[str]) -> list[str]:
        return [target_url(spec, self.metrics_path, self.scheme) for spec in specs]

    def _new_target(self, url: str, job: str, labels: Mapping[str, str]) -> Target:
        parts = urlsplit(url)
        target_labels = validate_labels(
            # instance: the address unless a label sets it (as Prometheus keeps a target's own)
            {"instance": parts.netloc or url, **self.static_labels, **labels, "job": job}
        )
        parser = ExpositionParser(target_labels, self.honor_labels, self.max_line, self.sample_limit)
        return Target(url, target_labels, parser)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        # urllib3, not httpx: a scrape of 50 KB costs about 0.13 ms of it, 1 ms of httpx
        # (benchmarks/scrape_bench.py): a thousand targets a round make that the bottleneck
        self._http = urllib3.PoolManager(
            num_pools=_MAX_KEPT_ALIVE,  # a pool per target, kept from round to round
            maxsize=1,  # one scrape of a target at a time: its one kept-alive connection
            headers={
                "Accept": ACCEPT,
                "Accept-Encoding": "gzip",
                "X-Prometheus-Scrape-Timeout-Seconds": f"{self.scrape_timeout:g}",
                "User-Agent": "artimon-collector-agent",
                **self._auth_headers,
            },
            timeout=urllib3.Timeout(connect=self.scrape_timeout, read=self.scrape_timeout),
            # redirects followed as Prometheus does (Spark's servlet adds a trailing slash)
            retries=urllib3.Retry(
                total=3, connect=0, read=0, status=0, other=0, redirect=3, raise_on_redirect=True
            ),
            **self._pool_options,
        )
        self._pool = concurrent.futures.ThreadPoolExecutor(
            self.threads, thread_name_prefix=f"scrape-{self.name}"
        )
        self._watch: Membership | None = None
        if self.zk_hosts:
            connect, layout = resolve_zk(self.zk_hosts)
            self._zk = make_client(connect, self.session_timeout, auth=self.zk_auth)
            self._zk.start_async()
            self._watch = Membership(
                self._zk,
                self.zk_path or f"{layout.root}/targets",
                decode=decode_target,
                refresh=min(5.0, self.interval),
                on_change=self._on_targets,
                name=f"source {self.name} targets",
                auth=self.zk_auth,
            )
            self._watch.start()
        self.counters.set("TargetCount", len(self._targets))
        self._stop.clear()
        self._thread = threading.Thread(target=self._round_loop, name=f"{self.name}-rounds", daemon=True)
        self._thread.start()
        super().start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.round_state = ScrapeState.STOPPED
        if self._watch is not None:
            self._watch.stop()
            self._zk.stop()
            self._zk.close()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._http.clear()
        super().stop()

    def _on_targets(self, view: Mapping[str, tuple[Member, ...]]) -> None:
        """The static targets and the discovered ones; a target kept keeps its parser."""
        with self._lock:
            previous = self._targets
        targets = dict(self._static)
        for job, members in view.items():
            for member in members:
                url, labels = member.payload
                try:
                    url = target_url(url or member.name, self.metrics_path, self.scheme)
                    old = previous.get(url)
                    if old is not None and old.labels.get("job") == job:
                        targets[url] = old
                    else:
                        targets[url] = self._new_target(url, job, labels)
                except ValueError as exc:
                    log.warning("source %s: ignoring target %s/%s: %s", self.name, job, member.name, exc)
        with self._lock:
            self._targets = targets
        self.counters.set("TargetCount", len(targets))

    # -- rounds ------------------------------------------------------------------------------

    def _round_loop(self) -> None:
        interval_ms = int(self.interval * 1000)
        if self._watch is not None:
            self._watch.ready.wait(self.interval)
        next_round = (int(time.time() * 1000) // interval_ms + 1) * interval_ms
        while not self._stop.is_set():
            self.round_state = ScrapeState.WAITING
            if self._stop.wait(max(0.0, next_round / 1000 - time.time())):
                return
            round_ms = next_round
            self.round_state = ScrapeState.SCRAPING
            self.counters.add("RoundCount")
            self.scrape_round(round_ms, round_ms + int(interval_ms * 0.95))
            next_round = next_round_after(self, round_ms, interval_ms)

    def scrape_round(self, round_ms: int, deadline_ms: int) -> None:
        """Scrape every target for ``round_ms`` and hand their events to the channel."""
        with self._lock:
            targets = list(self._targets.values())
        futures = {self._pool.submit(self._scrape, target, round_ms): target for target in targets}
        pending: list[Event] = []
        try:
            for future in concurrent.futures.as_completed(
                futures, timeout=max(0.0, deadline_ms / 1000 - time.time())
            ):
                pending.append(future.result())
                if len(pending) >= self.batch_size:
                    emit_until(self, pending, deadline_ms, self._stop)
                    pending = []
        except concurrent.futures.TimeoutError:
            late = [target.url for future, target in futures.items() if not future.done()]
            self.counters.add("ScrapeTimeoutCount", len(late))
            log.warning(
                "source %s: %d targets did not answer before round %d's deadline: %s",
                self.name,
                len(late),
                round_ms,
                " ".join(late[:5]),
            )
        if pending:
            emit_until(self, pending, deadline_ms, self._stop)

    # -- one target --------------------------------------------------------------------------

    def _get(self, url: str, deadline: float) -> urllib3.BaseHTTPResponse:
        """The answer's head. A kept-alive connection that the target closed as the request
        went out (its idle timeout met our interval: the answer is a dropped connection, not
        a timeout) is left, and the idempotent GET sent once more on a fresh one, as
        Prometheus's HTTP client does."""
        try:
            return self._http.request("GET", url, preload_content=False, decode_content=True)
        except urllib3.exceptions.MaxRetryError as exc:
            if not isinstance(exc.reason, urllib3.exceptions.ProtocolError) or time.monotonic() > deadline:
                raise
        self.counters.add("ScrapeRetryCount")
        return self._http.request("GET", url, preload_content=False, decode_content=True)

    def _fetch(self, url: str, deadline: float) -> tuple[bytes, str]:
        """The body and its content type; ``ScrapeError`` for anything but a whole answer
        within the size limit and ``scrapeTimeout``."""
        try:
            response = self._get(url, deadline)
        except urllib3.exceptions.MaxRetryError as exc:
            raise ScrapeError(failure_text(exc.reason or exc, self.scrape_timeout)) from None
        except urllib3.exceptions.HTTPError as exc:
            raise ScrapeError(failure_text(exc, self.scrape_timeout)) from None
        try:
            if response.status == 401:
                raise ScrapeError("HTTP status 401: credentials missing or refused (basicAuthUsername)")
            if response.status != 200:
                raise ScrapeError(f"HTTP status {response.status}")
            declared = response.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > self.body_size_limit:
                raise ScrapeError(f"a body of {declared} bytes is over the limit {self.body_size_limit}")
            chunks, size = [], 0
            for chunk in response.stream(256 * 1024, decode_content=True):
                size += len(chunk)
                if size > self.body_size_limit:  # decoded bytes: a gzip bomb stops here too
                    raise ScrapeError(f"the body is over the limit of {self.body_size_limit} bytes")
                if time.monotonic() > deadline:
                    raise ScrapeError(f"the body took longer than the scrape timeout {self.scrape_timeout} s")
                chunks.append(chunk)
            body = b"".join(chunks)
            response.release_conn()  # read whole: the connection is kept for the next round
            return body, response.headers.get("content-type", "")
        except urllib3.exceptions.HTTPError as exc:
            raise ScrapeError(failure_text(exc, self.scrape_timeout)) from None
        finally:
            if response.connection is not None:  # refused half-read: the connection is closed
                response.close()

    def _read(self, target: Target, round_ms: int, deadline: float) -> Scrape:
        """One target's samples (the extension point of sources that read other formats over
        HTTP, such as ``jmx``); ``ScrapeError`` when its answer is refused whole."""
        body, content_type = self._fetch(target.url, deadline)
        return target.parser.parse(body, content_type, target.labels["job"], round_ms)

    def _scrape(self, target: Target, round_ms: int) -> Event:
        self.counters.add("ScrapeAttemptCount")
        started = time.monotonic()
        scrape, failure = None, None
        try:
            scrape = self._read(target, round_ms, started + self.scrape_timeout)
        except ScrapeError as exc:
            failure = str(exc)
        duration = time.monotonic() - started
        if failure is not None:
            self.counters.add("ScrapeFailCount")
            self.target_failures[target.url] += 1
            if self.target_errors.get(target.url) != failure:
                log.warning("source %s: scraping %s failed: %s", self.name, target.url, failure)
            self.target_errors[target.url] = failure
        else:
            self.counters.add("ScrapeSuccessCount")
            if self.target_errors.pop(target.url, None) is not None:
                log.info("source %s: %s answers again", self.name, target.url)
        if scrape is not None and scrape.refused:
            self.counters.add("SampleRefusedCount", scrape.refused)
            for reason, count in scrape.refused_by.items():
                self.counters.add(f"SampleRefused{reason}Count", count)
        refusal = scrape.refusal if scrape is not None else ""
        if refusal and self._refusals.get(target.url) != refusal:  # once per new reason
            log.warning(
                "source %s: %d samples of %s refused, first: %s",
                self.name,
                scrape.refused if scrape else 0,
                target.url,
                refusal,
            )
        self._refusals[target.url] = refusal
        report = report_batch(target, round_ms, scrape is not None, duration, scrape.exposed if scrape else 0)
        batch = report if scrape is None else with_report(scrape.batch, report)
        headers = {
            "artimon.context": target.labels["job"],
            "artimon.target": target.url,
            "artimon.round": str(round_ms),
            "artimon.agent": self.agent_id,
        }
        return Event(headers, encode_sample_batch(batch))
