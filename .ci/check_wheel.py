#!/usr/bin/env python3
"""Check built wheels: abi3 for CPython >= 3.11, a manylinux platform tag no newer than
manylinux_2_17 (manylinux2014), and ``auditwheel show`` agreeing with the tag in the name.

    python .ci/check_wheel.py dist/*.whl

Exit 1 (with the reason) on the first wheel that fails. Needs auditwheel (the ``release`` extra).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

#: The newest glibc a wheel may require (manylinux2014 = manylinux_2_17).
MAX_GLIBC = (2, 17)


def platform_tags(wheel: Path) -> list[str]:
    """The platform tags of a wheel's file name (``name-version-python-abi-platform.whl``)."""
    parts = wheel.name[: -len(".whl")].split("-")
    if len(parts) < 5:
        raise SystemExit(f"{wheel.name}: not a wheel file name")
    python, abi, plat = parts[-3], parts[-2], parts[-1]
    if (python, abi) != ("cp311", "abi3"):
        raise SystemExit(f"{wheel.name}: tagged {python}-{abi}, expected cp311-abi3")
    return plat.split(".")


def glibc_of(tag: str) -> tuple[int, int] | None:
    legacy = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
    for name, version in legacy.items():
        if tag.startswith(name + "_"):
            return version
    m = re.match(r"manylinux_(\d+)_(\d+)_", tag)
    if m:
        return int(m.group(1)), int(m.group(2))
    return None


def check(wheel: Path) -> str:
    tags = platform_tags(wheel)
    for tag in tags:
        glibc = glibc_of(tag)
        if glibc is None:
            raise SystemExit(f"{wheel.name}: platform tag {tag} is not a manylinux tag")
        if glibc > MAX_GLIBC:
            raise SystemExit(f"{wheel.name}: {tag} needs glibc {glibc[0]}.{glibc[1]} (> 2.17)")
    out = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", str(wheel)], capture_output=True, text=True, check=False
    )
    text = " ".join((out.stdout + out.stderr).split())
    m = re.search(r'consistent with the following platform tag: "([^"]+)"', text)
    if out.returncode != 0 or not m:
        raise SystemExit(f"{wheel.name}: auditwheel show failed:\n{out.stdout}{out.stderr}")
    if m.group(1) not in tags:
        raise SystemExit(f"{wheel.name}: auditwheel says {m.group(1)}, the name says {'.'.join(tags)}")
    return m.group(1)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: check_wheel.py WHEEL...", file=sys.stderr)
        return 2
    for name in argv:
        wheel = Path(name)
        print(f"{wheel.name}: auditwheel agrees ({check(wheel)}), abi3, glibc <= 2.17")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
