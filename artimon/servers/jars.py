"""Apache's own server jars, resolved with Maven once into a cache outside the repository.

``resolve_jars("kafka-4.1.0", ["org.apache.kafka:kafka_2.13:4.1.0"])`` writes a throw-away
``pom.xml`` naming the artifacts, runs ``mvn dependency:copy-dependencies`` into
``<cache>/kafka-4.1.0/`` and returns the jar paths. The cache is ``$ARTIMON_JAR_CACHE``, else
``~/.cache/artimon/jars``; nothing is ever written into the repository. A finished set is
marked by ``artifacts.txt`` (the artifact list it was resolved for), so the second call costs
one file read; a different list resolves the set again. Concurrent callers (pytest workers,
a benchmark beside a test run) serialise on a lock file per set, and Maven's progress goes to
stderr as one line per set ("resolving kafka-4.1.0 with Maven (first run only) ...").

Lifecycle of a set: MISSING --resolve--> RESOLVING --mvn ok--> READY; a failed ``mvn`` leaves
it MISSING (the marker is written last) and raises :class:`JarResolutionError` with Maven's
last lines.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

__all__ = ["JarResolutionError", "jar_cache", "resolve_jars"]

_SET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_MARKER = "artifacts.txt"
_MVN_TIMEOUT_S = 1800.0


class JarResolutionError(RuntimeError):
    """Maven could not resolve a jar set (no ``mvn``, no network, an unknown artifact)."""


def jar_cache() -> Path:
    """The cache root: ``$ARTIMON_JAR_CACHE`` or ``~/.cache/artimon/jars``."""
    configured = os.environ.get("ARTIMON_JAR_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "artimon" / "jars"


def _coordinates(artifact: str) -> tuple[str, str, str, str]:
    """``group:artifact:version[:classifier]`` into its four parts ('' for no classifier)."""
    parts = artifact.split(":")
    if len(parts) not in (3, 4) or not all(parts):
        raise ValueError(f"artifact {artifact!r} is not group:artifact:version[:classifier]")
    return parts[0], parts[1], parts[2], parts[3] if len(parts) == 4 else ""


def _pom(artifacts: Sequence[str]) -> str:
    dependencies = []
    for artifact in artifacts:
        group, name, version, classifier = _coordinates(artifact)
        extra = f"<classifier>{escape(classifier)}</classifier>" if classifier else ""
        dependencies.append(
            f"<dependency><groupId>{escape(group)}</groupId>"
            f"<artifactId>{escape(name)}</artifactId><version>{escape(version)}</version>"
            f"{extra}</dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">'
        "<modelVersion>4.0.0</modelVersion><groupId>artimon.jars</groupId>"
        "<artifactId>set</artifactId><version>1</version><packaging>pom</packaging>"
        f"<dependencies>{''.join(dependencies)}</dependencies></project>\n"
    )


def resolve_jars(name: str, artifacts: Sequence[str]) -> list[Path]:
    """The jars of ``artifacts`` and their runtime dependencies, resolved once into the cache.

    ``name`` names the set's directory (for example ``hadoop-3.5.0``); ``artifacts`` are
    Maven coordinates ``group:artifact:version[:classifier]``.
    """
    if not _SET_NAME.match(name):
        raise ValueError(f"jar set name {name!r} must be letters, digits, '.', '_' or '-'")
    if not artifacts:
        raise ValueError(f"jar set {name!r} names no artifact")
    wanted = "\n".join(artifacts) + "\n"
    root = jar_cache() / name
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = root / _MARKER
        if not (marker.exists() and marker.read_text() == wanted):
            _resolve(name, artifacts, root)
            marker.write_text(wanted)
    return sorted(root.glob("*.jar"))


def _resolve(name: str, artifacts: Sequence[str], root: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarResolutionError(f"jar set {name!r} needs Maven: install it (Debian: apt-get install maven)")
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / "pom.xml").write_text(_pom(artifacts))
    print(
        f"resolving {name} with Maven into {root} (first run only) ...",
        file=sys.stderr,
        flush=True,
    )
    started = time.monotonic()
    command = [
        mvn,
        "-q",
        "-B",
        "-f",
        str(root / "pom.xml"),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={root}",
        "-DincludeScope=runtime",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=_MVN_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise JarResolutionError(f"mvn did not resolve {name!r} within {_MVN_TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise JarResolutionError(f"mvn could not resolve {name!r}: {' '.join(command)}\n{tail}")
    count = len(list(root.glob("*.jar")))
    print(
        f"resolved {name}: {count} jars in {time.monotonic() - started:.0f} s",
        file=sys.stderr,
        flush=True,
    )
