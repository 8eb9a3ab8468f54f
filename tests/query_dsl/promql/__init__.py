"""PromQL tests: a package, so that its conftest is not the top-level ``conftest`` module
(tests import names from tests/conftest.py as ``conftest``)."""
