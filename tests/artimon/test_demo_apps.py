"""The demo applications: every variable has its first value before anyone can read it."""

from __future__ import annotations

from artimon.demo import DemoApps
from bookkeeper import VarType


def test_every_gauge_has_a_value_before_the_apps_serve() -> None:
    """A gauge's first point is its first sample: a chart of temperatures must not start
    at 0 °C because a poll came before the first update."""
    demo = DemoApps(None, tick=3600)  # no update after the first within this test
    try:
        for bk in demo.bookkeepers:
            for sample in bk.snapshot().samples():
                if sample.type is VarType.DOUBLE:
                    assert sample.value != 0.0, sample
        temperatures = [
            s.value for s in demo.racks.snapshot().samples() if s.name == "rack.temperature.celsius"
        ]
        assert len(temperatures) == 4 and all(20 < t < 35 for t in temperatures)  # type: ignore[operator]
    finally:
        for bk in demo.bookkeepers:
            bk.close()
