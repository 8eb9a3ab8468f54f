"""The round ledger: a round is complete only when every terminal holds all its samples; it
says where a round waits; it stays bounded; its HTTP report refuses garbage."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from collector_agent import MonitorServer, RoundLedger
from collector_agent.monitoring import MAX_REPORT_BYTES

R1, R2 = 1_764_212_400_000, 1_764_212_460_000
A, B = "10.0.0.1:7000:a", "10.0.0.2:7000:b"


def fed_ledger() -> RoundLedger:
    ledger = RoundLedger(clock=lambda: R2 / 1000 + 90)
    ledger.declare("vhms", "sink out (channel ch)")
    ledger.declare("history", "sink raw (channel land)")
    ledger.expect(R1, A, 10)
    ledger.expect(R1, B, 5)
    return ledger


def round_of(ledger: RoundLedger, round_ms: int) -> dict[str, object]:
    return next(entry for entry in ledger.view()["rounds"] if entry["round"] == round_ms)


def test_a_round_is_complete_only_when_both_terminals_hold_all_its_samples() -> None:
    ledger = fed_ledger()
    ledger.commit("vhms", R1, A, 10)
    entry = round_of(ledger, R1)
    assert entry["state"] == "waiting" and entry["committed"] == {"history": 0, "vhms": 10}
    assert entry["waiting"] == [
        {"terminal": "history", "endpoints": 2, "samples": 15, "where": ["sink raw (channel land)"]},
        {"terminal": "vhms", "endpoints": 1, "samples": 5, "where": ["sink out (channel ch)"]},
    ]
    ledger.commit("vhms", R1, B, 5)
    ledger.land("raw-1-1.avro", R1, A, 10)
    ledger.land("raw-1-2.avro", R1, B, 5)
    assert round_of(ledger, R1)["waiting"] == [
        {
            "terminal": "history",
            "endpoints": 2,
            "samples": 15,
            "where": [
                "landing file raw-1-1.avro (not yet committed by raw_ingest)",
                "landing file raw-1-2.avro (not yet committed by raw_ingest)",
            ],
        }
    ]
    assert ledger.files_committed(["file:///landing/raw-1-1.avro"]) == 1
    assert round_of(ledger, R1)["state"] == "waiting"
    assert ledger.apply_report({"files": ["raw-1-2.avro"]}) == 1
    entry = round_of(ledger, R1)
    assert entry["state"] == "complete" and entry["waiting"] == []
    assert entry["committed"] == {"history": 15, "vhms": 15} and entry["expected"] == 15
    assert ledger.gauges()["RoundsIncomplete"] == 0


def test_a_batch_delivered_twice_counts_once() -> None:
    ledger = fed_ledger()
    for _ in range(3):  # at-least-once: a rolled-back batch delivered again
        ledger.commit("vhms", R1, A, 10)
    assert round_of(ledger, R1)["committed"]["vhms"] == 10  # type: ignore[index]


def test_the_oldest_incomplete_round_and_its_age() -> None:
    ledger = fed_ledger()
    ledger.expect(R2, A, 10)
    for terminal in ("vhms", "history"):
        ledger.commit(terminal, R2, A, 10)
    view = ledger.view()
    assert [entry["round"] for entry in view["rounds"]] == [R2, R1]  # newest first
    assert view["rounds_incomplete"] == 1 and view["oldest_incomplete_round"] == R1
    assert view["oldest_incomplete_age_s"] == 150.0
    assert ledger.gauges()["OldestIncompleteRoundAgeSeconds"] == 150.0


def test_a_batch_dropped_at_the_source_or_refused_leaves_its_round_incomplete() -> None:
    ledger = fed_ledger()
    ledger.drop(R1, B)
    for terminal in ("vhms", "history"):
        ledger.commit(terminal, R1, A, 10)
    entry = round_of(ledger, R1)
    assert entry["state"] == "incomplete" and entry["dropped_at_source"] == 5
    assert {w["terminal"]: w["where"] for w in entry["waiting"]} == {  # type: ignore[attr-defined]
        "history": ["dropped at the source"],
        "vhms": ["dropped at the source"],
    }
    ledger.expect(R2, A, 10)
    ledger.refuse("vhms", [R2], 3)
    assert round_of(ledger, R2)["state"] == "incomplete" and round_of(ledger, R2)["refused"] == {"vhms": 3}


def test_the_ledger_keeps_the_last_rounds_and_counts_what_it_evicts() -> None:
    ledger = RoundLedger(max_rounds=3)
    ledger.declare("vhms", "sink out (channel ch)")
    for n in range(5):
        ledger.expect(R1 + n * 60_000, A, 1)
        ledger.land(f"raw-{n}.avro", R1 + n * 60_000, A, 1)
    ledger.commit("vhms", R1 + 4 * 60_000, A, 1)
    ledger.commit("vhms", R1, A, 1)  # evicted: not held, counted
    view = ledger.view()
    assert [entry["round"] for entry in view["rounds"]] == [R1 + 4 * 60_000, R1 + 3 * 60_000, R1 + 2 * 60_000]
    assert view["evicted"] == 2 and view["evicted_incomplete"] == 2
    assert ledger.gauges()["UntrackedCommitCount"] == 1
    assert ledger.files_committed(["raw-0.avro", "raw-1.avro"]) == 0  # forgotten with their rounds
    with pytest.raises(ValueError, match="max_rounds must be at least 1, not 0"):
        RoundLedger(max_rounds=0)


def test_a_round_waits_for_the_terminals_declared_when_it_was_polled() -> None:
    ledger = fed_ledger()
    ledger.withdraw("history", "sink raw (channel land)")  # a reload removed the raw sink
    assert set(ledger.view()["terminals"]) == {"vhms"}
    assert {w["terminal"]: w["where"] for w in round_of(ledger, R1)["waiting"]} == {  # type: ignore[attr-defined]
        "history": ["no history report yet"],
        "vhms": ["sink out (channel ch)"],
    }
    ledger.expect(R2, A, 10)
    ledger.commit("vhms", R2, A, 10)
    assert round_of(ledger, R2)["state"] == "complete" and round_of(ledger, R2)["committed"] == {"vhms": 10}


def test_a_terminal_reporting_from_another_process_is_awaited_from_then_on() -> None:
    ledger = RoundLedger()
    ledger.declare("history", "sink raw (channel land)")
    ledger.expect(R1, A, 10)
    ledger.expect(R1, B, 5)
    ledger.apply_report({"terminal": "vhms", "commits": [[R1, A, 10]]})
    assert {w["terminal"]: w["samples"] for w in round_of(ledger, R1)["waiting"]} == {  # type: ignore[attr-defined]
        "history": 15,
        "vhms": 5,
    }
    ledger.expect(R2, A, 10)
    assert [w["terminal"] for w in round_of(ledger, R2)["waiting"]] == ["history", "vhms"]  # type: ignore[attr-defined]


def test_a_complete_round_keeps_its_totals_only() -> None:
    ledger = fed_ledger()
    for terminal in ("vhms", "history"):
        ledger.commit(terminal, R1, A, 10)
        ledger.commit(terminal, R1, B, 5)
    entry = ledger._rounds[R1]
    assert entry.state == "complete" and not entry.expected and not any(entry.pending.values())
    ledger.commit("vhms", R1, A, 10)  # a replay of a complete round changes nothing
    assert round_of(ledger, R1)["committed"] == {"history": 15, "vhms": 15}


def test_a_round_names_at_most_five_landing_files() -> None:
    ledger = RoundLedger()
    ledger.declare("history", "sink raw (channel land)")
    for n in range(8):
        ledger.expect(R1, f"10.0.0.{n}:7000:u", 1)
        ledger.land(f"raw-{n}.avro", R1, f"10.0.0.{n}:7000:u", 1)
    ledger.expect(R1, "10.0.0.9:7000:u", 1)
    [waiting] = round_of(ledger, R1)["waiting"]  # type: ignore[misc]
    assert waiting["where"] == [
        "3 more landing files",
        *(f"landing file raw-{n}.avro (not yet committed by raw_ingest)" for n in range(5)),
        "sink raw (channel land)",
    ]


@pytest.mark.parametrize(
    ("report", "reason"),
    [
        ([], "a report is an object with files, or terminal and commits"),
        ({"files": "raw.avro"}, "files must be a list of at most 100000 names"),
        ({"files": [""]}, "a file name is a string of 1 to 1024 characters"),
        ({"commits": [[R1, A, 1]]}, "commits need a terminal"),
        ({"terminal": "disk", "commits": [[R1, A, 1]]}, "terminal 'disk' is none of vhms, history"),
        ({"terminal": "vhms", "commits": [[R1, A, -1]]}, "a commit is [round_ms, endpoint, samples]"),
        ({"terminal": "vhms", "commits": [["1", A, 1]]}, "a commit is [round_ms, endpoint, samples]"),
        ({"files": [], "extra": 1}, "a report is an object with files, or terminal and commits"),
    ],
)
def test_a_bad_report_is_refused_and_counted(report: object, reason: str) -> None:
    ledger = fed_ledger()
    with pytest.raises(ValueError) as refused:
        ledger.apply_report(report)
    assert str(refused.value).startswith(reason)
    assert ledger.gauges()["ReportsRefusedCount"] == 1


@pytest.fixture
def served() -> Iterator[tuple[RoundLedger, str]]:
    ledger = fed_ledger()
    server = MonitorServer(lambda: {"LEDGER.rounds": ledger.gauges()}, "a1", "127.0.0.1", 0, ledger=ledger)
    server.start()
    try:
        yield ledger, f"{server.url}/ledger"
    finally:
        server.stop()


def test_the_monitoring_port_serves_the_ledger_and_takes_reports(served: tuple[RoundLedger, str]) -> None:
    ledger, url = served
    ledger.land("raw-9.avro", R1, A, 10)
    answer = httpx.post(url, json={"files": ["raw-9.avro"]}, timeout=10)
    assert answer.status_code == 200 and answer.json() == {"recorded": 1}
    answer = httpx.post(url, json={"terminal": "vhms", "commits": [[R1, A, 10], [R1, B, 5]]}, timeout=10)
    assert answer.json() == {"recorded": 2}
    view = httpx.get(url, timeout=10).json()
    assert view["agent"] == "a1" and view["rounds"][0]["committed"] == {"history": 10, "vhms": 15}
    metrics = httpx.get(url.replace("/ledger", "/metrics"), params={"format": "prometheus"}, timeout=10).text
    assert "# TYPE flume_rounds_incomplete gauge" in metrics
    assert 'flume_rounds_incomplete{type="LEDGER",component="rounds",agent="a1"} 1.0' in metrics


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        (b"\xff\xfe not json", 400, ""),
        (b'{"files": [1]}', 400, "a file name is a string of 1 to 1024 characters"),
        (json.dumps({"files": ["x" * 1000] * 9000}).encode(), 413, f"a report is at most {MAX_REPORT_BYTES}"),
    ],
)
def test_the_monitoring_port_refuses_garbage_and_oversized_reports(
    served: tuple[RoundLedger, str], body: bytes, status: int, error: str
) -> None:
    ledger, url = served
    answer = httpx.post(url, content=body, headers={"content-type": "application/json"}, timeout=10)
    assert answer.status_code == status and error in answer.json()["error"]
    assert round_of(ledger, R1)["committed"] == {"history": 0, "vhms": 0}
