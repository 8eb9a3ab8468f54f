"""Each package's ``__all__`` names exactly what it exports, and every name resolves."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = [
    "bookkeeper",
    "bookkeeper.ground",
    "collector_agent",
    "vhms",
    "vhms.server",
    "query_dsl",
    "query_dsl.http",
    "query_dsl.dashboards",
    "query_dsl.alerts",
    "query_dsl.alerts.notifiers",
    "spark_jobs",
    "artimon",
    "artimon.servers",
    "artimon.stack",
    "artimon.status",
]


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_explicit_and_resolves(package: str) -> None:
    module = importlib.import_module(package)
    exported = module.__all__
    assert len(exported) == len(set(exported)), "duplicate names in __all__"
    for name in exported:
        assert hasattr(module, name), f"{package}.__all__ names missing {name}"
    public = {
        n for n, v in vars(module).items() if not n.startswith("_") and not isinstance(v, type(importlib))
    }
    assert public <= set(exported) | {"annotations"}, f"unlisted public names: {public - set(exported)}"
