"""Suite-wide fixtures. Only one: no test reads or writes the real index cache."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_index_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own saved-index folder (``SESSIONTREE_INDEX_CACHE``), so none reads
    or pollutes ``~/.cache/sessiontree`` or another test's saved indexes."""
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE", str(tmp_path_factory.mktemp("index-cache")))
