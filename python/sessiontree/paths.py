"""Where sessions live: Pi's directory layout, file names, and path safety.

Pi stores sessions as ``~/.pi/agent/sessions/--<cwd>--/<timestamp>_<session-id>.jsonl``
(session-manager.ts ``getDefaultSessionDir``): the cwd loses its leading separator and every
``/``, ``\\`` and ``:`` becomes ``-``. ``PI_CODING_AGENT_DIR`` moves the agent directory.
``PI_CODING_AGENT_SESSION_DIR`` names the folder that holds the session files themselves, with
no ``--<cwd>--`` folder below it, as Pi's ``main.ts`` uses it (it passes the value to
``SessionManager.create(cwd, sessionDir)``, which takes the folder as it is).

Everything we build from values read out of a file (a session id, a cwd) is checked so that it
can never name a path outside the session directory it belongs to.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from . import _core

#: The package's one version: Cargo.toml's, compiled into the core (``sessiontree.__version__``;
#: here, a light core owner, so that ``import sessiontree`` need not load ``Session``).
__version__: str = _core.__version__

_UNSAFE_NAME = r"[\x00-\x1f/\\:]"  # compiled by `re` on first use (a light import)


def agent_dir() -> Path:
    """Pi's agent directory: ``$PI_CODING_AGENT_DIR`` or ``~/.pi/agent``."""
    env = os.environ.get("PI_CODING_AGENT_DIR")
    return Path(env).expanduser() if env else Path.home() / ".pi" / "agent"


def sessions_root() -> Path:
    """Pi's folder of per-cwd session folders, ``<agent>/sessions`` (Pi ``getSessionsDir``). With
    ``$PI_CODING_AGENT_SESSION_DIR`` set, sessions live in that folder instead
    (:func:`session_dir_env`)."""
    return agent_dir() / "sessions"


def session_dir_env() -> Path | None:
    """``$PI_CODING_AGENT_SESSION_DIR`` (``~`` expanded, as Pi's ``expandTildePath``): the folder
    that holds the session files, all cwds together; None when unset or empty."""
    env = os.environ.get("PI_CODING_AGENT_SESSION_DIR")
    return Path(env).expanduser() if env else None


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
    """The folder Pi puts ``cwd``'s new sessions in (not created here):
    ``$PI_CODING_AGENT_SESSION_DIR`` itself when set (Pi ``main.ts``: ``--session-dir ?? env ??
    settings``, the folder used as it is), else ``<agent>/sessions/--<cwd>--/`` (Pi
    ``getDefaultSessionDir``)."""
    env = session_dir_env()
    return env if env is not None else sessions_root() / encode_cwd(cwd)


def iso_now() -> str:
    """The current time like JavaScript ``new Date().toISOString()`` (ms precision, ``Z``): the
    Rust core's clock, the same one that stamps entries appended by the core."""
    return _core.iso_now()


def new_session_id() -> str:
    """A fresh session id (a UUID, as Pi's ``randomUUID()``)."""
    import uuid  # on first use: uuid imports platform (a light import)

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
        or re.search(_UNSAFE_NAME, session_id)
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
