"""``jmx``: Artimon's JMX adapter, over HTTP: Hadoop's ``/jmx`` JSON servlet, or the Jolokia
protocol of any JVM that runs the Jolokia agent (``-javaagent:jolokia-agent-jvm-*-javaagent.jar``).

Rounds, targets (static ``targets`` or discovered under ``zkPath``), ``up``,
``scrape_duration_seconds``, ``scrape_samples_scraped``, ``scrapeTimeout``,
``bodySizeLimit``, the counters and the failure handling are the ``prometheus`` source's
(this class extends it); what differs is what is asked and how the answer is read.

Asked, per target and round, for each ObjectName pattern ``mbeans.<n>`` (default
``java.lang:*``): with ``protocol = jolokia`` (the default) ``GET <target>/read/<pattern>``
(the pattern escaped as Jolokia's GET syntax wants: ``!`` as ``!!``, ``/`` as ``!/``); with
``protocol = hadoop`` ``GET <target>?qry=<pattern>``.

Mapping (docs/agent.md): every numeric attribute of every MBean the patterns name becomes a
DOUBLE series named ``<namePrefix><domain>.<attribute>`` (``namePrefix`` default ``jmx.``),
an attribute holding composite data giving one series per numeric leaf, its path joined by
``.`` (``jmx.java.lang.HeapMemoryUsage.used``); the ObjectName's key properties become labels
(``type=Memory``, ``name=G1 Young Generation``), with the target's labels (``job``,
``instance``, ``labels.<key>``) merged as the prometheus source merges them. Characters our
names and label keys refuse become ``_``. Booleans are 0 and 1; strings, arrays and nulls
are left out; ``attributes`` (a regex on the attribute's path, whole match, default all)
keeps only some.

Bad answers: a body that is not JSON or not the protocol's shape fails the scrape (``up``
0). NaN and infinities (Hadoop's servlet writes them as bare ``NaN``/``Infinity``) are left
out and counted with the other refused samples (``SampleRefusedCount``). An MBean named
exactly (no wildcard) that has vanished (Jolokia's 404, or an empty answer of Hadoop's
servlet) is counted (``MBeanMissingCount``) and logged once; the other patterns' samples
are kept and ``up`` stays 1.
"""

from __future__ import annotations

import json
import logging
import math
import re
from typing import Any
from urllib.parse import quote

from collector_agent.context import Context
from collector_agent.exceptions import ScrapeError
from collector_agent.sources.exposition import Scrape
from collector_agent.sources.prometheus import PrometheusSource
from collector_agent.sources.scrape import Target

__all__ = ["JmxSource", "mbean_samples", "parse_object_name"]

log = logging.getLogger(__name__)

_PROPERTY = re.compile(r'\s*([^=,]+)=("(?:[^"\\]|\\.)*"|[^,]*)\s*(?:,|$)')
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.:\-]")
_BAD_KEY_CHARS = re.compile(r"[^A-Za-z0-9_.\-]")
_PROTOCOLS = ("jolokia", "hadoop")


def parse_object_name(name: str) -> tuple[str, dict[str, str]]:
    """``domain:k=v,...`` as (domain, key properties); quoted values unquoted."""
    domain, colon, rest = name.partition(":")
    if not colon or not domain:
        raise ScrapeError(f"{name[:200]!r} is not an MBean name (domain:key=value,...)")
    properties = {}
    for key, value in _PROPERTY.findall(rest):
        if value.startswith('"') and value.endswith('"') and len(value) >= 2:
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        properties[key.strip()] = value
    return domain, properties


def _leaves(value: Any, path: str) -> list[tuple[str, Any]]:
    """Numeric (and boolean) leaves of an attribute's value, with their dotted paths."""
    if isinstance(value, bool):
        return [(path, 1.0 if value else 0.0)]
    if isinstance(value, int | float):
        return [(path, value)]
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in _leaves(item, f"{path}.{key}")]
    return []  # strings, arrays, nulls: no measurement


