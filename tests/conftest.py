"""Suite-wide fixtures. Only one concern: no test reads or writes the real index cache."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _suite_index_cache(tmp_path_factory):
    """The whole run's saved-index folder (``SESSIONTREE_INDEX_CACHE``), set before any fixture
    of a wider scope than a test opens a session (module fixtures run before function ones)."""
    old = os.environ.get("SESSIONTREE_INDEX_CACHE")
    os.environ["SESSIONTREE_INDEX_CACHE"] = str(tmp_path_factory.mktemp("suite-index-cache"))
    yield
    if old is None:
        os.environ.pop("SESSIONTREE_INDEX_CACHE", None)
    else:
        os.environ["SESSIONTREE_INDEX_CACHE"] = old


@pytest.fixture(autouse=True)
def _private_index_cache(_suite_index_cache, tmp_path_factory, monkeypatch):
    """Every test gets its own saved-index folder, so none reads or pollutes
    ``~/.cache/sessiontree`` or another test's saved indexes."""
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE", str(tmp_path_factory.mktemp("index-cache")))
