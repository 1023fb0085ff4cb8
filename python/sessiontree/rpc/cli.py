"""``sessiontree rpc``: the drop-in executable for clients that launch ``pi --mode rpc`` themselves.

Pi's session flags are honoured as Pi does; its agent flags are refused."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path
from typing import Any

from .._jsjson import js_trim as _js_trim  # JavaScript String.prototype.trim, its one home
from ..errors import SessionError, SessionLockedError
from ..providers import SUMMARIZER_NAMES, names_text
from ..paths import agent_dir, check_session_id, default_session_dir, session_dir_env, sessions_root
from ..session import Session
from .config import _select_model, load_models, load_settings, merge_settings, settings_session_dir
from .protocol import PI_VERSION, RpcError
from .server import RpcServer
from .sessions import PendingSession, SessionRegistry, _WriterGate
from .transports import UnixServer, _note, serve_stdio

#: ``rpc --summarizer``: ``compact``'s names (:data:`~sessiontree.providers.SUMMARIZER_NAMES`,
#: the one list) and ``model``, the selected model of the models file (only RPC selects one).
SUMMARIZER_CHOICES = ("model", *SUMMARIZER_NAMES)

# ==== the executable ===================================================================

#: Pi's launch flags this server honours (as Pi does), besides its own options
SESSION_FLAGS = "--session, --fork, --session-id, --session-dir, --continue, --no-session, --name"


class _UsageError(RpcError):
    """A launch flag refused (one line, exit 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2 (not argparse's usage block)
        raise _UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="sessiontree rpc",
        allow_abbrev=False,
        description="A session server speaking Pi 1.6's RPC (JSON lines on stdin/stdout, or a unix socket). "
        "It holds sessions, not an agent: prompt/bash/set_model... are refused, and so are Pi's agent "
        "launch flags (--thinking, --tools, --system-prompt, extension flags...): exit 2.",
    )
    p.add_argument(
        "--version", action="store_true", help=f"print the Pi version whose protocol is spoken ({PI_VERSION})"
    )
    p.add_argument("--mode", default="rpc", help="only 'rpc' (accepted for Pi compatibility)")
    p.add_argument(
        "--session",
        metavar="FILE|ID",
        help="the session to serve: a file, or (as Pi) a session id or a unique prefix of one, looked up in the "
        "session folder of the current directory, then in every session folder",
    )
    p.add_argument(
        "--fork",
        metavar="FILE|ID",
        help="copy that session (every entry) into a new session of the current directory and serve the copy",
    )
    p.add_argument("--session-id", metavar="ID", help="the id of the new session (with --fork: of the copy)")
    p.add_argument(
        "--session-dir",
        metavar="DIR",
        help="where sessions are stored (default: Pi's folder for the current directory); new sessions go there",
    )
    p.add_argument(
        "--continue",
        "-c",
        dest="cont",
        action="store_true",
        help="serve the most recent session of the session folder (a new one if there is none)",
    )
    p.add_argument("--no-session", action="store_true", help="an in-memory session; nothing is written")
    p.add_argument("--name", "-n", metavar="NAME", help="the session's name (written as Pi writes /name)")
    p.add_argument("--listen", metavar="unix:PATH", help="serve many clients on a unix socket instead of stdio")
    p.add_argument("--models", metavar="FILE", help="Pi models.json (default <agent dir>/models.json)")
    p.add_argument("--settings", metavar="FILE", help="Pi settings.json (default <agent dir>/settings.json)")
    p.add_argument("--provider", help="provider of the model that writes compaction summaries (models file)")
    p.add_argument("--model", help="that model's id (or provider/id)")
    p.add_argument(
        "--summarizer",
        choices=SUMMARIZER_CHOICES,
        default="model",
        help="who writes compaction summaries: 'model' (default) the selected model of the models file; "
        f"{', '.join(SUMMARIZER_NAMES)} as `sessiontree compact --summarizer` takes them (offline: extractive, "
        f"no model; {names_text()}: $OPENAI_*/$ANTHROPIC_* settings)",
    )
    return p


def resolve_session_arg(value: str, session_dir: Path) -> Path:
    """Pi's ``--session`` / ``--fork`` argument as a file.

    A path when it names a file or looks like one (a separator, or ``.jsonl``); otherwise a
    session id, or a unique prefix of one, looked up in ``session_dir`` first, then in every
    folder under the sessions root.

    Raises:
        RpcError: no session has that id, or several do.
    """
    p = Path(value).expanduser()
    if os.sep in value or value.endswith(".jsonl") or p.exists():
        return p
    from ..listing import read_header

    for folders in ([session_dir], sorted(d for d in _subdirs(sessions_root()) if d != session_dir)):
        found = []
        for folder in folders:
            try:
                names = sorted(folder.glob("*.jsonl"))
            except OSError:
                continue
            for f in names:
                head = read_header(f)
                sid = head.get("id") if isinstance(head, dict) else None
                if isinstance(sid, str) and sid.startswith(value):
                    found.append(f)
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise RpcError(f"--session {value}: {len(found)} sessions have an id starting so; give more of it")
    raise RpcError(f"--session {value}: no such file, and no session has that id")


def _subdirs(root: Path) -> list[Path]:
    try:
        return [d for d in root.iterdir() if d.is_dir()]
    except OSError:
        return []


def _check_combination(args: argparse.Namespace) -> None:
    """Pi's launch flags that cannot go together (the Pi SDK refuses the same pairs)."""
    opened = [f for f, on in (("--session", args.session), ("--continue", args.cont), ("--fork", args.fork)) if on]
    if len(opened) > 1:
        raise _UsageError(f"{opened[1]} cannot be combined with {opened[0]}")
    if args.no_session:
        for f, on in (("--session", args.session), ("--continue", args.cont), ("--fork", args.fork)):
            if on:
                raise _UsageError(f"--no-session cannot be combined with {f}")
    if args.session_id is not None:
        for f, on in (("--session", args.session), ("--continue", args.cont)):
            if on:
                raise _UsageError(f"--session-id names a new session; it cannot be combined with {f}")
        try:
            check_session_id(args.session_id)
        except ValueError as exc:
            raise _UsageError(f"--session-id: {exc}") from None
    if args.name is not None and not _js_trim(args.name):
        raise _UsageError("--name: Session name cannot be empty")


def _refuse_extra(extra: list[str]) -> str:
    first = extra[0]
    if first.startswith("-"):
        return (
            f"{first.split('=', 1)[0]} is not supported: this server holds sessions, not an agent "
            f"(Pi's session flags: {SESSION_FLAGS}; see sessiontree rpc --help)"
        )
    return f"unexpected argument {first!r}: Pi's startup messages need an agent"


def main(argv: list[str] | None = None) -> int:
    """``sessiontree rpc``: exit 0 at end of input (130 on Ctrl-C).

    2 for a usage error or a session that cannot be opened or written, one line ``sessiontree:
    error: ...`` on stderr, as the other commands."""
    from ..cli.render import print_failure

    def fail(message: str) -> int:
        return print_failure(message, 2)

    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:
            raise _UsageError(_refuse_extra(extra))
        if args.mode != "rpc":
            raise _UsageError(f"--mode {args.mode} is not supported (sessiontree rpc speaks only --mode rpc)")
        if args.version:
            print(PI_VERSION)
            return 0
        _check_combination(args)
        if args.listen is not None and (not args.listen.startswith("unix:") or len(args.listen) <= 5):
            raise _UsageError(f"--listen takes unix:PATH, not {args.listen!r}")
    except _UsageError as exc:
        return fail(f"rpc: {exc}")
    summarizer = None
    if args.summarizer != "model":  # one of SUMMARIZER_NAMES: as compact and compact-all build it
        from ..summarizers import get_summarizer

        try:
            summarizer = get_summarizer(args.summarizer)
        except (ImportError, ValueError) as exc:
            return fail(f"rpc: summarizer {args.summarizer!r}: {exc}")
    adir = agent_dir()
    cwd = os.getcwd()
    settings = load_settings(Path(args.settings) if args.settings else adir / "settings.json")
    # Pi: <cwd>/.pi/settings.json over the global file (--settings FILE stands for the global one)
    settings = merge_settings(settings, load_settings(Path(cwd) / ".pi" / "settings.json"))
    try:
        models = load_models(Path(args.models) if args.models else adir / "models.json")
    except RpcError as exc:
        return fail(f"rpc: {exc}")
    # Pi: --session-dir ?? PI_CODING_AGENT_SESSION_DIR ?? settings.sessionDir, each the folder of
    # the session files as it is (main.ts), ?? the default folder <agent>/sessions/--<cwd>--/
    chosen = (
        Path(args.session_dir).expanduser()
        if args.session_dir
        else session_dir_env() or settings_session_dir(settings, cwd)
    )
    sdir = chosen or default_session_dir(cwd)
    session: Session | None = None
    pending: PendingSession | None = None
    shown = args.session or args.fork
    try:
        if args.no_session:
            session = Session.in_memory(cwd, session_id=args.session_id)
        elif args.session:
            path = resolve_session_arg(args.session, sdir)
            shown = str(path)
            session = Session.open(path, session_dir=chosen)
        elif args.fork:
            path = resolve_session_arg(args.fork, sdir)
            shown = str(path)
            session = Session.fork_from(path, cwd, session_dir=sdir, session_id=args.session_id)
        elif args.cont:
            from ..listing import most_recent_session

            recent = most_recent_session(sdir) if sdir.is_dir() else None
            if recent is not None:
                session = Session.open(recent, session_dir=sdir)
        if session is None:
            pending = PendingSession(cwd, sdir, session_id=args.session_id, name=args.name)
        elif args.name is not None and session.session_name != args.name:
            session.append_session_info(args.name)  # Pi writes --name as /name does
            session.close()
    except FileNotFoundError:
        return fail(f"{shown}: no such file")
    except RpcError as exc:
        return fail(f"rpc: {exc}")
    except SessionLockedError as exc:
        return fail(f"{exc}; nothing written (--name needs the writer lock)")
    except (SessionError, ValueError) as exc:
        text = str(exc)
        return fail(text if "not a valid pi session" in text else f"{shown}: {text}")
    except OSError as exc:
        return fail(f"{shown or sdir}: {exc.strerror or exc}")
    model = _select_model(models, args.provider, args.model, session, settings)
    if (args.model or args.provider) and model is None:
        _note(
            f"--provider/--model {args.provider or ''}/{args.model or ''} is not in the models file; "
            "it only selects the model for compaction summaries"
        )

    registry = SessionRegistry(_WriterGate if args.listen else threading.RLock)
    first = registry.adopt(session) if session is not None else None  # held until exit

    def make(on_event: Any = None) -> RpcServer:
        return RpcServer(
            None,
            on_event=on_event,
            model=model,
            models=models,
            settings=settings,
            summarizer=summarizer,
            cwd=cwd,
            session_dir=sdir,
            persist=not args.no_session,
            registry=registry,
            session_ref=first,
            pending=pending,
        )

    if args.listen:
        us = UnixServer(args.listen[5:], make)
        try:
            us.bind()
        except (RpcError, OSError) as exc:
            return fail(f"rpc: {exc}")
        print(f"sessiontree rpc: listening on {args.listen}", file=sys.stderr, flush=True)
        try:
            us.serve_forever()
        except KeyboardInterrupt:
            pass
        return 0
    try:
        server = make()
        if first is not None:
            registry.release(first)  # the one connection holds it now
        return serve_stdio(server)
    except KeyboardInterrupt:
        return 130
