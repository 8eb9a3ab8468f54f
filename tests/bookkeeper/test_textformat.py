from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pytest

from bookkeeper import Bookkeeper, Sample, TextFormatError, VarType, format_line, parse_lines
from bookkeeper.export import write_snapshot_file


def _bookkeeper() -> Bookkeeper:
    bk = Bookkeeper("export-test", labels={"module": "web01"}, environ={})
    bk.integer("hits", method="GET", path="/a b,c").set(-12)
    bk.double("load").set(1e-300)
    bk.double("ratio").set(0.1)
    bk.double("odd").add(math.inf)
    bk.boolean("up").set(False)
    bk.string("motd", lang="fr").set("l'été, 100% {ok}\tfin")
    return bk


def test_export_round_trips_through_the_parser(tmp_path: Path) -> None:
    bk = _bookkeeper()
    path = tmp_path / "web01.artimon"
    assert write_snapshot_file(bk, path) == 6
    parsed = list(parse_lines(path.read_text(encoding="utf-8").splitlines()))
    assert sorted(parsed) == sorted(bk.snapshot().samples())
    assert [p.name for p in tmp_path.iterdir()] == ["web01.artimon"]  # the .<ts> file was renamed


def test_exporter_writes_periodically_named_after_the_module(tmp_path: Path) -> None:
    bk = _bookkeeper()
    exporter = bk.export_to_file(tmp_path, every=0.05)
    try:
        deadline = time.monotonic() + 10
        while exporter.writes < 3:
            assert time.monotonic() < deadline, "exporter did not write three times"
            time.sleep(0.01)
    finally:
        bk.close()
    assert exporter.path == tmp_path / "web01.artimon"
    assert len(list(parse_lines(exporter.path.read_text().splitlines()))) == 6


def test_exporter_counts_errors_instead_of_raising(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    bk = _bookkeeper()
    exporter = bk.export_to_file(blocker, every=3600)
    exporter.export_now()
    bk.close()
    assert exporter.errors >= 1 and exporter.writes == 0


def test_lines_in_the_wild_parse() -> None:
    text = """
# written by an SNMP poller
1377269041486 lb.ltm.node.requests{class=lb,host=device1,name=/env/node_name} 42
1377269041486 temp{rack=r1} 21.5
1377269041486 fan.ok{} T
1377269041486 model{} 'HP%20DL380'
"""
    samples = list(parse_lines(text.splitlines()))
    assert samples[0] == Sample(
        "lb.ltm.node.requests",
        {"class": "lb", "host": "device1", "name": "/env/node_name"},
        VarType.INTEGER,
        42,
        1377269041486,
    )
    assert [(s.type, s.value) for s in samples[1:]] == [
        (VarType.DOUBLE, 21.5),
        (VarType.BOOLEAN, True),
        (VarType.STRING, "HP DL380"),
    ]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("1377269041486 x{} 1 extra", "expected"),
        ("12a x{} 1", "timestamp"),
        ("1 x 1", "name{labels}"),
        ("1 9x{} 1", "invalid variable name"),
        ("1 x{a} 1", "key=value"),
        ("1 x{} yes", "none of INTEGER"),
        ("1 x{} 'unterminated", "none of INTEGER"),
        ("1 x{} '%ff'", "bad percent-escape"),
        ("1 x{k=%ff} 1", "percent-escape"),
        ("1 x{} " + "9" * 70000, "longer than"),
    ],
)
def test_bad_lines_are_refused_with_their_number(line: str, reason: str) -> None:
    with pytest.raises(TextFormatError, match=rf"line 2: .*{reason}"):
        list(parse_lines(["1 ok{} 1", line]))


def test_format_line_is_the_documented_form() -> None:
    sample = Sample("a.b", {"k": "v w"}, VarType.DOUBLE, 2.0, 5)
    assert format_line(sample) == "5 a.b{k=v%20w} 2.0"
    assert os.linesep not in format_line(sample)
