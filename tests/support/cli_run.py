"""The CLI run in-process for tests: ``run_cli(*argv)`` gives (exit code, stdout, stderr)."""

from __future__ import annotations

import contextlib
import io
import os

from sessiontree import cli


def run_cli(*argv: str | os.PathLike[str]) -> tuple[int, str, str]:
    """Runs ``sessiontree`` with ``argv`` (paths as strings) and captures what it prints.

    Fails the test when the CLI printed a traceback: every failure must be a message and an
    exit code.
    """
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main([str(a) for a in argv])
    assert "Traceback" not in err.getvalue()
    return rc, out.getvalue(), err.getvalue()
