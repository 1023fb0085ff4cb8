#!/usr/bin/env python3
"""Fill fuzz/corpus/{scan,json_differential} with seeds from tests/corpus (run from anywhere).

scan: every session file of tests/corpus/{pi-generated,real} up to 256 KiB; json_differential:
distinct lines of those files up to 16 KiB. The corpus folders are not committed (.gitignore):
libFuzzer adds what it finds to them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    scan = ROOT / "fuzz/corpus/scan"
    lines = ROOT / "fuzz/corpus/json_differential"
    scan.mkdir(parents=True, exist_ok=True)
    lines.mkdir(parents=True, exist_ok=True)
    n_files = n_lines = 0
    for sub in ("pi-generated", "real"):
        for p in sorted((ROOT / "tests/corpus" / sub).glob("*.jsonl")):
            data = p.read_bytes()
            if len(data) <= 256 << 10:
                (scan / p.name).write_bytes(data)
                n_files += 1
            for line in data.split(b"\n"):
                if line and len(line) <= 16 << 10:
                    name = hashlib.sha1(line).hexdigest()
                    if not (lines / name).exists():
                        (lines / name).write_bytes(line)
                        n_lines += 1
    print(f"seeded {n_files} files into {scan} and {n_lines} lines into {lines}")


if __name__ == "__main__":
    main()
