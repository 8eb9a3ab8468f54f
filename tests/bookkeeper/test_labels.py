from __future__ import annotations

import pytest

from bookkeeper.framework_labels import framework_labels, host_identity
from bookkeeper.labels import format_labels, format_series, parse_labels, parse_series


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