def mbean_samples(
    beans: dict[str, dict[str, Any]], prefix: str, attributes: re.Pattern[str]
) -> tuple[list[tuple[str, dict[str, str], float]], list[str]]:
    """Samples of ``{mbean name: {attribute: value}}``, and why some were left out."""
    samples: list[tuple[str, dict[str, str], float]] = []
    skipped: list[str] = []
    for bean, values in beans.items():
        domain, properties = parse_object_name(bean)
        labels = {
            _BAD_KEY_CHARS.sub("_", k) if k[:1].isalpha() else f"_{k}": v for k, v in properties.items()
        }
        for attribute, value in values.items():
            for path, number in _leaves(value, attribute):
                if not attributes.fullmatch(path):
                    continue
                number = float(number)
                if not math.isfinite(number):
                    skipped.append(f"{bean} {path} is {number} (not a finite number)")
                    continue
                samples.append((_BAD_NAME_CHARS.sub("_", f"{prefix}{domain}.{path}"), labels, number))
    return samples, skipped


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)  # NaN and Infinity literals accepted: left out later, counted
    except (ValueError, UnicodeDecodeError) as exc:
        raise ScrapeError(f"the answer is not JSON: {str(exc)[:200]}") from None


def _jolokia_path(pattern: str) -> str:
    escaped = pattern.replace("!", "!!").replace("/", "!/").replace('"', '!"')
    return quote(escaped, safe=":=,*?!")


class JmxSource(PrometheusSource):
    counter_names = (*PrometheusSource.counter_names, "MBeanMissingCount")

    def default_path(self, context: Context) -> str:
        return "/jolokia" if context.get_str("protocol", "jolokia") == "jolokia" else "/jmx"

    def configure(self, context: Context) -> None:
        super().configure(context)
        self.protocol = context.get_str("protocol", "jolokia")
        if self.protocol not in _PROTOCOLS:
            raise context.error("protocol", f"{self.protocol!r} is not one of {', '.join(_PROTOCOLS)}")
        self.mbeans = list(context.subset("mbeans").values.values()) or ["java.lang:*"]
        self.prefix = context.get_str("namePrefix", "jmx.")
        try:
            self.attributes = re.compile(context.get_str("attributes", ".*"))
        except re.error as exc:
            raise context.error("attributes", f"bad regex: {exc}") from None
        self._missing: set[tuple[str, str]] = set()

    def _read(self, target: Target, round_ms: int, deadline: float) -> Scrape:
        beans: dict[str, dict[str, Any]] = {}
        for pattern in self.mbeans:
            beans.update(self._read_pattern(target, pattern, deadline))
        samples, skipped = mbean_samples(beans, self.prefix, self.attributes)
        scrape = target.parser.batch_of(samples, target.labels["job"], round_ms)
        if skipped:
            refused_by = {**scrape.refused_by, "NotFinite": len(skipped)}
            return Scrape(
                scrape.batch, scrape.exposed + len(skipped), refused_by, scrape.refusal or skipped[0]
            )
        return scrape

    def _read_pattern(self, target: Target, pattern: str, deadline: float) -> dict[str, dict[str, Any]]:
        exact = not any(c in pattern for c in "*?")
        if self.protocol == "hadoop":
            body, _ = self._fetch(f"{target.url}?qry={quote(pattern, safe=':=,*?')}", deadline)
            answer = _json(body)
            if not isinstance(answer, dict) or not isinstance(answer.get("beans"), list):
                raise ScrapeError("the answer is not Hadoop's JMX JSON (an object with a 'beans' list)")
            beans = {
                str(bean["name"]): {k: v for k, v in bean.items() if k not in ("name", "modelerType")}
                for bean in answer["beans"]
                if isinstance(bean, dict) and isinstance(bean.get("name"), str)
            }
            if exact and not beans:
                self._vanished(target, pattern)
            return beans
        body, _ = self._fetch(f"{target.url.rstrip('/')}/read/{_jolokia_path(pattern)}", deadline)
        answer = _json(body)
        if not isinstance(answer, dict) or "status" not in answer:
            raise ScrapeError("the answer is not a Jolokia response (an object with a 'status')")
        if answer["status"] == 404 or "InstanceNotFound" in str(answer.get("error_type", "")):
            self._vanished(target, pattern)
            return {}
        if answer["status"] != 200 or not isinstance(answer.get("value"), dict):
            raise ScrapeError(f"Jolokia answered {answer.get('status')}: {str(answer.get('error'))[:200]}")
        value: dict[str, Any] = answer["value"]
        if exact:
            return {pattern: value}
        return {name: attrs for name, attrs in value.items() if isinstance(attrs, dict)}

    def _vanished(self, target: Target, pattern: str) -> None:
        self.counters.add("MBeanMissingCount")
        if (target.url, pattern) not in self._missing:
            self._missing.add((target.url, pattern))
            log.warning("source %s: %s has no MBean %s (any more)", self.name, target.url, pattern)
