"""The test run never writes into the user's real folders (tests/conftest.py ``_suite_home``):
while a test runs, the home folder, the XDG folders, Pi's agent folder and the index cache are
temporary, ``PI_CODING_AGENT_SESSION_DIR`` is unset, and a session created with Pi's defaults
lands below the run's temporary folder."""

from __future__ import annotations

import os
from pathlib import Path

from sessiontree import Session, index_cache
from sessiontree.paths import agent_dir, default_session_dir
from tests.conftest import SUITE_HOME_VARS


def test_the_users_folders_are_temporary(tmp_path_factory):
    base = tmp_path_factory.getbasetemp().resolve()
    for var in SUITE_HOME_VARS:
        assert Path(os.environ[var]).resolve().is_relative_to(base), var
    assert "PI_CODING_AGENT_SESSION_DIR" not in os.environ
    assert Path.home().resolve().is_relative_to(base)
    assert agent_dir().resolve().is_relative_to(base)
    folder = index_cache.resolve()
    assert folder is not None and Path(folder).resolve().is_relative_to(base)


def test_a_session_made_with_pis_defaults_stays_in_the_run(tmp_path_factory):
    s = Session.create("/some/project")
    assert s.path.parent == default_session_dir("/some/project")
    assert s.path.resolve().is_relative_to(tmp_path_factory.getbasetemp().resolve())


def test_a_test_may_still_set_them(monkeypatch, tmp_path):
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "mine"))
    assert agent_dir() == tmp_path / "mine"
