from __future__ import annotations

import tracemalloc

import pytest

from bookkeeper.framework_labels import framework_labels, host_identity
from bookkeeper.labels import format_labels, format_series, parse_labels, parse_series, parse_series_shared


def test_canonical_text_round_trips_awkward_values() -> None:
    labels = {"z": "last", "a": "x,y=z{}%' \t", "m": "ünï"}
    text = format_labels(labels)
    assert text.startswith("a=") and text.index("m=") < text.index("z=")
    assert parse_labels(text) == labels
    assert parse_series(format_series("n.a:m-e", labels)) == ("n.a:m-e", labels)


def test_host_name_pattern_gives_dc_rack_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "bookkeeper.framework_labels.host_identity", lambda: ("jb-r12-web01", "jb-r12-web01.ex.net")
    )
    labels = framework_labels("web", environ={})
    assert labels == {
        "dc": "jb",
        "rack": "r12",
        "module": "web01",
        "host": "jb-r12-web01",
        "env": "default",
        "context": "web",
    }


def test_environment_then_code_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "bookkeeper.framework_labels.host_identity", lambda: ("jb-r12-web01", "jb-r12-web01.ex.net")
    )
    environ = {"ARTIMON_DC": "par", "ARTIMON_ENV": "prod"}
    labels = framework_labels("web", {"rack": "r1", "context": "ignored"}, environ)
    assert (labels["dc"], labels["rack"], labels["env"], labels["context"]) == (
        "par",
        "r1",
        "prod",
        "web",
    )


def test_custom_pattern_and_no_match(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bookkeeper.framework_labels.host_identity", lambda: ("box", "box.lan"))
    assert "dc" not in framework_labels("c", environ={})
    labels = framework_labels("c", environ={"ARTIMON_HOST_PATTERN": r"(?P<module>[a-z]+)\.(?P<dc>\w+)"})
    assert (labels["module"], labels["dc"]) == ("box", "lan")
    with pytest.raises(ValueError, match="ARTIMON_HOST_PATTERN"):
        framework_labels("c", environ={"ARTIMON_HOST_PATTERN": "("})


def test_real_host_identity_is_a_name() -> None:
    short, fqdn = host_identity()
    assert short and "." not in short and fqdn


def test_long_label_sets_are_parsed_each_time_not_kept() -> None:
    """Found by tests/fuzz (artimon_file): the parse caches kept every label set a sender
    chose, 468 MiB for 5,000 lines of 30 KB sets; only short texts are cached now."""
    texts = [",".join(f"k{j}={'v' * 1000}{i}" for j in range(30)) for i in range(200)]
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for text in texts:
            assert len(parse_labels(text)) == 30
            assert parse_series_shared(f"m{{{text}}}")[1] == parse_labels(text)
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 200_000  # the 200 sets parsed are 6 MB of text
    assert parse_series_shared("m{a=b}") is parse_series_shared("m{a=b}")  # short ones are cached
