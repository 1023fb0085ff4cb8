"""The README runs as pasted and prints what it shows.

* The quick start ("Two commands"): the commands after ``pip install .`` (the package is
  installed here already) print the lines the README shows, in that order (``…`` stands for
  lines left out), with the demo file in a temporary folder instead of ``/tmp``.
* The API tour: its blocks run in a fresh ``python3`` from the repository's folder, with no fake
  home folder, and what the first block prints equals its ``# ...`` comments.
* A block that needs an extra says so before it runs and, without the extra, ends in one line
  (no traceback). The tiktoken block runs only when ``o200k_base.tiktoken`` is at hand (no
  network in tests).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def _section(title: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"\n## {title}")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def tour_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", _section("API tour"), re.S)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PI_CODING_AGENT", "OPENAI_", "ANTHROPIC_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["TMPDIR"] = str(tmp_path)
    return env


def _shown(block: str) -> list[str]:
    """The ``# ...`` comment lines right after ``print(...)`` lines: what the block prints."""
    out: list[str] = []
    lines = block.splitlines()
    for prev, line in zip(lines, lines[1:]):
        if prev.startswith("print(") and line.startswith("# "):
            out.append(line[2:])
    return out


@pytest.mark.slow  # compacts and prints a session through two CLI processes
def test_the_quick_start_runs_as_pasted_and_prints_what_it_shows(tmp_path):
    sec = _section("Two commands")
    blocks = re.findall(r"```(\w*)\n(.*?)```", sec, re.S)
    command, shown = blocks[0][1].strip(), blocks[1][1].splitlines()
    after = command.split("pip install . && ", 1)[1]
    demo = str(tmp_path / "sessiontree-demo.jsonl")
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", after.replace("/tmp/sessiontree-demo.jsonl", demo)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(tmp_path),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got_text = proc.stdout.replace(demo, "/tmp/sessiontree-demo.jsonl")
    # the compaction entry's id is new on every run (as the README says): the shown one stands in
    new_id = re.search(r"^compaction entry:  (\S+)", got_text, re.M).group(1)
    shown_id = re.search(r"^compaction entry:  (\S+)", "\n".join(shown), re.M).group(1)
    got = got_text.replace(new_id, shown_id).splitlines()
    assert shown[0] == got[0]  # the first line, then every shown line in order
    at = 0
    for want in shown:
        if want == "…":
            continue
        assert want in got[at:], (want, got)
        at = got.index(want, at) + 1


def test_the_readme_api_tour_runs_as_written(tmp_path):
    blocks = tour_blocks()
    assert len(blocks) >= 2
    assert "HOME" not in blocks[0] and "~/" not in blocks[0]
    code = "\n".join(blocks[:2])
    tiktoken_file = Path("o200k_base.tiktoken")
    if len(blocks) > 2 and tiktoken_file.exists():
        code += "\n" + "\n".join(blocks[2:])
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=_env(tmp_path), cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == _shown(blocks[0]), proc.stdout
    assert (ROOT / "examples" / "session.jsonl").read_bytes() == _example_bytes()


def _example_bytes() -> bytes:
    out = subprocess.run(["git", "show", "HEAD:examples/session.jsonl"], capture_output=True, cwd=ROOT)
    return out.stdout if out.returncode == 0 else (ROOT / "examples" / "session.jsonl").read_bytes()


@pytest.mark.parametrize("extra", ["openai", "tiktoken"])
def test_a_block_that_needs_a_missing_extra_says_so_in_one_line(tmp_path, extra):
    text = _section("API tour")
    blocks = tour_blocks()
    block = next(b for b in blocks[1:] if f"import {extra}" in b)
    before = text[: text.index(block)].rsplit("```python", 1)[0][-400:]
    assert f"sessiontree[{extra}]" in before  # said before the block
    hide = f"import sys\nsys.modules[{extra!r}] = None\n"
    proc = subprocess.run(
        [sys.executable, "-c", hide + block], capture_output=True, text=True, timeout=120, env=_env(tmp_path), cwd=ROOT
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [f"this block needs the {extra} extra: pip install 'sessiontree[{extra}]'"]


def test_the_tiktoken_block_runs_after_the_first_alone_and_says_when_the_encoding_file_is_missing(tmp_path):
    """The first block, then the tiktoken block (a reader without the openai extra skips the one
    between): it needs no name from the skipped block, and without ``o200k_base.tiktoken`` in
    the folder it ends in one line saying so, not a ``TokenCounterError`` traceback."""
    pytest.importorskip("tiktoken")
    blocks = tour_blocks()
    block = next(b for b in blocks[1:] if "import tiktoken" in b)
    folder = tmp_path / "here"
    folder.mkdir()
    (folder / "examples").mkdir()
    (folder / "examples" / "session.jsonl").write_bytes(_example_bytes())
    proc = subprocess.run(
        [sys.executable, "-c", blocks[0] + "\n" + block],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(tmp_path),
        cwd=folder,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.splitlines()
    assert "o200k_base.tiktoken" in line
