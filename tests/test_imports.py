"""Packages meet only at their curated surfaces: a package imports from another package
(its top level or a named sub-package such as ``bookkeeper.wire``), never from one of its
modules, never a private ``_name``, and only names listed in that package's ``__all__``; and
nothing imports "upwards" (docs/architecture.md)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["bookkeeper", "collector_agent", "vhms", "query_dsl", "spark_jobs", "artimon"]
MAY_IMPORT = {
    "bookkeeper": set(),
    "vhms": {"bookkeeper"},
    "collector_agent": {"bookkeeper", "vhms"},
    "query_dsl": {"bookkeeper", "vhms"},
    "spark_jobs": {"bookkeeper", "vhms", "query_dsl"},
    "artimon": {"bookkeeper", "collector_agent", "vhms", "query_dsl", "spark_jobs"},
}


def _cross_imports(package: str) -> list[tuple[str, int, str, list[str]]]:
    """(file, line, module, names) of every import of another of our packages."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules = [(node.module, [alias.name for alias in node.names])]
            elif isinstance(node, ast.Import):
                modules = [(alias.name, []) for alias in node.names]
            else:
                continue
            for module, names in modules:
                top = module.partition(".")[0]
                if top in PACKAGES and top != package:
                    found.append((str(path.relative_to(ROOT)), node.lineno, module, names))
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_cross_package_imports_use_only_curated_surfaces(package: str) -> None:
    wrong = []
    for where, line, module, names in _cross_imports(package):
        place = f"{where}:{line}: {module}"
        if module.partition(".")[0] not in MAY_IMPORT[package]:
            wrong.append(f"{place}: {package} may not import {module.partition('.')[0]}")
            continue
        if any(part.startswith("_") for part in module.split(".")):
            wrong.append(f"{place} is private")
            continue
        imported = importlib.import_module(module)
        if not hasattr(imported, "__path__"):
            wrong.append(f"{place} is a module, not a package: import from its package")
            continue
        exported = set(getattr(imported, "__all__", ()))
        wrong.extend(f"{place}: {name} is not in its __all__" for name in names if name not in exported)
    assert not wrong, "\n".join(wrong)


# VHMS's server face: whether these live at vhms's top level or in a ``vhms.server`` package
VHMS_SERVER_NAMES = {
    "Store",
    "VhmsService",
    "WriteAheadLog",
    "load_snapshot",
    "save_snapshot",
    "restore_or_empty",
    "replay_wal",
    "SeriesIndex",
}


def test_query_dsl_reads_vhms_through_its_client_surface_only() -> None:
    """query_dsl reads VHMS through a client (``vhms.LocalClient`` in process, the sharded
    client over Thrift), never the store, the service, the log or the snapshots; its test
    harness (``query_dsl.testing``) fills a store for tests, as a test would."""
    wrong = []
    for where, line, module, names in _cross_imports("query_dsl"):
        if where == "query_dsl/testing.py":
            continue
        if module == "vhms.server" or module.startswith("vhms.server.") or "server" in names:
            wrong.append(f"{where}:{line}: imports {module}")
        wrong.extend(
            f"{where}:{line}: imports {name} from {module}"
            for name in names
            if module.partition(".")[0] == "vhms" and name in VHMS_SERVER_NAMES
        )
    for path in sorted((ROOT / "query_dsl").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in VHMS_SERVER_NAMES
                and isinstance(node.value, ast.Name)
                and node.value.id == "vhms"
            ):
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: uses vhms.{node.attr}")
    assert not wrong, "\n".join(wrong)
