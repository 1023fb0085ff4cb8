"""A session server speaking Pi 1.6's RPC protocol (``pi --mode rpc``): JSON lines in, JSON lines out.

:class:`RpcServer` holds one session and answers Pi's RPC commands with the same JSON Pi 1.6
answers (the ``*.rpc.json`` / ``*.compact.json`` recordings of the corpus are the reference);
:func:`serve_stdio` and :func:`serve_unix` are two fronts on top of it, and ``sessiontree rpc``
(:func:`main`) is the drop-in executable for clients that launch ``pi`` themselves.

Envelope (exactly Pi's)::

    {"id"?, "type": "response", "command": <type>, "success": true, "data"?: {...}}
    {"id"?, "type": "response", "command": <type>, "success": false, "error": "<text>"}

Events are bare lines (``session_info_changed``, ``compaction_start``, ``compaction_end``, and
after a ``hello`` the ``entry_appended`` events of ``follow``). An unparsable line is answered
with ``command: "parse"``; an unknown command with ``Unknown command: <type>``.

Session commands (Pi 1.6): ``get_entries`` (``since`` cursor), ``get_tree``, ``get_messages``,
``get_session_stats``, ``get_state``, ``get_fork_messages``, ``get_last_assistant_text``,
``set_session_name``, ``compact``, ``fork``, ``clone``, ``switch_session``, ``new_session``,
``export_html``. Agent-runtime commands (``prompt``, ``bash``, ``set_model``...) are refused:
this server holds sessions, not an agent.

Beyond Pi, only after the client sent ``{"type": "hello"}`` (so a Pi client sees nothing new):
``navigate_tree``, ``set_label``, ``get_entries`` with ``limit``, ``get_entry``,
``list_sessions``, ``follow`` (``entry_appended`` events; a ``follow_end`` event when the file is
deleted, replaced or rewritten, and the follow ends) and ``get_tree`` with ``format: "flat"``
(paged nodes with ``parentId``, ``childCount`` and labels, for JSON parsers with a depth limit).

Launch flags (:func:`main`) are Pi's session flags, honoured as Pi does: ``--session FILE|ID``,
``--fork FILE|ID``, ``--session-id``, ``--session-dir``, ``--continue``, ``--no-session``,
``--name``; any other Pi flag is refused (one line, exit 2). A new session is written with its
first entry, at the path ``get_state`` reports from the start. On ``--listen`` each connection
has its own current session; connections on one file share its index and writer
(:class:`SessionRegistry`).

Deliberate differences from Pi (``docs/divergences.md``): nothing is written on start (Pi appends
a ``thinking_level_change``, a missing newline, or rewrites v1/v2 files); legacy files are
migrated in memory only; where Pi's command throws a JavaScript TypeError on unusual content
(``get_session_stats`` on usage without ``cost``, ``get_fork_messages`` on null content,
``get_last_assistant_text`` on string content) we answer.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import socket
import stat
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Optional


from .context import calculate_context_tokens, estimate_context_tokens
from .errors import EntryNotFoundError, SessionCycleError, SessionError, SessionFileChangedError, SessionLockedError
from .orchestration import user_message_text
from .paths import (
    agent_dir,
    check_session_id,
    default_session_dir,
    iso_now,
    new_session_id,
    session_file_name,
    sessions_root,
)
from .session import Session, dumps_entry
from .settings import CompactionSettings

from ._jsjson import js_trim as _js_trim  # JavaScript String.prototype.trim, its one home
from .hooks import _camel  # snake_case -> camelCase field names, its one home

PI_VERSION = "1.6.0"
PROTOCOL = "sessiontree-rpc/1"
#: the longest command line accepted (bytes); longer lines are answered with a parse error
MAX_LINE_BYTES = 64 * 1024 * 1024

NOT_AN_AGENT = "this server holds sessions, not an agent: {cmd} needs a running Pi agent (sessiontree rpc)"

#: Pi's RPC commands that need the agent runtime (a model loop, tools, a shell)
AGENT_COMMANDS = frozenset(
    {
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
    }
)

#: the model Pi reports in ``get_state`` when none is configured
UNKNOWN_MODEL = {
    "id": "unknown",
    "name": "unknown",
    "api": "unknown",
    "provider": "unknown",
    "baseUrl": "",
    "reasoning": False,
    "input": [],
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
    "contextWindow": 0,
    "maxTokens": 0,
}

#: the one line a connection gets when the server is out of file descriptors
OUT_OF_DESCRIPTORS = "server out of file descriptors: connection refused, retry later"
#: descriptors ``--listen`` keeps free for session files and writer locks
FD_HEADROOM = 24

CAPABILITIES = [
    "navigate_tree",
    "set_label",
    "get_entries.limit",
    "get_entry",
    "list_sessions",
    "follow",
    "get_tree.flat",
    "follow_end",
]


class RpcError(SessionError):
    """A command failed; the message is the response's ``error`` text."""


# ==== models and settings (Pi's agent directory) ====================================


def load_models(path: Path | None) -> list[dict]:
    """Models of a Pi ``models.json`` (``{"providers": {name: {baseUrl, api, apiKey, models: [...]}}}``)
    as Pi's full model objects (keys in Pi's order) plus ``_apiKey``. Missing file: ``[]``.

    Raises:
        RpcError: the file is not valid JSON or not shaped like Pi's.
    """
    if path is None or not path.is_file():
        return []
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RpcError(f"cannot read models file {path}: {exc}") from None
    providers = doc.get("providers") if isinstance(doc, dict) else None
    if not isinstance(providers, dict):
        raise RpcError(f'models file {path}: no "providers" object')
    out = []
    for pname, p in providers.items():
        if not isinstance(p, dict):
            continue
        for m in p.get("models") or []:
            if not isinstance(m, dict) or not isinstance(m.get("id"), str):
                continue
            cost = m.get("cost")
            if not isinstance(cost, dict):
                cost = {}
            out.append(
                {
                    "id": m["id"],
                    "name": m.get("name", m["id"]),
                    "api": m.get("api", p.get("api", "openai-completions")),
                    "provider": pname,
                    "baseUrl": m.get("baseUrl", p.get("baseUrl", "")),
                    "reasoning": bool(m.get("reasoning", False)),
                    "input": m.get("input", ["text"]),
                    "cost": {k: cost.get(k, 0) for k in ("input", "output", "cacheRead", "cacheWrite")},
                    "contextWindow": m.get("contextWindow", 128000),
                    "maxTokens": m.get("maxTokens", 16384),
                    "_apiKey": m.get("apiKey", p.get("apiKey")),
                }
            )
    return out


