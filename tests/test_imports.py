"""Packages meet only at their curated surfaces: a package imports from another package
(its top level or a named sub-package such as ``bookkeeper.wire``), never from one of its
modules, never a private ``_name``, and only names listed in that package's ``__all__``; and
nothing imports "upwards" (docs/architecture.md).

``bookkeeper`` holds two rooms: the app library (``bookkeeper``, ``bookkeeper.wire``,
``bookkeeper.zk``) and the platform's ground (``bookkeeper.ground``), which imports the app
library through its surfaces and is never imported by it."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GROUND = "bookkeeper.ground"
PACKAGES = ["bookkeeper", GROUND, "collector_agent", "vhms", "query_dsl", "spark_jobs", "artimon"]
MAY_IMPORT = {
    "bookkeeper": set(),
    GROUND: {"bookkeeper"},
    "vhms": {"bookkeeper", GROUND},
    "collector_agent": {"bookkeeper", GROUND, "vhms"},
    "query_dsl": {"bookkeeper", GROUND, "vhms"},
    "spark_jobs": {"bookkeeper", GROUND, "vhms", "query_dsl"},
    "artimon": {"bookkeeper", GROUND, "collector_agent", "vhms", "query_dsl", "spark_jobs"},
}
# bookkeeper's test harness (launchers, test apps) spawns processes: it is not the app library
HARNESS = ROOT / "bookkeeper" / "testing"


def _package_of(module: str) -> str:
    """The package (of PACKAGES, the longest that fits) a dotted module belongs to."""
    return max((p for p in PACKAGES if module == p or module.startswith(p + ".")), key=len, default="")


def _files(package: str) -> list[Path]:
    """The package's own files: a sub-package listed in PACKAGES is not its parent's."""
    inner = [ROOT / p.replace(".", "/") for p in PACKAGES if p.startswith(package + ".")]
    paths = sorted((ROOT / package.replace(".", "/")).rglob("*.py"))
    return [path for path in paths if not any(path.is_relative_to(sub) for sub in inner)]


def _cross_imports(package: str) -> list[tuple[str, int, str, list[str]]]:
    """(file, line, module, names) of every import of another of our packages."""
    found = []
    for path in _files(package):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules = [(node.module, [alias.name for alias in node.names])]
            elif isinstance(node, ast.Import):
                modules = [(alias.name, []) for alias in node.names]
            else:
                continue
            for module, names in modules:
                if _package_of(module) not in ("", package):
                    found.append((str(path.relative_to(ROOT)), node.lineno, module, names))
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_cross_package_imports_use_only_curated_surfaces(package: str) -> None:
    wrong = []
    for where, line, module, names in _cross_imports(package):
        place = f"{where}:{line}: {module}"
        imported_package = _package_of(module)
        harness = (ROOT / where).is_relative_to(HARNESS)
        if imported_package not in MAY_IMPORT[package] and not (harness and imported_package == GROUND):
            wrong.append(f"{place}: {package} may not import {imported_package}")
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


def _is_testing(module: str) -> bool:
    return "testing" in module.split(".")


def _imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in ``path``, relative ones resolved; ``from m import n``
    counts as ``m`` and ``m.n`` (``n`` may be a module)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    package = parts if path.name == "__init__.py" else parts[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found += [(node.lineno, module), *((node.lineno, f"{module}.{a.name}") for a in node.names)]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_no_product_module_imports_a_testing_module(package: str) -> None:
    """Harnesses serve tests; launchers and whatever a command runs are product code
    (docs/architecture.md), so no module outside a ``testing`` module or package imports
    one, of its own package or another's."""
    wrong = []
    for path in sorted((ROOT / package).rglob("*.py")):
        where = path.relative_to(ROOT)
        if _is_testing(".".join(where.with_suffix("").parts)):
            continue
        wrong += [f"{where}:{line}: imports {m}" for line, m in _imported(path) if _is_testing(m)]
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
