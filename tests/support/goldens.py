"""Shared helpers for tests driven by the Pi 1.6 goldens (``tests/corpus``).

Every ``NAME.jsonl.golden.json`` under ``corpus/pi-generated`` and ``corpus/real`` is found
by globbing, never by name, so hidden corpora dropped into those folders are picked up.

The path entries come from :func:`reference_entries`, the reference model's loader
(tests/support/reference_model.py, shared with the property tests; not the library's Rust core), so
context tests do not depend on the scanner. The golden's own ``path.ids`` decide which entries
form the branch.
"""

from __future__ import annotations

import functools
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.reference_model import ReferenceCycle, index_by_id, load_values, walk

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
GOLDEN_DIRS = ("pi-generated", "real", "scale")
LEGACY_SKIP = "legacy file could not be migrated"  # kept for older imports


def golden_paths() -> list[Path]:
    """Every ``*.jsonl.golden.json`` in the golden folders, sorted."""
    out: list[Path] = []
    for d in GOLDEN_DIRS:
        out.extend(sorted((CORPUS / d).glob("*.jsonl.golden.json")))
    return out


GENERATOR = Path(__file__).resolve().parent.parent / "tools" / "gen_session.py"


def session_file(folder: str, stem: str) -> Path:
    """The session file of a golden; ``scale/`` ones are regenerated into a cache (see below).

    ``scale/`` sessions are not stored: they are regenerated (deterministically, scale/README.md)
    into :func:`scale_cache` and checked against the golden's ``file_sha256`` (once per process).
    Concurrent runs each write a temp file of their own (``mkstemp``: a unique ``O_EXCL`` name)
    and rename it into place atomically, so no run reads another's half-written file.
    """
    path = CORPUS / folder / f"{stem}.jsonl"
    if folder != "scale":
        return path
    return _scale_session(stem)


def scale_cache() -> Path:
    """This user's folder of regenerated ``scale/`` sessions: ``$TMPDIR/sessiontree-scale-cache-<uid>``.

    Made mode 0700; a folder there that is not a directory of this user's (a symlink, another
    user's) is not used: then a folder of this process's own (``mkdtemp``) is.
    """
    import os
    import stat
    import tempfile

    folder = Path(tempfile.gettempdir()) / f"sessiontree-scale-cache-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(folder)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
            return folder
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="sessiontree-scale-cache-"))


