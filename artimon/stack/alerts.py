"""The alerting rules of ``<data-dir>/alerts.yaml`` (the demo's with ``--demo``, copied at
the first start), evaluated on a thread over the in-process store, as a component; without a
rules file it runs nothing and prints nothing. Its state is kept in ``alerts-state.json``;
notifications that write files write them beside it."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from artimon.stack.api import QueryApi
from artimon.stack.vhms import Vhms
from query_dsl.alerts import DEMO_RULES, AlertEngine, Evaluation, EvaluatorSource, iso_time, load_rules
from vhms import LocalClient


def report_evaluation(evaluation: Evaluation) -> None:
    """A line per change of an alert's state, and per rule that failed (``artimon alerts``'
    lines, and ``artimon up``'s)."""
    at = iso_time(evaluation.at_ms)
    for transition in evaluation.transitions:
        alert = transition.alert
        print(
            f"{at} {alert.state.value.upper():<8} {alert.rule} {alert.series or '(number)'} "
            f"value={alert.value:g} (was {transition.previous.value})",
            flush=True,
        )
    for rule, error in evaluation.errors.items():
        print(f"{at} ERROR    {rule}: {error}", flush=True)


class Alerts:
    name = "alerts"

    def __init__(self, vhms: Vhms, api: QueryApi, data: Path, *, demo: bool) -> None:
        self.vhms = vhms
        self.api = api
        self.data = data
        self.rules = data / "alerts.yaml"
        self.demo = demo
        self.engine: AlertEngine | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ready = ""

    def start(self) -> None:
        if self.demo and not self.rules.exists():
            shutil.copy(DEMO_RULES, self.rules)
        if not self.rules.exists():
            return
        config = load_rules(self.rules)
        source = LocalClient(self.vhms.service.store)
        self.engine = AlertEngine(config, EvaluatorSource(source), state_file=self.data / "alerts-state.json")
        self.api.alert_metrics.engine = self.engine
        self._thread = threading.Thread(
            target=self.engine.run, args=(self._stop, report_evaluation), name="alerts", daemon=True
        )
        self._thread.start()
        self._ready = (
            f"[ready] alerts     {len(config.rules)} rules from {self.rules}, "
            f"every {config.interval_ms / 1000:g} s, notifications in {self.data / 'alerts.log'}"
        )

    def ready_lines(self) -> list[str]:
        return [self._ready] if self._ready else []

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.engine is not None:
            self.engine.close(10.0)
