"""A child process's peak resident memory (``VmHWM``, KiB) after running a snippet: the memory
tests' one measure, with the saved index off so an open scans the file."""

from __future__ import annotations

import os
import subprocess
import sys

_HWM = (
    "import re, sys\n{code}\n"
    "sys.stderr.write(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
)


def peak_kb(code: str, *argv: str) -> int:
    """Run ``code`` in a fresh interpreter with ``sys.argv[1:] == argv``; its ``VmHWM`` in KiB.

    Raises AssertionError (with the child's stderr) when the child fails."""
    env = dict(os.environ, SESSIONTREE_INDEX_CACHE="off")
    proc = subprocess.run(
        [sys.executable, "-c", _HWM.format(code=code), *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return int(proc.stderr.strip().splitlines()[-1])
