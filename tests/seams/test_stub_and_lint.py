"""The hand-written stub of the Rust extension matches the built module (``mypy.stubtest``)."""

from __future__ import annotations

import subprocess
import sys


def test_core_stub_matches_the_extension():
    r = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "sessiontree._core"], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success" in r.stdout
