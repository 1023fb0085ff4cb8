"""The README's API tour runs as written (issue 11 item 26).

The tour's Python blocks are taken from README.md and run in a fresh interpreter whose ``HOME``
is a temporary folder holding the bundled ``examples/session.jsonl`` at the path the tour opens
(``~/.pi/agent/sessions/--home-me-proj--/2026-01-01T00-00-00-000Z_<uuid>.jsonl``). The one
substitution, documented in the README: ``<uuid>`` becomes the example's session id. The
tiktoken block runs only when ``o200k_base.tiktoken`` is at hand (no network in tests).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLE = ROOT / "examples" / "session.jsonl"


def tour_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    start = text.index("\n## API tour")
    end = text.index("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end], re.S)


def test_the_readme_api_tour_runs_as_written(tmp_path):
    blocks = tour_blocks()
    assert len(blocks) >= 2
    tour = blocks[0]
    m = re.search(r'Session\.open\("(~/[^"]+)"\)', tour)
    assert m, "the tour opens a session by a ~ path"
    sid = json.loads(EXAMPLE.read_text().splitlines()[0])["id"]
    rel = m.group(1).replace("<uuid>", sid)[2:]
    home = tmp_path / "home"
    target = home / rel
    target.parent.mkdir(parents=True)
    shutil.copyfile(EXAMPLE, target)
    code = "\n".join(b.replace("<uuid>", sid) for b in blocks[:2])
    code += "\nprint('TOUR-OK', len(list_sessions('/home/me/proj')), result.first_kept_entry_id is not None)\n"
    tiktoken_file = Path("o200k_base.tiktoken")
    if len(blocks) > 2 and tiktoken_file.exists():
        code += "\n" + "\n".join(blocks[2:])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PI_CODING_AGENT", "OPENAI_", "ANTHROPIC_"))}
    env["HOME"] = str(home)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "TOUR-OK 2 True" in proc.stdout, proc.stdout  # the example and the clone the tour made