def load_settings(path: Path | None) -> dict:
    """Pi's ``settings.json`` as a dict (``{}`` when missing or unreadable)."""
    if path is None or not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def compaction_settings(settings: dict) -> CompactionSettings:
    """``settings["compaction"]`` (``reserveTokens``, ``keepRecentTokens``) as CompactionSettings."""
    raw = settings.get("compaction")
    if not isinstance(raw, dict):
        raw = {}
    kw: dict[str, Any] = {}
    for src, dst in (("keepRecentTokens", "keep_recent_tokens"), ("reserveTokens", "reserve_tokens")):
        v = raw.get(src)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            kw[dst] = v
    return CompactionSettings(**kw)


def public_model(model: dict | None) -> dict:
    """The model object Pi shows (``get_state.model``): the configured one, else Pi's placeholder."""
    if model is None:
        return dict(UNKNOWN_MODEL)
    return {k: v for k, v in model.items() if not k.startswith("_")}


def summarizer_for(model: dict) -> Any:
    """A summarizer calling ``model`` like Pi does (OpenAI-compatible chat completions or
    Anthropic Messages), priced with the model's cost per million tokens."""
    from .summarizers import Pricing

    key = model.get("_apiKey")
    if isinstance(key, str) and key in os.environ:
        key = os.environ[key]  # Pi resolves an environment variable's name
    common = dict(
        api_key=key or None,
        base_url=model.get("baseUrl") or None,
        pricing=Pricing.from_pi(model["cost"]),
        max_output_tokens=model.get("maxTokens") or None,
        context_window=model.get("contextWindow") or None,
    )
    api = model.get("api")
    if api == "anthropic-messages":
        from .summarizers import AnthropicSummarizer

        return AnthropicSummarizer(model["id"], **common)
    if api in ("openai-completions", "openai-responses", None):
        from .summarizers import OpenAICompatSummarizer

        return OpenAICompatSummarizer(model["id"], **common)
    raise RpcError(f"model {model['provider']}/{model['id']}: api {api!r} is not supported for summaries")


# ==== JSON ===========================================================================


def encode(value: Any) -> bytes:
    """One JSON line's text (no newline), compact like Pi's ``JSON.stringify``. Values nested
    deeper than orjson allows (``get_tree`` on a long path) are written without recursion."""
    try:
        return dumps_entry(value)
    except (RecursionError, ValueError, TypeError):
        return _encode_iterative(value)


def _encode_iterative(value: Any) -> bytes:
    out: list[bytes] = []
    stack: list[Any] = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, bytes):
            out.append(v)
        elif isinstance(v, dict):
            items = list(v.items())
            parts: list[Any] = [b"{"]
            for n, (k, x) in enumerate(items):
                if n:
                    parts.append(b",")
                parts.append(dumps_entry(str(k)) + b":")
                parts.append(x)
            parts.append(b"}")
            stack.extend(reversed(parts))
        elif isinstance(v, (list, tuple)):
            parts = [b"["]
            for n, x in enumerate(v):
                if n:
                    parts.append(b",")
                parts.append(x)
            parts.append(b"]")
            stack.extend(reversed(parts))
        else:
            out.append(dumps_entry(v))
    return b"".join(out)


def response(cmd_id: Any, command: Any, data: Any = None, *, has_data: bool = True) -> dict:
    """A success envelope (``data`` omitted when ``has_data`` is false, as Pi omits it)."""
    r: dict = {}
    if cmd_id is not None:
        r["id"] = cmd_id
    r.update(type="response", command=command, success=True)
    if has_data:
        r["data"] = data
    return r


def error_response(cmd_id: Any, command: Any, message: str) -> dict:
    """Pi's failed-command response: ``{"id"?, "type": "response", "command", "success": false,
    "error": message}`` (``id`` only when the command had one, as Pi's ``rpc-mode.ts`` does)."""
    r: dict = {}
    if cmd_id is not None:
        r["id"] = cmd_id
    r.update(type="response", command=command, success=False, error=message)
    return r


# ==== message helpers (Pi agent-session rules) =======================================


def last_assistant_text(messages: Iterable[dict]) -> Optional[str]:
    """Pi 1.6 ``getLastAssistantText`` over the context messages: the last assistant message,
    skipping those without a text block that ended aborted/error or only call tools; its text
    blocks joined and trimmed; None when empty. (Pi throws on non-array content; we treat a
    string content as its text.)"""
    for m in reversed(list(messages)):
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        content = m.get("content")
        if isinstance(content, str):
            blocks = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            blocks = [b for b in content if isinstance(b, dict)]
        else:
            blocks = []
        has_text = any(b.get("type") == "text" for b in blocks)
        has_tool = any(b.get("type") == "toolCall" for b in blocks)
        if not has_text and (m.get("stopReason") in ("aborted", "error") or has_tool):
            continue
        text = "".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))
        return _js_trim(text) or None
    return None


# ==== the server =======================================================================


