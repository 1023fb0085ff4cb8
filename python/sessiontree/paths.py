"""Where sessions live: Pi's directory layout, file names, and path safety.

Pi stores sessions as ``~/.pi/agent/sessions/--<cwd>--/<timestamp>_<session-id>.jsonl``
(session-manager.ts ``getDefaultSessionDir``): the cwd loses its leading separator and every
``/``, ``\\`` and ``:`` becomes ``-``. ``PI_CODING_AGENT_DIR`` moves the agent directory and
``PI_CODING_AGENT_SESSION_DIR`` the sessions root, as in Pi.

Everything we build from values read out of a file (a session id, a cwd) is checked so that it
can never name a path outside the session directory it belongs to.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from . import _core

_UNSAFE_NAME = re.compile(r"[\x00-\x1f/\\:]")


def agent_dir() -> Path:
    """Pi's agent directory: ``$PI_CODING_AGENT_DIR`` or ``~/.pi/agent``."""
    env = os.environ.get("PI_CODING_AGENT_DIR")
    return Path(env).expanduser() if env else Path.home() / ".pi" / "agent"


def sessions_root() -> Path:
    """Root of all session directories: ``$PI_CODING_AGENT_SESSION_DIR`` or ``<agent>/sessions``."""
    env = os.environ.get("PI_CODING_AGENT_SESSION_DIR")
    return Path(env).expanduser() if env else agent_dir() / "sessions"


def encode_cwd(cwd: str) -> str:
    """Pi's directory name for a cwd: ``--`` + cwd without its leading separator, with
    ``/``, ``\\`` and ``:`` replaced by ``-`` + ``--``. NUL and other control characters
    (which Pi would pass to the file system) are replaced by ``-`` too."""
    s = re.sub(r"^[/\\]", "", cwd)
    s = re.sub(r"[/\\:\x00-\x1f]", "-", s)
    if s in ("", ".", ".."):
        s = s.replace(".", "-")
    return f"--{s}--"


def default_session_dir(cwd: str) -> Path:
    """The session directory Pi uses for ``cwd`` (not created here)."""
    return sessions_root() / encode_cwd(cwd)


def iso_now() -> str:
    """The current time like JavaScript ``new Date().toISOString()`` (ms precision, ``Z``): the
    Rust core's clock, the same one that stamps entries appended by the core."""
    return _core.iso_now()


def new_session_id() -> str:
    """A fresh session id (a UUID, as Pi's ``randomUUID()``)."""
    import uuid  # on first use: uuid imports platform (a light import, issue 18)

    return str(uuid.uuid4())


def check_session_id(session_id: str) -> str:
    """Validate a session id used in a file name: non-empty, no path separators, no ``:``,
    no control characters, not ``.``/``..``.

    Raises:
        ValueError: the id could build a path outside the session directory.
    """
    if (
        not isinstance(session_id, str)
        or not session_id
        or session_id in (".", "..")
        or _UNSAFE_NAME.search(session_id)
    ):
        raise ValueError(f"unsafe session id for a file name: {session_id!r}")
    return session_id


def session_file_name(timestamp_iso: str, session_id: str) -> str:
    """Pi's file name ``<timestamp with : and . as ->_<session-id>.jsonl``."""
    return f"{re.sub(r'[:.]', '-', timestamp_iso)}_{check_session_id(session_id)}.jsonl"


def inside(directory: Path, name: str) -> Path:
    """``directory / name``, refusing any name that would leave ``directory``.

    Raises:
        ValueError: ``name`` is absolute, contains a separator, ``..``, or NUL.
    """
    if not name or "\x00" in name or "/" in name or "\\" in name or name in (".", ".."):
        raise ValueError(f"unsafe file name: {name!r}")
    target = Path(directory) / name
    if target.parent.resolve() != Path(directory).resolve():
        raise ValueError(f"{name!r} leaves {directory}")
    return target
