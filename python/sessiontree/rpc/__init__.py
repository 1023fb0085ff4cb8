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
(paged nodes with ``parentId``, ``childCount`` and labels, for JSON parsers with a depth limit),
``search`` (:func:`sessiontree.search` over the current session or a ``sessionDir``: hits with
their branch state, snippet and labels).

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

The package, by what it does: ``protocol.py`` (the envelopes and JSON lines), ``config.py`` (Pi's
``models.json``/``settings.json``), ``sessions.py`` (sessions shared between connections, the
writer gate), ``server.py`` (:class:`RpcServer` and its one command registry, :data:`COMMANDS`,
that builds the Pi table, the extra commands and ``capabilities``), ``reads.py`` and ``writes.py``
(the commands), ``transports.py`` (stdio and ``--listen``), ``cli.py`` (``sessiontree rpc``).
"""

from __future__ import annotations

from .cli import (
    build_parser,
    main,
    resolve_session_arg,
    SESSION_FLAGS,
)
from .config import (
    compaction_settings,
    load_models,
    load_settings,
    public_model,
    summarizer_for,
    UNKNOWN_MODEL,
)
from .protocol import (
    encode,
    error_response,
    MAX_LINE_BYTES,
    NOT_AN_AGENT,
    PI_VERSION,
    PROTOCOL,
    response,
    RpcError,
)
from .reads import (
    last_assistant_text,
)
from .server import (
    AGENT_COMMANDS,
    CAPABILITIES,
    Command,
    COMMANDS,
    RpcServer,
)
from .sessions import (
    PendingSession,
    SessionRegistry,
    SharedSession,
)
from .transports import (
    FD_HEADROOM,
    OUT_OF_DESCRIPTORS,
    read_lines,
    serve_stdio,
    UnixServer,
)

# the same objects under the names they had in the one-file module (tests patch the tables;
# ``_camel`` and ``user_message_text`` have their one home elsewhere and are only re-exported)
from ..hooks import camel_case as _camel  # noqa: F401 (re-exported under its old name)
from ..orchestration import user_message_text as user_message_text
from .server import _EXTRA_COMMANDS as _EXTRA_COMMANDS
from .server import _LEAVING_COMMANDS as _LEAVING_COMMANDS
from .server import _PI_COMMANDS as _PI_COMMANDS
from .sessions import _WriterGate as _WriterGate

__all__ = [
    "AGENT_COMMANDS",
    "CAPABILITIES",
    "COMMANDS",
    "Command",
    "FD_HEADROOM",
    "MAX_LINE_BYTES",
    "NOT_AN_AGENT",
    "OUT_OF_DESCRIPTORS",
    "PI_VERSION",
    "PROTOCOL",
    "PendingSession",
    "RpcError",
    "RpcServer",
    "SESSION_FLAGS",
    "SessionRegistry",
    "SharedSession",
    "UNKNOWN_MODEL",
    "UnixServer",
    "build_parser",
    "compaction_settings",
    "encode",
    "error_response",
    "last_assistant_text",
    "load_models",
    "load_settings",
    "main",
    "public_model",
    "read_lines",
    "resolve_session_arg",
    "response",
    "serve_stdio",
    "summarizer_for",
]
