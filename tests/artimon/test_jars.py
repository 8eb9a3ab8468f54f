"""The jar cache: Maven resolves a set once, a second call reads the marker, errors are clear."""

from __future__ import annotations

from pathlib import Path

import pytest

from artimon.servers import JarResolutionError, resolve_jars


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ARTIMON_JAR_CACHE", str(tmp_path / "jars"))
    return tmp_path / "jars"


def test_a_set_is_resolved_once_with_its_dependencies(cache: Path) -> None:
    jars = resolve_jars("junit-4.13.2", ["junit:junit:4.13.2"])
    assert {jar.name for jar in jars} == {"junit-4.13.2.jar", "hamcrest-core-1.3.jar"}
    assert all(jar.parent == cache / "junit-4.13.2" for jar in jars)
    marker = cache / "junit-4.13.2" / "artifacts.txt"
    written = marker.stat().st_mtime_ns
    assert resolve_jars("junit-4.13.2", ["junit:junit:4.13.2"]) == jars
    assert marker.stat().st_mtime_ns == written, "a resolved set must not run Maven again"


def test_an_unknown_artifact_is_a_clear_error_and_leaves_no_marker(cache: Path) -> None:
    with pytest.raises(JarResolutionError, match="could not resolve 'nothing-1'"):
        resolve_jars("nothing-1", ["org.artimon.nowhere:no-such-artifact:0.0.1"])
    assert not (cache / "nothing-1" / "artifacts.txt").exists()


@pytest.mark.parametrize(
    ("name", "artifacts", "message"),
    [
        ("../escape", ["junit:junit:4.13.2"], "jar set name"),
        ("ok", [], "names no artifact"),
        ("ok", ["junit:junit"], "is not group:artifact:version"),
    ],
)
def test_bad_requests_are_refused_before_maven_runs(
    cache: Path, name: str, artifacts: list[str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_jars(name, artifacts)