@functools.lru_cache(maxsize=None)
def _scale_session(stem: str) -> Path:
    import hashlib
    import os
    import re
    import subprocess
    import tempfile

    golden = json.loads((CORPUS / "scale" / f"{stem}.jsonl.golden.json").read_text())
    want = golden["file_sha256"]
    cache = scale_cache()
    out = cache / f"{want}.jsonl"

    def digest(p: Path) -> str:
        with open(p, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()

    if out.is_file() and not out.is_symlink() and digest(out) == want:
        return out
    m = re.fullmatch(r"gen-(\d+)mb-seed(\d+)", stem)
    if not m:
        raise ValueError(f"unknown scale session name {stem}")
    fd, name = tempfile.mkstemp(dir=cache, prefix=f"{want}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        subprocess.run(
            [
                sys.executable,
                str(GENERATOR),
                "--megabytes",
                m.group(1),
                "--seed",
                m.group(2),
                "--branchiness",
                "0.03",
                "--out",
                str(tmp),
            ],
            check=True,
            capture_output=True,
        )
        if digest(tmp) != want:
            raise AssertionError(f"regenerated {stem} does not match its golden's file_sha256")
        os.replace(tmp, out)  # atomic: a concurrent run renames the same bytes into place
    finally:
        tmp.unlink(missing_ok=True)
    return out


def golden_ids() -> list[str]:
    """Test ids matching :func:`golden_paths` (``folder/NAME``)."""
    return [f"{p.parent.name}/{p.name[: -len('.jsonl.golden.json')]}" for p in golden_paths()]


# ==== Reference loader ===========================================================
# The loader, the by-id index and the branch walk are the reference model's
# (tests/support/reference_model.py), shared with the property tests.


def reference_entries(session_file: Path) -> tuple[dict, list] | None:
    """Parse a session file the way Pi's ``loadEntriesFromFile`` does
    (:func:`reference_model.load_values`): ``(header, values after it)``, or ``None`` when the
    first parsed value is not ``{"type": "session", "id": <str>}``."""
    return load_values(session_file.read_bytes())


def _walk_from(leaf: Any, by_id: dict) -> list | None:
    """:func:`reference_model.walk` from ``leaf``, or ``None`` when the parent chain loops."""
    try:
        return walk(by_id, leaf)
    except ReferenceCycle:
        return None


# ==== Golden cases ===============================================================


@dataclass
class Case:
    """One golden with what the context tests need.

    ``skip`` is a reason to skip context checks (``None`` to run them); ``path`` is the
    branch (``getBranch()``), ``context_path`` the path Pi builds context from.
    """

    name: str
    golden: dict
    skip: str | None = None
    path: list = field(default_factory=list)
    context_path: list = field(default_factory=list)


@functools.lru_cache(maxsize=None)
def load_case(name: str) -> Case:
    """The :class:`Case` for a test id from :func:`golden_ids`."""
    folder, stem = name.split("/", 1)
    golden_file = CORPUS / folder / f"{stem}.jsonl.golden.json"
    golden = json.loads(golden_file.read_text(encoding="utf-8"))
    case = Case(name=name, golden=golden)
    legacy = bool((golden.get("open") or {}).get("migrated"))
    if not isinstance(golden.get("context"), dict):
        case.skip = "Pi builds no context for this file (context is null)"
        return case
    path_info = golden.get("path") or {}
    if not path_info.get("terminates"):
        case.skip = "the leaf's parent chain does not terminate"
        return case
    if legacy:
        entries = migrated_entries(session_file(folder, stem), golden)
    else:
        loaded = reference_entries(session_file(folder, stem))
        entries = loaded[1] if loaded else []
    by_id = index_by_id(entries)
    ids = path_info.get("ids") or []
    if any(not isinstance(i, str) or i not in by_id for i in ids):
        case.skip = f"path ids not resolvable by the reference loader: {ids!r}"
        return case
    case.path = [by_id[i] for i in ids]
    if "leaf_id" not in golden and entries:
        # Pi's leaf id is undefined: buildSessionContext falls back to the last entry.
        walked = _walk_from(entries[-1], by_id)
        if walked is None:
            case.skip = "context path from the last entry does not terminate"
            return case
        case.context_path = walked
    else:
        case.context_path = case.path
    return case


_ID_FIELDS = ("id", "parentId", "firstKeptEntryId", "targetId", "fromId")


@functools.lru_cache(maxsize=None)
def _migrated(session_file: Path, golden_json: str) -> tuple:
    from sessiontree import Session

    golden = json.loads(golden_json)
    s = Session.open(session_file)
    ours = [e.raw for e in s.entries()]
    # Pi's v1 ids are random: map ours to the golden's by position (the ``entries`` list)
    mapping = {}
    for mine, theirs in zip(ours, golden.get("entries") or []):
        if isinstance(mine, dict) and isinstance(mine.get("id"), str):
            mapping[mine["id"]] = theirs[0]
    out = []
    for e in ours:
        if isinstance(e, dict):
            e = dict(e)
            for k in _ID_FIELDS:
                if isinstance(e.get(k), str):
                    e[k] = mapping.get(e[k], e[k])
        out.append(e)
    return tuple(out)


def migrated_entries(session_file: Path, golden: dict) -> list:
    """A legacy (v1/v2) file's entries as Pi holds them after migration, read through
    :class:`sessiontree.Session` (Rust index + in-memory migration), with our v1 ids renamed to
    the ids Pi's golden lists at the same positions (Pi invents v1 ids at random)."""
    return list(_migrated(session_file, json.dumps({"entries": golden.get("entries")})))


def pi_result(fn, *args: Any) -> Any:
    """``fn(*args)``, or ``{"pi_error": text}`` when it raises an error mirroring Pi's throw."""
    from sessiontree.context import ContextError
    from sessiontree.tokens import EstimateError

    try:
        return fn(*args)
    except (EstimateError, ContextError) as e:
        return {"pi_error": e.pi_error}


def js_id(value: Any) -> Any:
    """An entry id as the goldens list it: strings as-is, anything else ``None``."""
    return value if isinstance(value, str) else None