class RpcServer:
    """Pi 1.6 RPC over one connection's current session, transport-free: ``handle(command) ->
    response dict``; events go to ``on_event(event_dict)`` (from the handling thread, or from
    the ``follow`` poller's thread).

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

    def __init__(
        self,
        session: Session | None = None,
        *,
        on_event: Callable[[dict], None] | None = None,
        model: dict | None = None,
        models: list[dict] | None = None,
        settings: dict | None = None,
        summarizer: Any = None,
        cwd: str | None = None,
        session_dir: str | os.PathLike | None = None,
        persist: bool = True,
        write_lock: Any = None,
        release_after_write: bool = True,
        session_ref: "SharedSession | None" = None,
        registry: "SessionRegistry | None" = None,
        pending: "PendingSession | None" = None,
    ):
        self.cwd = cwd or os.getcwd()
        self.session_dir = Path(session_dir) if session_dir is not None else None
        self.persist = persist
        self.on_event = on_event or (lambda event: None)
        self.models = list(models or [])
        self.model = model
        self.settings = settings or {}
        self.summarizer = summarizer
        self.release_after_write = release_after_write
        self.hello = False
        self.is_compacting = False
        self.registry = registry if registry is not None else SessionRegistry()
        self._pending: PendingSession | None = None
        self._followers: list[threading.Thread] = []
        self._stop = threading.Event()
        if session_ref is not None:
            self._cur = self.registry.acquire(session_ref)
        elif session is not None:
            self._cur = self.registry.adopt(session, gate=write_lock)
        elif pending is not None or persist:
            self._cur = self.registry.private(Session.in_memory(self.cwd))
            self._start_pending(pending or self._new_pending_spec(None))
        else:
            self._cur = self.registry.private(Session.in_memory(self.cwd))

    # ---- session access ----

    @property
    def session(self) -> Session:
        """The session this connection holds now (``new_session``/``switch_session``/``fork``
        change it)."""
        return self._cur.session

    @property
    def write_lock(self) -> Any:
        """The writer gate of the current session (shared by every connection on its file)."""
        return self._cur.gate

    @property
    def pending(self) -> "PendingSession | None":
        """The new session announced but not written yet (None once written, or for a file)."""
        return self._pending

    def _new_pending_spec(self, parent_session: str | None, session_id: str | None = None) -> "PendingSession":
        cwd = self.session.cwd if getattr(self, "_cur", None) is not None else self.cwd
        sdir = self.session_dir or default_session_dir(cwd)
        return PendingSession(cwd, sdir, session_id=session_id, parent_session=parent_session)

    def _start_pending(self, spec: "PendingSession") -> None:
        """Serve ``spec`` (not written yet) from an in-memory placeholder with its id."""
        self.cwd = spec.cwd
        self._switch_to(self.registry.private(Session.in_memory(spec.cwd, session_id=spec.session_id)))
        self._pending = spec

    def _materialize(self) -> Session:
        """A new session is written on its first entry (Pi writes it lazily too), at the path
        announced; connections waiting on the same announced session share the file."""
        spec = self._pending
        if spec is not None:
            shared = self.registry.create(spec)
            self._switch_to(shared)
        return self._cur.session

    def _session_file(self) -> Optional[str]:
        if self._pending is not None:
            return str(self._pending.path)
        if self.session.path is None:
            return None
        return os.path.abspath(self.session.path)  # Pi resolves the path it was given

    def _session_name(self) -> Optional[str]:
        if self._pending is not None and self._pending.name is not None:
            return self._pending.name
        return self.session.session_name

    def close(self) -> None:
        """Stop the follower threads (waiting up to 2 s each) and release the session (closed
        when no other connection holds it); never raises."""
        self._stop.set()
        for t in self._followers:
            t.join(timeout=2)
        try:
            self.registry.release(self._cur)
        except Exception:
            pass

    # ---- dispatch ----

    def handle_line(self, line: bytes | str) -> dict:
        """Answer one raw command line (``command: "parse"`` when it is not a JSON object)."""
        try:
            if isinstance(line, bytes):
                line = line.decode("utf-8")
            command = json.loads(line, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            return error_response(None, "parse", f"Failed to parse command: {exc}")
        if not isinstance(command, dict):
            return error_response(None, "parse", "Failed to parse command: a command must be a JSON object")
        return self.handle(command)

    def handle(self, command: dict) -> dict:
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
            return handler(self, command, cmd_id, ctype)
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

    def _refresh(self) -> None:
        """Index what other processes appended since the last command (cost: the new bytes).
        An announced session another connection has written since is served from its file."""
        if self._pending is not None:
            if self._pending.path.exists():
                self._materialize()
            return
        if self.session.path is not None:
            self.session.refresh()

    def _emit(self, event: dict) -> None:
        try:
            self.on_event(event)
        except Exception:
            pass

    def _write(self, fn: Callable[[Session], Any]) -> Any:
        """Run a write under the current file's writer gate (one writer at a time per file);
        release the file lock afterwards when ``release_after_write``."""
        self._materialize()
        shared = self._cur
        with shared.gate:
            s = shared.session
            try:
                return fn(s)
            finally:
                if self.release_after_write:
                    s.close()

    # ---- Pi commands ----

    def _get_entries(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        s = self.session
        since = c.get("since")
        limit = c.get("limit") if self.hello else None
        if since is not None and not isinstance(since, str):
            raise RpcError(str(EntryNotFoundError.of(_js_string(since))))
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise RpcError("limit must be a non-negative integer")
        data: dict[str, Any]
        if limit is None:
            entries = s.get_entries(since)
            data = {"entries": [e.raw for e in entries], "leafId": s.leaf_id}
            return response(cmd_id, ctype, data)
        page = s.get_entries_page(since, limit)
        data = {"entries": [e.raw for e in page], "leafId": s.leaf_id}
        if page:
            data["hasMore"] = page[-1].index + 1 < len(s)
            data["nextSince"] = page[-1].id
        else:
            data["hasMore"] = False
        return response(cmd_id, ctype, data)

    def _get_tree(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        s = self.session
        fmt = c.get("format", "nested") if self.hello else "nested"
        if fmt == "flat":
            return self._get_tree_flat(c, cmd_id, ctype)
        if fmt != "nested":
            raise RpcError(f'get_tree: "format" must be "nested" or "flat", not {_js_string(fmt)}')
        roots = s.get_tree()
        stamps = self._label_timestamps()
        out_roots: list = []
        # iterative build (a path can be thousands of entries deep)
        pending: list = [(n, out_roots) for n in reversed(roots)]
        while pending:
            node, into = pending.pop()
            d: dict = {"entry": node.entry.raw, "children": []}
            if node.label is not None:
                d["label"] = node.label
                ts = stamps.get(node.entry.id)
                if ts is not None:
                    d["labelTimestamp"] = ts
            into.append(d)
            for ch in reversed(node.children):
                pending.append((ch, d["children"]))
        return response(cmd_id, ctype, {"tree": out_roots, "leafId": s.leaf_id})

    def _get_tree_flat(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        """``get_tree`` with ``format: "flat"`` (after ``hello``): the nodes of Pi's tree in
        its pre-order (the order the nested form lists them), ``offset``/``limit`` paged. Each
        node: ``{id, parentId (the tree parent's id, null for a root), childCount, label?,
        labelTimestamp?, entry}``. Pi's nested form puts every entry two JSON levels below its
        parent, deeper than Python's ``json`` and ``orjson`` parse (about 1,000 levels) once a
        path holds about 500 entries; this form is two levels deep at any size."""
        s = self.session
        offset = c.get("offset", 0)
        limit = c.get("limit", 1000)
        for name, v in (("offset", offset), ("limit", limit)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise RpcError(f'get_tree: "{name}" must be a non-negative integer, not {_js_string(v)}')
        roots, start, kids = s.tree_table()
        order: list[int] = []
        parent: dict[int, int] = {}
        on_path: set[int] = set()
        stack: list[int] = [~r for r in reversed(roots)]
        while stack:  # pre-order without recursion; ~i enters node i, i leaves it
            i = stack.pop()
            if i >= 0:
                on_path.discard(i)
                continue
            i = ~i
            if i in on_path:  # duplicate ids put a node below itself (as get_tree refuses)
                raise SessionCycleError("the tree loops through duplicate ids: a node is below itself", [])
            on_path.add(i)
            order.append(i)
            stack.append(i)
            ch = kids[start[i] : start[i + 1]]
            for k in ch:
                parent[k] = i
            stack.extend(~k for k in reversed(ch))
        page = order[offset : offset + limit]
        stamps: dict | None = None  # read only when a node of the page has a label
        nodes = []
        for i in page:
            e = s.entry_at(i)
            p = parent.get(i)
            d: dict = {"id": e.id, "parentId": None if p is None else s.entry_at(p).id}
            d["childCount"] = start[i + 1] - start[i]
            label = s.get_label(e.id) if isinstance(e.id, str) else None
            if label is not None:
                d["label"] = label
                if stamps is None:
                    stamps = self._label_timestamps()
                ts = stamps.get(e.id)
                if ts is not None:
                    d["labelTimestamp"] = ts
            d["entry"] = e.raw
            nodes.append(d)
        end = offset + len(page)
        data: dict = {"nodes": nodes, "leafId": s.leaf_id, "total": len(order), "hasMore": end < len(order)}
        if end < len(order):
            data["nextOffset"] = end
        return response(cmd_id, ctype, data)

    def _label_timestamps(self) -> dict:
        """Target id -> timestamp of the label entry that set its current label (file order)."""
        out: dict = {}
        for e in self.session.iter_entries():
            if e.type != "label":
                continue
            raw = e.raw
            if not isinstance(raw, dict):
                continue
            target = raw.get("targetId")
            if raw.get("label"):
                out[target] = raw.get("timestamp")
            else:
                out.pop(target, None)
        return out

    def _get_messages(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        return response(cmd_id, ctype, {"messages": self.session.build_context().messages})

    def _counts(self) -> dict:
        user = assistant = tool_calls = tool_results = total = 0
        for e in self.session.iter_entries():
            if e.type != "message":
                continue
            m = e.raw.get("message") if isinstance(e.raw, dict) else None
            if not isinstance(m, dict):
                continue
            total += 1
            role = m.get("role")
            if role == "user":
                user += 1
            elif role == "assistant":
                assistant += 1
                content = m.get("content")
                if isinstance(content, list):
                    tool_calls += sum(1 for b in content if isinstance(b, dict) and b.get("type") == "toolCall")
            elif role == "toolResult":
                tool_results += 1
        return {
            "userMessages": user,
            "assistantMessages": assistant,
            "toolCalls": tool_calls,
            "toolResults": tool_results,
            "totalMessages": total,
        }

    def _context_usage(self, messages: list) -> Optional[dict]:
        """Pi ``getContextUsage``: None without a model window; tokens/percent null right after
        a compaction until an assistant reply after it reports usage."""
        window = (self.model or {}).get("contextWindow") or 0
        if not isinstance(window, (int, float)) or window <= 0:
            return None
        branch = self.session.get_branch()
        last_c = next((k for k in range(len(branch) - 1, -1, -1) if branch[k].type == "compaction"), None)
        if last_c is not None:
            fresh = False
            for k in range(len(branch) - 1, last_c, -1):
                e = branch[k]
                if e.type == "message" and e.role == "assistant":
                    m = e.raw.get("message")
                    if m.get("stopReason") not in ("aborted", "error"):
                        usage = m.get("usage")
                        fresh = isinstance(usage, dict) and calculate_context_tokens(usage) > 0
                        break
            if not fresh:
                return {"tokens": None, "contextWindow": window, "percent": None}
        tokens = estimate_context_tokens(messages).tokens
        return {"tokens": tokens, "contextWindow": window, "percent": tokens / window * 100}

    def _get_session_stats(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        s = self.session
        data: dict = {}
        f = self._session_file()
        if f is not None:
            data["sessionFile"] = f
        data["sessionId"] = s.session_id
        data.update(self._counts())
        totals = s.usage_totals().to_pi()
        data["tokens"] = totals["tokens"]
        data["cost"] = totals["cost"]
        if self.model is not None:
            usage = self._context_usage(s.build_context().messages)
            if usage is not None:
                data["contextUsage"] = usage
        return response(cmd_id, ctype, data)

    def _get_state(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        s = self.session
        ctx = s.build_context()
        model = public_model(self.model)
        thinking = ctx.thinking_level if model.get("reasoning") else "off"
        data: dict = {
            "model": model,
            "thinkingLevel": thinking,
            "isStreaming": False,
            "isCompacting": self.is_compacting,
            "steeringMode": "one-at-a-time",
            "followUpMode": "one-at-a-time",
        }
        f = self._session_file()
        if f is not None:
            data["sessionFile"] = f
        data["sessionId"] = s.session_id
        name = self._session_name()
        if name is not None:
            data["sessionName"] = name
        data.update(
            autoCompactionEnabled=bool((self.settings.get("compaction") or {}).get("enabled", True))
            if isinstance(self.settings.get("compaction"), dict)
            else True,
            messageCount=len(ctx.messages),
            pendingMessageCount=0,
        )
        return response(cmd_id, ctype, data)

    def _get_fork_messages(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        out = []
        for e in self.session.iter_entries():
            if e.type != "message" or e.role != "user":
                continue
            text = user_message_text(e.raw["message"].get("content"))
            if text:
                out.append({"entryId": e.id, "text": text})
        return response(cmd_id, ctype, {"messages": out})

    def _get_last_assistant_text(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        text = last_assistant_text(self.session.build_context().messages)
        return response(cmd_id, ctype, {} if text is None else {"text": text})

    def _set_session_name(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        name = c.get("name")
        if not isinstance(name, str):
            raise RpcError(f'set_session_name: "name" must be a string, not {_json_type(name)}')

        if not _js_trim(name):
            raise RpcError("Session name cannot be empty")
        self._write(lambda s: s.append_session_info(name))
        self._emit({"type": "session_info_changed", "name": self.session.session_name})
        return response(cmd_id, ctype, has_data=False)

    def _compact(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        instructions = c.get("customInstructions")
        if instructions is not None and not isinstance(instructions, str):
            raise RpcError(f'compact: "customInstructions" must be a string, not {_json_type(instructions)}')
        self._emit({"type": "compaction_start", "reason": "manual"})
        end: dict = {"type": "compaction_end", "reason": "manual"}
        try:
            summarizer = self.summarizer
            if summarizer is None:
                if self.model is None:
                    raise RpcError(
                        "No model configured for compaction: give --provider/--model of a models file "
                        "(~/.pi/agent/models.json or --models FILE), or --summarizer offline"
                    )
                summarizer = summarizer_for(self.model)
            kwargs: dict = {}
            if self.model is not None:
                kwargs = {
                    "context_window": self.model.get("contextWindow") or None,
                    "max_tokens": self.model.get("maxTokens") or None,
                }
            self.is_compacting = True
            try:
                result = self._write(
                    lambda s: s.compact(
                        summarizer,
                        settings=compaction_settings(self.settings),
                        custom_instructions=instructions,
                        reason="manual",
                        **kwargs,
                    )
                )
            finally:
                self.is_compacting = False
        except Exception as exc:
            message = _error_text(exc)
            end.update(aborted=False, willRetry=False, errorMessage=f"Compaction failed: {message}")
            self._emit(end)
            if isinstance(exc, (SessionError, RpcError, ValueError, TypeError, OSError)) or _is_summarizer_error(exc):
                return error_response(cmd_id, ctype, message)
            raise
        data = result.to_pi()
        end.update(result=data, aborted=False, willRetry=False)
        self._emit(end)
        return response(cmd_id, ctype, data)

    def _switch_to(self, shared: "SharedSession") -> None:
        """Make ``shared`` this connection's session (other connections stay where they are)
        and release the previous one."""
        old = getattr(self, "_cur", None)
        self._cur = shared
        self._pending = None
        if old is not None and old is not shared:
            self.registry.release(old)

    def _switch_session_to(self, session: Session) -> None:
        self._switch_to(self.registry.adopt(session) if session.path is not None else self.registry.private(session))

    def _fork(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        entry_id = c.get("entryId")
        s = self.session
        e = s.get_entry(entry_id) if isinstance(entry_id, str) else None
        if e is None or e.type != "message" or e.role != "user":
            raise RpcError("Invalid entry ID for forking")
        text = user_message_text(e.raw["message"].get("content"))
        parent = e.parent_id
        if not self.persist or s.path is None:
            new = s.create_branched_session(parent) if parent is not None else Session.in_memory(s.cwd)
            self._switch_session_to(new)
        elif parent is None:
            self._start_pending(self._new_pending_spec(parent_session=str(s.path)))
        else:
            self._switch_session_to(s.create_branched_session(parent))
        return response(cmd_id, ctype, {"text": text, "cancelled": False})

    def _clone(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        s = self.session
        leaf = s.leaf_id
        if leaf is None:
            raise RpcError("Nothing to clone: the session has no entries")
        self._switch_session_to(s.create_branched_session(leaf))
        return response(cmd_id, ctype, {"cancelled": False})

    def _new_session(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        parent = c.get("parentSession")
        if parent is not None and not isinstance(parent, str):
            raise RpcError(f'new_session: "parentSession" must be a string, not {_json_type(parent)}')
        if self.persist:
            self._start_pending(self._new_pending_spec(parent))
        else:
            self._switch_session_to(Session.in_memory(self.session.cwd))
        return response(cmd_id, ctype, {"cancelled": False})

    def _switch_session(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        path = c.get("sessionPath")
        if not isinstance(path, str) or not path:
            raise RpcError('switch_session: "sessionPath" must be a non-empty string')
        try:
            shared = self.registry.open(path)
        except FileNotFoundError:
            raise RpcError(f"Session file not found: {path}") from None
        self._switch_to(shared)
        return response(cmd_id, ctype, {"cancelled": False})

    def _export_html(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        s = self.session
        out = c.get("outputPath")
        if out is not None and not isinstance(out, str):
            raise RpcError(f'export_html: "outputPath" must be a string, not {_json_type(out)}')
        if out is None:
            stem = s.path.stem if s.path is not None else s.session_id
            out = os.path.join(os.getcwd(), f"pi-session-{stem}.html")
        return response(cmd_id, ctype, {"path": str(s.export_html(out))})

    # ---- beyond Pi (after hello) ----

    def _hello(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        self.hello = True
        hello = {"type": "hello", "protocol": PROTOCOL, "version": PI_VERSION, "capabilities": list(CAPABILITIES)}
        self._emit(hello)
        return response(
            cmd_id, ctype, {"protocol": PROTOCOL, "version": PI_VERSION, "capabilities": list(CAPABILITIES)}
        )

    def _get_entry(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        entry_id = c.get("entryId")
        if not isinstance(entry_id, str):
            raise RpcError(f'get_entry: "entryId" must be a string, not {_json_type(entry_id)}')
        e = self.session.get_entry(entry_id)
        if e is None:
            raise EntryNotFoundError.of(entry_id)
        return response(cmd_id, ctype, {"entry": e.raw, "label": self.session.get_label(entry_id)})

    def _set_label(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        target = c.get("entryId")
        label = c.get("label")
        if not isinstance(target, str):
            raise RpcError(f'set_label: "entryId" must be a string, not {_json_type(target)}')
        if label is not None and not isinstance(label, str):
            raise RpcError(f'set_label: "label" must be a string or null, not {_json_type(label)}')
        new_id = self._write(lambda s: s.append_label_change(target, label or None))
        return response(cmd_id, ctype, {"labelEntryId": new_id})

    def _navigate_tree(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        target = c.get("targetId")
        if not isinstance(target, str):
            raise RpcError(f'navigate_tree: "targetId" must be a string, not {_json_type(target)}')
        summarize = c.get("summarize", False)
        if not isinstance(summarize, bool):
            raise RpcError('navigate_tree: "summarize" must be a boolean')
        label = c.get("label")
        if label is not None and not isinstance(label, str):
            raise RpcError('navigate_tree: "label" must be a string')
        instructions = c.get("customInstructions")
        if instructions is not None and not isinstance(instructions, str):
            raise RpcError('navigate_tree: "customInstructions" must be a string')
        kwargs: dict = {}
        if summarize:
            summarizer = self.summarizer
            if summarizer is None:
                if self.model is None:
                    raise RpcError("No model configured for a branch summary (see --summarizer)")
                summarizer = summarizer_for(self.model)
            kwargs = {"summarize": True, "summarizer": summarizer, "custom_instructions": instructions}
        if summarize or label is not None:
            result = self._write(lambda s: s.navigate_tree(target, label=label, **kwargs))
        else:
            if self.session.get_entry(target) is None:
                raise EntryNotFoundError.of(target)
            with self.write_lock:
                result = self.session.navigate_tree(target)
        data: dict = {"leafId": result.new_leaf_id, "cancelled": bool(result.cancelled)}
        if result.editor_text is not None:
            data["editorText"] = result.editor_text
        if result.summary_entry is not None:
            data["summaryEntry"] = result.summary_entry.raw
        return response(cmd_id, ctype, data)

    def _list_sessions(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        from .listing import list_sessions

        sdir = c.get("sessionDir")
        if sdir is not None and not isinstance(sdir, str):
            raise RpcError('list_sessions: "sessionDir" must be a string')
        if sdir is None:
            s = self.session
            sdir = str(s.path.parent) if s.path is not None else str(self.session_dir or default_session_dir(self.cwd))
        infos = list_sessions(session_dir=sdir)
        out = []
        for i in infos:
            d = {}
            for k, v in vars(i).items():  # SessionInfo is a dataclass
                d[_camel(k)] = str(v) if isinstance(v, Path) else (v.isoformat() if hasattr(v, "isoformat") else v)
            out.append(d)
        return response(cmd_id, ctype, {"sessions": out})

    def _follow(self, c: dict, cmd_id: Any, ctype: str) -> dict:
        since = c.get("since")
        interval = c.get("intervalMs", 200)
        if since is not None and not isinstance(since, str):
            raise RpcError('follow: "since" must be an entry id')
        if not isinstance(interval, (int, float)) or isinstance(interval, bool) or not 10 <= interval <= 60000:
            raise RpcError('follow: "intervalMs" must be a number between 10 and 60000')
        s = self.session
        if since is not None and s.get_entry(since) is None:
            raise EntryNotFoundError.of(since)
        cursor = [since]
        lock = threading.Lock()
        key = self._cur.key

        def pump() -> bool:
            """Send what is new; False (after a ``follow_end`` event) when following is over."""
            with lock:
                try:
                    s.refresh()
                except (SessionError, OSError) as exc:
                    self._emit(_follow_end(s, exc, key))
                    return False
                for e in s.get_entries(cursor[0]) if cursor[0] is not None else s.get_entries():
                    self._emit({"type": "entry_appended", "entry": e.raw, "leafId": s.leaf_id})
                    if e.id is not None:
                        cursor[0] = e.id
                return True

        if not pump():  # everything after the cursor, before the response
            raise RpcError("follow: the session file changed under the server; switch_session to reopen it")

        def loop() -> None:
            while not self._stop.wait(interval / 1000):
                if self.session is not s or not pump():
                    return

        t = threading.Thread(target=loop, name="sessiontree-rpc-follow", daemon=True)
        self._followers.append(t)
        t.start()
        return response(cmd_id, ctype, {"following": True, "since": cursor[0]})


def _follow_end(s: Session, exc: BaseException, key: Any) -> dict:
    """The ``follow_end`` event: why following stopped. ``reason`` is ``"deleted"`` (no file
    at the path any more), ``"replaced"`` (another file was renamed over it), ``"rewritten"``
    (the same file shrank or was rewritten in place) or ``"error"`` (it cannot be read).
    ``key`` is the followed file's (device, inode) when following started."""
    path = s.path
    reason = "error"
    if isinstance(exc, SessionFileChangedError) and path is not None:
        try:
            now = os.stat(path)
        except FileNotFoundError:
            reason = "deleted"
        except OSError:
            reason = "error"
        else:
            reason = "replaced" if key is not None and key != (now.st_dev, now.st_ino) else "rewritten"
    elif isinstance(exc, FileNotFoundError):
        reason = "deleted"
    return {
        "type": "follow_end",
        "reason": reason,
        "sessionFile": None if path is None else os.path.abspath(path),
        "message": f"{_error_text(exc)}; follow ended (switch_session to the file reopens it, then follow again)",
    }


class SharedSession:
    """One session as the connections serving it share it: the :class:`Session` (one index),
    its writer ``gate`` and how many connections hold it (``refs``)."""

    def __init__(self, session: Session, gate: Any = None, key: Any = None):
        self.session = session
        self.gate = gate if gate is not None else threading.RLock()
        self.key = key
        self.refs = 1


class PendingSession:
    """A new session announced but not written yet (Pi writes a new session lazily too): its
    id, header timestamp and so its path are fixed when it is announced, so ``get_state``
    reports the ``sessionFile`` it will have. ``name`` is a ``--name`` to write with it."""

    def __init__(
        self,
        cwd: str,
        session_dir: Path,
        *,
        session_id: str | None = None,
        parent_session: str | None = None,
        name: str | None = None,
    ):
        self.cwd = cwd
        self.session_dir = Path(session_dir)
        self.session_id = check_session_id(session_id) if session_id is not None else new_session_id()
        self.timestamp = iso_now()
        self.parent_session = parent_session
        self.name = name
        self.path = Path(os.path.abspath(self.session_dir / session_file_name(self.timestamp, self.session_id)))


class SessionRegistry:
    """The sessions one server process has open, by file (device and inode): connections on
    one file share one :class:`SharedSession`; the session is closed when the last connection
    lets it go. ``gate`` makes each file's writer gate (a blocking lock for stdio; for
    ``--listen``, :class:`_WriterGate`, which refuses a second writer instead of queueing it)."""

    def __init__(self, gate: Callable[[], Any] = threading.RLock):
        self.make_gate = gate
        self._lock = threading.Lock()
        self._open: dict[Any, SharedSession] = {}

    @staticmethod
    def _key(path: Path) -> Any:
        st = os.stat(path)
        return (st.st_dev, st.st_ino)

    def private(self, session: Session) -> SharedSession:
        """A session only one connection holds (in memory, or a placeholder)."""
        return SharedSession(session, self.make_gate())

    def adopt(self, session: Session, gate: Any = None) -> SharedSession:
        """Register a session just opened or created; if the same file is already open, the
        new object is closed and the open one shared."""
        if session.path is None:
            return SharedSession(session, gate if gate is not None else self.make_gate())
        key = self._key(session.path)
        with self._lock:
            got = self._open.get(key)
            if got is not None:
                got.refs += 1
            else:
                got = self._open[key] = SharedSession(session, gate if gate is not None else self.make_gate(), key)
                return got
        try:
            session.close()
        except Exception:
            pass
        return got

    def acquire(self, shared: SharedSession) -> SharedSession:
        """One more connection holds ``shared``."""
        with self._lock:
            shared.refs += 1
        return shared

    def open(self, path: str | os.PathLike) -> SharedSession:
        """The shared session of the file at ``path`` (opened if no connection has it).

        Raises:
            FileNotFoundError, SessionFormatError, OSError: as :meth:`Session.open`.
        """
        try:
            key = self._key(Path(path).expanduser())
        except FileNotFoundError:
            raise
        except OSError:
            key = None
        if key is not None:
            with self._lock:
                got = self._open.get(key)
                if got is not None:
                    got.refs += 1
                    return got
        return self.adopt(Session.open(path))

    def create(self, spec: PendingSession) -> SharedSession:
        """Write the announced session ``spec`` (its header, and its ``--name``), or share it
        when another connection wrote it first."""
        with self._lock:
            exists = spec.path.exists()
        if exists:
            return self.open(spec.path)
        try:
            s = Session.create(
                spec.cwd,
                session_dir=spec.session_dir,
                session_id=spec.session_id,
                parent_session=spec.parent_session,
                timestamp=spec.timestamp,
            )
        except FileExistsError:  # another connection wrote it just now
            return self.open(spec.path)
        if spec.name is not None:
            s.append_session_info(spec.name)
        return self.adopt(s)

    def release(self, shared: SharedSession) -> None:
        """One connection lets ``shared`` go; the last one closes the session."""
        with self._lock:
            shared.refs -= 1
            last = shared.refs <= 0
            if last and shared.key is not None and self._open.get(shared.key) is shared:
                del self._open[shared.key]
        if last:
            try:
                shared.session.close()
            except Exception:
                pass


#: commands that leave the current session without reading it (no refresh first)
_LEAVING_COMMANDS = frozenset({"switch_session", "new_session", "hello"})

_PI_COMMANDS: dict[str, Callable] = {
    "get_entries": RpcServer._get_entries,
    "get_tree": RpcServer._get_tree,
    "get_messages": RpcServer._get_messages,
    "get_session_stats": RpcServer._get_session_stats,
    "get_state": RpcServer._get_state,
    "get_fork_messages": RpcServer._get_fork_messages,
    "get_last_assistant_text": RpcServer._get_last_assistant_text,
    "set_session_name": RpcServer._set_session_name,
    "compact": RpcServer._compact,
    "fork": RpcServer._fork,
    "clone": RpcServer._clone,
    "switch_session": RpcServer._switch_session,
    "new_session": RpcServer._new_session,
    "export_html": RpcServer._export_html,
}

_EXTRA_COMMANDS: dict[str, Callable] = {
    "navigate_tree": RpcServer._navigate_tree,
    "set_label": RpcServer._set_label,
    "get_entry": RpcServer._get_entry,
    "list_sessions": RpcServer._list_sessions,
    "follow": RpcServer._follow,
}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # JSON.parse rejects NaN / Infinity


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    return "an object"


def _js_string(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    return encode(v).decode("utf-8", "replace")


def _is_summarizer_error(exc: BaseException) -> bool:
    try:
        from .summarizers import SummarizerError
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, SummarizerError)


def _error_text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


# ==== fronts ===========================================================================


_TOO_LONG = object()


def read_lines(stream: Any, max_bytes: int = MAX_LINE_BYTES) -> Iterable[Any]:
    """Command lines of a binary stream: LF framing only (a trailing ``\\r`` is stripped; U+2028
    and U+2029 are ordinary characters), blank lines skipped. A line longer than ``max_bytes``
    is skipped to its end and yields ``_TOO_LONG`` (memory stays bounded)."""
    while True:
        line = stream.readline(max_bytes + 1)
        if not line:
            return
        if len(line) > max_bytes and not line.endswith(b"\n"):
            while True:  # drop the rest of the oversized line
                rest = stream.readline(1 << 20)
                if not rest or rest.endswith(b"\n"):
                    break
            yield _TOO_LONG
            continue
        if line.endswith(b"\n"):
            line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line.strip():
            continue
        yield line


def _too_long_response(max_bytes: int) -> dict:
    return error_response(None, "parse", f"Failed to parse command: line longer than {max_bytes} bytes")


class _LineWriter:
    """Writes JSON lines to a binary stream; one line at a time across threads."""

    def __init__(self, stream: Any):
        self.stream = stream
        self.lock = threading.Lock()
        self.broken = False

    def __call__(self, obj: dict) -> None:
        data = encode(obj) + b"\n"
        with self.lock:
            if self.broken:
                return
            try:
                self.stream.write(data)
                self.stream.flush()
            except (BrokenPipeError, ConnectionError, OSError, ValueError):
                self.broken = True


def serve_stdio(server: RpcServer, stdin: Any = None, stdout: Any = None, max_bytes: int = MAX_LINE_BYTES) -> int:
    """Serve ``server`` on a pair of binary streams (default stdin/stdout) until end of input."""
    stdin = stdin if stdin is not None else sys.stdin.buffer
    stdout = stdout if stdout is not None else sys.stdout.buffer
    out = _LineWriter(stdout)
    server.on_event = out
    try:
        for line in read_lines(stdin, max_bytes):
            out(_too_long_response(max_bytes) if line is _TOO_LONG else server.handle_line(line))
            if out.broken:
                break
    finally:
        server.close()
    return 0


class UnixServer:
    """Many clients on a unix socket (mode 0600): each connection gets its own
    :class:`RpcServer` (its own current session) from ``make_server(on_event=...)``;
    connections on one file share its session, its index and one writer gate (the servers'
    :class:`SessionRegistry`). Reads never wait for a writer; a write while another client's
    write to the same file runs is refused (one writer at a time).

    File descriptors: the server takes at most ``max_connections`` connections (default: the
    process's descriptor limit less :data:`FD_HEADROOM`, kept for session files and writer
    locks), so that the connections it has can still open and write sessions; a connection
    beyond that gets one error line (:data:`OUT_OF_DESCRIPTORS`) and is closed. Should
    descriptors run out anyway (``EMFILE``, or no thread left), the server does the same,
    backing off between attempts (up to 1 s), and keeps serving; it never exits for it."""

    def __init__(
        self,
        path: str,
        make_server: Callable[..., RpcServer],
        max_bytes: int = MAX_LINE_BYTES,
        max_connections: int | None = None,
    ):
        self.path = path
        self.make_server = make_server
        self.max_bytes = max_bytes
        if max_connections is None:
            import resource

            soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            max_connections = 1 << 20 if soft == resource.RLIM_INFINITY else max(1, soft - FD_HEADROOM)
        self.max_connections = max_connections
        self.sock: socket.socket | None = None
        self.refused = 0
        self._active = 0
        self._active_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closing = threading.Event()
        self._spare: int | None = None

    def bind(self) -> None:
        """Create the socket at ``path`` (mode 0600) and listen. A stale socket left there by a
        dead server is replaced; :class:`RpcError` if a server still listens there or ``path`` is
        another kind of file (nothing is removed)."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            st = None
        if st is not None:
            if not stat.S_ISSOCK(st.st_mode):
                raise RpcError(f"{self.path} exists and is not a socket; not replacing it")
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(self.path)
            except OSError:
                os.unlink(self.path)  # a stale socket of a dead server
            else:
                probe.close()
                raise RpcError(f"another server is listening on {self.path}")
            finally:
                probe.close()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is created 0600: only this user may connect
        try:
            sock.bind(self.path)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        sock.listen(64)
        self.sock = sock

    def _reserve(self) -> None:
        """Keep one descriptor in hand, so that a connection can still be accepted (and
        refused) when the process runs out of them."""
        if self._spare is None:
            try:
                self._spare = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self._spare = None

    def _refuse_one(self) -> None:
        """Out of descriptors: free the spare one, accept a waiting connection, tell it why
        and close it, then take the spare back."""
        assert self.sock is not None
        if self._spare is not None:
            os.close(self._spare)
            self._spare = None
        self.sock.setblocking(False)
        try:
            conn, _ = self.sock.accept()
        except OSError:
            conn = None
        finally:
            self.sock.setblocking(True)
        if conn is not None:
            self._refuse(conn)
        self._reserve()

    def _refuse(self, conn: socket.socket) -> None:
        self.refused += 1
        try:
            conn.setblocking(False)
            conn.send(encode(error_response(None, "connect", OUT_OF_DESCRIPTORS)) + b"\n")
        except OSError:
            pass
        conn.close()

    def serve_forever(self) -> None:
        """Accept clients until :meth:`close`, one thread per connection (after :meth:`bind`)."""
        assert self.sock is not None
        self._reserve()
        delay = 0.0
        try:
            while not self._closing.is_set():
                try:
                    conn, _ = self.sock.accept()
                except OSError as exc:
                    if self._closing.is_set() or self.sock is None:
                        break
                    if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                        if not delay:
                            _note(f"out of file descriptors ({exc.strerror}); refusing new connections")
                        self._refuse_one()
                        delay = min(max(delay * 2, 0.05), 1.0)
                        self._closing.wait(delay)  # back off; the connections we have keep working
                        continue
                    if exc.errno in (errno.ECONNABORTED, errno.EINTR, errno.EPROTO):
                        continue
                    raise
                if delay:
                    _note("file descriptors free again; accepting connections")
                    delay = 0.0
                with self._active_lock:
                    full = self._active >= self.max_connections
                    if not full:
                        self._active += 1
                if full:
                    if not self.refused:
                        _note(
                            f"{self.max_connections} connections: out of file descriptors for more; "
                            "refusing new connections until some close"
                        )
                    self._refuse(conn)
                    continue
                t = threading.Thread(target=self._client, args=(conn,), daemon=True, name="sessiontree-rpc-client")
                try:
                    t.start()
                except RuntimeError:  # no thread left for it: refuse this one
                    with self._active_lock:
                        self._active -= 1
                    self._refuse(conn)
                    continue
                self._threads = [x for x in self._threads if x.is_alive()]
                self._threads.append(t)
        finally:
            self.close()

    def close(self) -> None:
        """Stop accepting, close the socket and remove its file; never raises."""
        self._closing.set()
        if self._spare is not None:
            try:
                os.close(self._spare)
            except OSError:
                pass
            self._spare = None
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None
            try:
                os.unlink(self.path)
            except OSError:
                pass

    def _client(self, conn: socket.socket) -> None:
        server = None
        try:
            rfile = conn.makefile("rb")
            wfile = conn.makefile("wb")
        except OSError:
            conn.close()
            with self._active_lock:
                self._active -= 1
            return
        out = _LineWriter(wfile)
        try:
            server = self.make_server(on_event=out)
            for line in read_lines(rfile, self.max_bytes):
                out(_too_long_response(self.max_bytes) if line is _TOO_LONG else server.handle_line(line))
                if out.broken:
                    break
        except (ConnectionError, OSError):
            pass  # the client went away mid-line: its partial command is dropped, nothing written
        except SessionError as exc:  # the connection's session could not be set up
            out(error_response(None, "connect", str(exc)))
        finally:
            if server is not None:
                server.close()
            for f in (rfile, wfile):
                try:
                    f.close()
                except OSError:
                    pass
            try:
                conn.close()
            except OSError:
                pass
            with self._active_lock:
                self._active -= 1


class _WriterGate:
    """One writer at a time: a write while another is running is refused, not queued."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> "_WriterGate":
        if not self._lock.acquire(blocking=False):
            raise RpcError("another client is writing to this session (one writer at a time); retry later")
        return self

    def __exit__(self, *exc: Any) -> None:
        self._lock.release()


# ==== the executable ===================================================================

#: Pi's launch flags this server honours (as Pi does), besides its own options
SESSION_FLAGS = "--session, --fork, --session-id, --session-dir, --continue, --no-session, --name"


class _UsageError(RpcError):
    """A launch flag refused (one line, exit 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2 (not argparse's usage block)
        raise _UsageError(message)


def _note(message: str) -> None:
    try:
        print(f"sessiontree: rpc: note: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass


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
        choices=("model", "offline"),
        default="model",
        help="'offline': extractive summaries, no model (default: the selected model)",
    )
    return p


def _select_model(
    models: list[dict], provider: str | None, model_id: str | None, session: Session | None, settings: dict
) -> dict | None:
    if model_id and "/" in model_id and provider is None:
        provider, model_id = model_id.split("/", 1)

    def find(p: Any, m: Any) -> dict | None:
        return next((x for x in models if x["id"] == m and (p is None or x["provider"] == p)), None)

    if model_id:
        return find(provider, model_id)
    if provider:
        return next((x for x in models if x["provider"] == provider), None)
    if session is not None:
        try:
            m = session.build_context().model
        except Exception:
            m = None
        if isinstance(m, dict):
            got = find(m.get("provider"), m.get("modelId"))
            if got is not None:
                return got
    got = find(settings.get("defaultProvider"), settings.get("defaultModel")) if settings.get("defaultModel") else None
    return got or (models[0] if models else None)


def resolve_session_arg(value: str, session_dir: Path) -> Path:
    """Pi's ``--session`` / ``--fork`` argument as a file: a path when it names a file or looks
    like one (a separator, or ``.jsonl``); otherwise a session id, or a unique prefix of one,
    looked up in ``session_dir`` first, then in every folder under the sessions root.

    Raises:
        RpcError: no session has that id, or several do.
    """
    p = Path(value).expanduser()
    if os.sep in value or value.endswith(".jsonl") or p.exists():
        return p
    from .listing import read_header

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
    """``sessiontree rpc``: exit 0 at end of input (130 on Ctrl-C); 2 for a usage error or a
    session that cannot be opened or written, one line ``sessiontree: error: ...`` on stderr,
    as the other commands."""
    from .cli import _fail

    def fail(message: str) -> int:
        return _fail(message, 2)

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
    adir = agent_dir()
    settings = load_settings(Path(args.settings) if args.settings else adir / "settings.json")
    try:
        models = load_models(Path(args.models) if args.models else adir / "models.json")
    except RpcError as exc:
        return fail(f"rpc: {exc}")
    cwd = os.getcwd()
    sdir = Path(args.session_dir).expanduser() if args.session_dir else default_session_dir(cwd)
    session: Session | None = None
    pending: PendingSession | None = None
    shown = args.session or args.fork
    try:
        if args.no_session:
            session = Session.in_memory(cwd, session_id=args.session_id)
        elif args.session:
            path = resolve_session_arg(args.session, sdir)
            shown = str(path)
            session = Session.open(path, session_dir=sdir if args.session_dir else None)
        elif args.fork:
            path = resolve_session_arg(args.fork, sdir)
            shown = str(path)
            session = Session.fork_from(path, cwd, session_dir=sdir, session_id=args.session_id)
        elif args.cont:
            from .listing import most_recent_session

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
    summarizer = None
    if args.summarizer == "offline":
        from .summarizers import get_summarizer

        summarizer = get_summarizer("offline")

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
