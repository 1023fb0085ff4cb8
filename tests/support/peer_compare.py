"""The scrubber against the peers on the peers' own samples, planted in a generated session.

The samples (tests/support/peer_samples.json, made by benches/peer_samples.py from gitleaks'
rule tests; each names its source file and rule) and our labelled set (tests/support/secrets.py)
are planted one per entry, rotating through every place a session holds text: user text,
assistant text, thinking, tool-call arguments, tool results, bash output. The same file is then
scanned by our scrubber and by detect-secrets (its default plugins, as `detect-secrets scan`
runs them on a file); gitleaks is run too when its binary is on PATH (no package index we reach
ships it). A sample counts as caught when a tool reports a finding on its line; a look-alike
(a peer's false-positive sample, or one of our negatives) counts as a false alarm the same way.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
PLACES = ("user", "assistant", "thinking", "tool_args", "tool_result", "bash_output")


def load_samples(per_rule: int | None = None, seed: int = 30) -> list[dict]:
    """The peers' samples and ours: dicts with rule, label (tp/fp), text, source."""
    from tests.support.secrets import NEGATIVES, SECRETS

    doc = json.loads((HERE / "peer_samples.json").read_text())
    rng = random.Random(seed)
    by_rule: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for s in doc["samples"]:
        by_rule[(s["rule"], s["label"])].append(s)
    out: list[dict] = []
    for (_, _), ss in sorted(by_rule.items()):
        if per_rule is not None and len(ss) > per_rule:
            ss = rng.sample(ss, per_rule)
        out += ss
    n = per_rule or 5
    for kind, gen in sorted(SECRETS.items()):
        for _ in range(n):
            text, _v = gen(rng)
            out.append({"rule": f"ours:{kind}", "label": "tp", "text": text, "source": "tests/support/secrets.py"})
    for kind, gen in sorted(NEGATIVES.items()):
        for _ in range(n):
            text = gen(rng)
            text = text[0] if isinstance(text, tuple) else text
            out.append({"rule": f"ours:{kind}", "label": "fp", "text": text, "source": "tests/support/secrets.py"})
    return out


def _entry(i: int, parent: str | None, place: str, text: str) -> dict:
    eid = f"e{i:07x}"
    ts = "2026-01-01T00:00:00.000Z"
    if place == "user":
        msg = {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}
    elif place == "assistant":
        msg = {"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": 1}
    elif place == "thinking":
        msg = {"role": "assistant", "content": [{"type": "thinking", "thinking": text}], "timestamp": 1}
    elif place == "tool_args":
        msg = {
            "role": "assistant",
            "content": [
                {
                    "type": "toolCall",
                    "id": f"call_{i}",
                    "name": "write",
                    "arguments": {"path": "a.txt", "content": text},
                }
            ],
            "timestamp": 1,
        }
    elif place == "tool_result":
        msg = {
            "role": "toolResult",
            "toolCallId": f"call_{i}",
            "toolName": "read",
            "content": [{"type": "text", "text": text}],
            "isError": False,
            "timestamp": 1,
        }
    else:
        return {
            "type": "message",
            "id": eid,
            "parentId": parent,
            "timestamp": ts,
            "message": {
                "role": "bashExecution",
                "command": "cat config",
                "output": text,
                "exitCode": 0,
                "cancelled": False,
                "truncated": False,
                "timestamp": 1,
            },
        }
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": ts, "message": msg}


def build_session(samples: list[dict], path: Path) -> list[int]:
    """Writes a session with one sample per entry; returns each sample's line number (1-based)."""
    lines = [
        orjson.dumps(
            {
                "type": "session",
                "version": 3,
                "id": "peer-compare",
                "timestamp": "2026-01-01T00:00:00.000Z",
                "cwd": "/work",
            }
        )
    ]
    where: list[int] = []
    parent = None
    for i, s in enumerate(samples):
        e = _entry(i, parent, PLACES[i % len(PLACES)], s["text"])
        parent = e["id"]
        lines.append(orjson.dumps(e))
        where.append(len(lines))
        if i % 50 == 49:
            lines.append(
                orjson.dumps(
                    {
                        "type": "label",
                        "id": f"l{i:07x}",
                        "parentId": parent,
                        "timestamp": "2026-01-01T00:00:00.000Z",
                        "targetId": parent,
                        "label": f"mark {i}",
                    }
                )
            )
            parent = f"l{i:07x}"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return where


def tree(data: bytes) -> list[tuple]:
    """ids, parentIds, label targets and labels: what scrub must never change."""
    out = []
    for line in data.splitlines():
        e = orjson.loads(line)
        out.append(
            (
                e.get("type"),
                e.get("id"),
                e.get("parentId"),
                e.get("targetId"),
                e.get("label") if e.get("type") == "label" else None,
            )
        )
    return out


def ours(path: Path) -> tuple[set[int], bool]:
    from sessiontree.scrub import scrub_bytes

    data = path.read_bytes()
    out, rep = scrub_bytes(data)
    return {f.line for f in rep.findings}, tree(out) == tree(data)


def detect_secrets(path: Path) -> set[int]:
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    coll = SecretsCollection()
    with default_settings():
        coll.scan_file(str(path))
    return {s.line_number for _, s in coll}


def gitleaks_binary() -> str | None:
    return shutil.which("gitleaks")


def gitleaks(path: Path) -> set[int]:
    with tempfile.TemporaryDirectory() as d:
        rep = os.path.join(d, "r.json")
        subprocess.run(
            [
                gitleaks_binary() or "gitleaks",
                "dir",
                str(path),
                "--no-banner",
                "--report-format",
                "json",
                "--report-path",
                rep,
                "--exit-code",
                "0",
            ],
            check=True,
            capture_output=True,
        )
        return {f["StartLine"] for f in json.loads(Path(rep).read_text() or "[]")}


def compare(samples: list[dict], workdir: Path) -> dict:
    """Per rule: samples and how many each tool catches (tp) or flags (fp); the tree check."""
    path = workdir / "peer-compare.jsonl"
    where = build_session(samples, path)
    tools = {"ours": None, "detect-secrets": detect_secrets}
    if gitleaks_binary():
        tools["gitleaks"] = gitleaks
    found: dict[str, set[int]] = {}
    found["ours"], tree_ok = ours(path)
    for name, fn in tools.items():
        if fn is not None:
            found[name] = fn(path)
    per: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for s, line in zip(samples, where):
        row = per[(s["rule"], s["label"])]
        row["n"] += 1
        for name, lines in found.items():
            row[name] += line in lines
    return {"tools": list(found), "per": {f"{k[0]}|{k[1]}": dict(v) for k, v in per.items()}, "tree_ok": tree_ok}


def totals(res: dict) -> dict[str, dict[str, int]]:
    t: dict[str, dict[str, int]] = {"tp": defaultdict(int), "fp": defaultdict(int)}
    for key, row in res["per"].items():
        label = key.rsplit("|", 1)[1]
        for k, v in row.items():
            t[label][k] += v
    return {k: dict(v) for k, v in t.items()}
