"""The RPC server and its one command registry.

Every command name this server knows (Pi's commands, ``hello``, the commands after ``hello``,
and Pi's agent commands it refuses) is one row of :data:`COMMANDS`, and the Pi command table,
the extra commands and the ``capabilities`` of ``hello`` are all built from it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..errors import EntryNotFoundError, SessionError, SessionLockedError
from .protocol import (
    PI_VERSION,
    PROTOCOL,
    NOT_AN_AGENT,
    RpcError,
    _json_type,
    _reject_constant,
    error_response,
    response,
)
from .reads import ReadCommands
from .writes import WriteCommands

#: ``json.loads(line, parse_constant=...)`` without a new decoder per command (a third of a
#: cached answer's cost); JSON.parse rejects NaN / Infinity, so does this
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


class RpcServer(ReadCommands, WriteCommands):
    """Pi 1.6 RPC over one connection's current session, transport-free.

    ``handle(command) -> response dict``; events go to ``on_event(event_dict)`` (from the
    handling thread, or from the ``follow`` poller's thread).

    Each server (one per connection) has its own current session: ``new_session``,
    ``switch_session``, ``fork`` and ``clone`` move this connection only. Servers built on one
    :class:`SessionRegistry` (the connections of ``--listen``) that serve the same file share
    its :class:`Session` (one index) and its writer gate.

    Args:
        session: the session served first (None: a new session, written on its first entry, in
            ``session_dir`` or Pi's default folder for ``cwd``; its path is reported at once).
        on_event: callable receiving each event dict.
        models: Pi model objects (:func:`load_models`); ``model`` the selected one or None.
        settings: Pi settings dict (``compaction.keepRecentTokens``/``reserveTokens``).
        summarizer: a summarizer for ``compact`` overriding the model's.
        cwd, session_dir: where ``new_session`` (and a session given as None) are created.
        persist: False for ``--no-session`` (sessions live in memory).
        write_lock: the writer gate of ``session`` when this server opens it itself (default:
            the registry's kind, a blocking lock for stdio).
        release_after_write: close the session's writer after each write so other processes
            may write between our commands (the stdio default).
        session_ref: start on this :class:`SharedSession` of ``registry`` instead of ``session``.
        registry: the open sessions shared with other servers (default: a private one).
        pending: start on this :class:`PendingSession` (a new session announced, not yet
            written; ``--listen`` connections of a server started on a new session share it).

    Events: ``session_info_changed {name}``, ``compaction_start {reason}``, ``compaction_end
    {reason, result?, aborted, willRetry, errorMessage?}`` (Pi's); after ``hello``: ``hello
    {protocol, version, capabilities}``, ``follow``'s ``entry_appended {entry, leafId}`` and
    ``follow_end {reason, sessionFile, message}``.
    """

    def handle_line(self, line: bytes | str, *, text_ok: bool = False) -> dict[str, Any]:
        """Answer one raw command line (``command: "parse"`` when it is not a JSON object).
        ``text_ok``: the answer may be a :class:`~sessiontree.rpc.protocol.Text` (its JSON line
        in ``.text``, cached for answers that depend only on the session), as the transports
        write it."""
        if text_ok:
            self._text_ok = True
            try:
                return self.handle_line(line)
            finally:
                self._text_ok = False
        try:
            if isinstance(line, bytes):
                line = line.decode("utf-8")
            command = _DECODER.decode(line)
        except (ValueError, RecursionError) as exc:
            return error_response(None, "parse", f"Failed to parse command: {exc}")
        if not isinstance(command, dict):
            return error_response(None, "parse", "Failed to parse command: a command must be a JSON object")
        return self.handle(command)

    def handle(self, command: dict[str, Any]) -> dict[str, Any]:
        """Answer one command (a dict as parsed from JSON). Never raises for bad input: every
        failure is a ``success: false`` response naming the problem."""
        if not isinstance(command, dict):
            return error_response(None, "parse", "Failed to parse command: a command must be a JSON object")
        cmd_id = command.get("id")
        ctype = command.get("type")
        if not isinstance(ctype, str):
            return error_response(
                cmd_id,
                ctype if ctype is not None else "unknown",
                f'Invalid command: "type" must be a string, not {_json_type(ctype)}',
            )
        if ctype in AGENT_COMMANDS:
            return error_response(cmd_id, ctype, NOT_AN_AGENT.format(cmd=ctype))
        handler = _PI_COMMANDS.get(ctype)
        if ctype == "hello":
            handler = RpcServer._hello
        elif handler is None and self.hello:
            handler = _EXTRA_COMMANDS.get(ctype)
        if handler is None:
            return error_response(cmd_id, ctype, f"Unknown command: {ctype}")
        try:
            if ctype not in _LEAVING_COMMANDS:  # these must work when the file went away
                self._refresh()
            answer: dict[str, Any] = handler(self, command, cmd_id, ctype)
            return answer
        except RpcError as exc:
            return error_response(cmd_id, ctype, str(exc))
        except EntryNotFoundError as exc:
            return error_response(cmd_id, ctype, exc.args[0] if exc.args else str(exc))
        except SessionLockedError as exc:
            return error_response(cmd_id, ctype, f"session is locked by another writer: {exc}")
        except (SessionError, ValueError, TypeError, OSError) as exc:
            return error_response(cmd_id, ctype, str(exc) or type(exc).__name__)
        except RecursionError:
            return error_response(cmd_id, ctype, "content nested too deeply")
        except Exception as exc:  # never let one command take the server down
            return error_response(cmd_id, ctype, f"internal error in {ctype}: {type(exc).__name__}: {exc}")

    def _hello(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
        self.hello = True
        hello = {"type": "hello", "protocol": PROTOCOL, "version": PI_VERSION, "capabilities": list(CAPABILITIES)}
        self._emit(hello)
        return response(
            cmd_id, ctype, {"protocol": PROTOCOL, "version": PI_VERSION, "capabilities": list(CAPABILITIES)}
        )


# ==== the command registry ===============================================================


@dataclass(frozen=True)
class Command:
    """One command this server knows.

    ``kind``: ``"pi"`` (one of Pi 1.6's session commands, answered for every client),
    ``"hello"`` (the handshake that opens the extras), ``"extra"`` (beyond Pi, answered only
    after ``hello``), ``"agent"`` (Pi's agent-runtime commands, refused with :data:`NOT_AN_AGENT`).
    ``capabilities``: what ``hello`` announces for it (an extra command announces its own name;
    an option of a Pi command is ``command.option``; an event is its own name).
    ``refresh``: index what other processes appended before answering (False for the commands
    that leave the current session without reading it, so they work when the file went away).
    """

    name: str
    kind: str
    handler: Optional[Callable[..., Any]] = None
    capabilities: tuple[str, ...] = ()
    refresh: bool = True


def _agent(*names: str) -> tuple[Command, ...]:
    return tuple(Command(n, "agent", refresh=False) for n in names)


#: every command name the server knows, in the order the module docstring lists them
COMMANDS: tuple[Command, ...] = (
    Command("get_entries", "pi", RpcServer._get_entries, ("get_entries.limit",)),
    Command("get_tree", "pi", RpcServer._get_tree, ("get_tree.flat",)),
    Command("get_messages", "pi", RpcServer._get_messages),
    Command("get_session_stats", "pi", RpcServer._get_session_stats),
    Command("get_state", "pi", RpcServer._get_state),
    Command("get_fork_messages", "pi", RpcServer._get_fork_messages),
    Command("get_last_assistant_text", "pi", RpcServer._get_last_assistant_text),
    Command("set_session_name", "pi", RpcServer._set_session_name),
    Command("compact", "pi", RpcServer._compact),
    Command("fork", "pi", RpcServer._fork),
    Command("clone", "pi", RpcServer._clone),
    Command("switch_session", "pi", RpcServer._switch_session, refresh=False),
    Command("new_session", "pi", RpcServer._new_session, refresh=False),
    Command("export_html", "pi", RpcServer._export_html),
    Command("hello", "hello", RpcServer._hello, refresh=False),
    Command("navigate_tree", "extra", RpcServer._navigate_tree, ("navigate_tree",)),
    Command("set_label", "extra", RpcServer._set_label, ("set_label",)),
    Command("get_entry", "extra", RpcServer._get_entry, ("get_entry",)),
    Command("list_sessions", "extra", RpcServer._list_sessions, ("list_sessions",)),
    Command("follow", "extra", RpcServer._follow, ("follow", "follow_end")),
    Command("search", "extra", RpcServer._search, ("search",)),
    *_agent(
        "prompt",
        "steer",
        "follow_up",
        "abort",
        "clear_queue",
        "set_model",
        "cycle_model",
        "get_available_models",
        "set_thinking_level",
        "cycle_thinking_level",
        "get_available_thinking_levels",
        "set_steering_mode",
        "set_follow_up_mode",
        "set_auto_compaction",
        "set_auto_retry",
        "abort_retry",
        "bash",
        "abort_bash",
        "get_commands",
    ),
)

#: Pi's session commands: name -> handler(server, command, id, type)
_PI_COMMANDS: dict[str, Callable[..., Any]] = {c.name: c.handler for c in COMMANDS if c.kind == "pi" and c.handler}
#: the commands beyond Pi (after ``hello``)
_EXTRA_COMMANDS: dict[str, Callable[..., Any]] = {
    c.name: c.handler for c in COMMANDS if c.kind == "extra" and c.handler
}
#: Pi's RPC commands that need the agent runtime (a model loop, tools, a shell)
AGENT_COMMANDS = frozenset(c.name for c in COMMANDS if c.kind == "agent")
#: commands that leave the current session without reading it (no refresh first)
_LEAVING_COMMANDS = frozenset(c.name for c in COMMANDS if c.kind != "agent" and not c.refresh)
#: what ``hello`` announces
CAPABILITIES: list[str] = [cap for c in COMMANDS for cap in c.capabilities]
