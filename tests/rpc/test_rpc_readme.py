"""The README's RPC examples (the ``hello`` handshake's two lines, ``follow`` without ``since``
replaying the session first) are what the real server prints: the documented commands run as
written in an empty folder, and every line of the documented output is compared."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def _section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("\n### The `hello` handshake and `follow`")
    end = text.index("\n## ", start + 1)
    return text[start:end]


@pytest.mark.slow  # a server or a process pool starts (seconds)
def test_the_readme_hello_and_follow_examples_match_the_server(tmp_path):
    sec = _section()
    blocks = re.findall(r"```(\w*)\n(.*?)```", sec, re.S)
    assert [lang for lang, _ in blocks[:2]] == ["bash", ""]
    script, shown = blocks[0][1], blocks[1][1].splitlines()
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == shown
    # the two reply lines of hello: an event, then the response with the same fields
    assert '"type":"hello"' in shown[0] and '"command":"hello"' in shown[1]
