"""The RPC commands that read the current session, with the Pi agent-session rule they use.

Pi's ``get_*`` commands, and ``get_entry`` and ``list_sessions`` after ``hello``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Optional

from .._jsjson import JS_UNDEFINED
from .._jsjson import js_trim as _js_trim  # JavaScript String.prototype.trim, its one home
from ..context import calculate_context_tokens, estimate_context_tokens
from ..errors import EntryNotFoundError, SessionCycleError
from ..hooks import camel_case  # snake_case -> camelCase field names, its one home
from ..orchestration import user_message_text
from ..paths import default_session_dir
from .base import ServerBase
from .config import public_model
from .protocol import RpcError, StreamedText, _js_string, _json_type, encode, response


def last_assistant_text(messages: Iterable[dict[str, Any]]) -> Optional[str]:
    """Pi 1.6 ``getLastAssistantText`` over the context messages.

    The last assistant message, skipping those without a text block that ended aborted/error or
    only call tools; its text blocks joined and trimmed; None when empty. (Pi throws on
    non-array content; we treat a string content as its text.)"""
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


class ReadCommands(ServerBase):
    """The read commands (mixed into :class:`RpcServer`)."""

    def _get_entries(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
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

    def _get_tree(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
        fmt = c.get("format", "nested") if self.hello else "nested"
        if fmt == "flat":
            return self._get_tree_flat(c, cmd_id, ctype)
        if fmt != "nested":
            raise RpcError(f'get_tree: "format" must be "nested" or "flat", not {_js_string(fmt)}')
        if self._text_ok:
            # for a transport: written while it is sent (a large session's answer is larger than
            # its file; it is neither held nor cached). Pi's checks first, so that a refusal is
            # an error answer, not a cut line.
            s = self.session
            s.get_tree()
            foot = b',"leafId":' + encode(s.leaf_id) + b"}"
            return StreamedText(cmd_id, ctype, lambda write: s.write_tree_json(write, encode, b'{"tree":', foot))
        return response(cmd_id, ctype, dict(self._cached("tree", self._tree_value)))

    def _tree_table(self) -> tuple[list[int], list[int], list[int], list[int], dict[int, tuple[Any, Any]]]:
        """Pi's tree from the core's columns.

        ``(roots, start, kids, preorder, labels)`` (node positions; the children of ``i`` are
        ``kids[start[i]:start[i + 1]]``; ``labels``: :meth:`Session.tree_labels`). No node or
        entry object is made."""
        s = self.session
        s.get_tree()  # Pi's checks (duplicate ids putting a node below itself raise); its nodes are lazy
        roots, start, kids = s.tree_table()
        order: list[int] = []
        stack = list(reversed(roots))
        while stack:  # pre-order without recursion
            i = stack.pop()
            order.append(i)
            stack.extend(reversed(kids[start[i] : start[i + 1]]))
        return roots, start, kids, order, s.tree_labels()

    def _tree_value(self) -> dict[str, Any]:
        """``get_tree``'s data as Python values (for :meth:`handle`).

        ``{"tree": [{"entry", "children", "label"?, "labelTimestamp"?}...], "leafId"}``."""
        s = self.session
        roots, start, kids, order, labels = self._tree_table()
        raw_of = dict(zip(order, s.raw_values(order)))
        out_roots: list[Any] = []
        pending: list[Any] = [(r, out_roots) for r in reversed(roots)]
        while pending:  # iterative build (a path can be thousands of entries deep)
            i, into = pending.pop()
            d: dict[str, Any] = {"entry": raw_of[i], "children": []}
            lab = labels.get(i)
            if lab is not None and lab[0] is not None:
                d["label"] = lab[0]
                if lab[1] is not JS_UNDEFINED:
                    d["labelTimestamp"] = lab[1]
            into.append(d)
            for k in reversed(kids[start[i] : start[i + 1]]):
                pending.append((k, d["children"]))
        return {"tree": out_roots, "leafId": s.leaf_id}

    def _tree_text(self) -> bytes:
        """``get_tree``'s data as its JSON text, written by the core (:meth:`Session.tree_json`).

        What the transports send, streamed; the same bytes as :meth:`_tree_text_py` (its test
        oracle)."""
        s = self.session
        return s.tree_json(encode, b'{"tree":', b',"leafId":' + encode(s.leaf_id) + b"}")

    def _tree_text_py(self) -> bytes:
        """Test oracle of :meth:`_tree_text`.

        The same text written node by node from the core's columns and each entry's JSON (read
        in batches; a line already in ``JSON.stringify``'s form is copied, only the others are
        parsed and written again; never all held as Python values): the same bytes as encoding
        :meth:`_tree_value`."""
        s = self.session
        roots, start, kids, order, labels = self._tree_table()
        out: list[bytes] = [b'{"tree":[']
        texts: list[bytes] = []
        nxt = 0  # position in ``order`` of the next entry text to read
        batch = 4096
        stack: list[int] = [~r for r in reversed(roots)]  # ~i opens node i, i closes it
        first = True
        while stack:
            i = stack.pop()
            if i >= 0:
                tail = b"]"
                lab = labels.get(i)
                if lab is not None and lab[0] is not None:
                    tail += b',"label":' + encode(lab[0])
                    if lab[1] is not JS_UNDEFINED:
                        tail += b',"labelTimestamp":' + encode(lab[1])
                out.append(tail + b"}")
                first = False
                continue
            i = ~i
            if not texts:
                chunk = order[nxt : nxt + batch]
                got = s.entry_texts(chunk)  # lines copied as they are when already Pi's text
                redo = [k for k, b in enumerate(got) if b is None]
                for k, v in zip(redo, s.raw_values([chunk[k] for k in redo])):
                    got[k] = encode(v)
                texts = [b for b in got if b is not None]
                texts.reverse()
                nxt += batch
            out.append((b'{"entry":' if first else b',{"entry":') + texts.pop() + b',"children":[')
            first = True
            stack.append(i)
            stack.extend(~k for k in reversed(kids[start[i] : start[i + 1]]))
        out.append(b'],"leafId":' + encode(s.leaf_id) + b"}")
        return b"".join(out)

    def _get_tree_flat(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
        """``get_tree`` with ``format: "flat"`` (after ``hello``).

        The nodes of Pi's tree in its pre-order (the order the nested form lists them),
        ``offset``/``limit`` paged. Each node: ``{id, parentId (the tree parent's id, null for a
        root), childCount, label?, labelTimestamp?, entry}``. Pi's nested form puts every entry
        two JSON levels below its parent, deeper than Python's ``json`` and ``orjson`` parse
        (about 1,000 levels) once a path holds about 500 entries; this form is two levels deep
        at any size."""
        s = self.session
        offset = c.get("offset", 0)
        limit = c.get("limit", 1000)
        for name, v in (("offset", offset), ("limit", limit)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise RpcError(f'get_tree: "{name}" must be a non-negative integer, not {_js_string(v)}')

        def walk() -> tuple[list[int], dict[int, int], list[int]]:
            """Pre-order, tree parents and the children table.

            One walk per state of the file and leaf (cached), not one per page."""
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
            return order, parent, start

        order, parent, start = self._cached("tree_flat", walk)

        page = order[offset : offset + limit]
        stamps: dict[str | None, Any] | None = None  # read only when a node of the page has a label
        nodes = []
        for i in page:
            e = s.entry_at(i)
            p = parent.get(i)
            d: dict[str, Any] = {"id": e.id, "parentId": None if p is None else s.entry_at(p).id}
            d["childCount"] = start[i + 1] - start[i]
            label = s.get_label(e.id) if isinstance(e.id, str) else None
            if label is not None:
                d["label"] = label
                if stamps is None:
                    stamps = self._label_timestamps()
                ts = stamps.get(e.id, JS_UNDEFINED)
                if ts is not JS_UNDEFINED:
                    d["labelTimestamp"] = ts
            d["entry"] = e.raw
            nodes.append(d)
        end = offset + len(page)
        data: dict[str, Any] = {"nodes": nodes, "leafId": s.leaf_id, "total": len(order), "hasMore": end < len(order)}
        if end < len(order):
            data["nextOffset"] = end
        return response(cmd_id, ctype, data)

    def _label_timestamps(self) -> dict[str | None, Any]:
        """Node id -> timestamp of the label entry that set its current label (cached).

        From :meth:`Session.tree_labels`, the label entries only."""

        def build() -> dict[str | None, Any]:
            s = self.session
            labels = s.tree_labels()
            pos = list(labels)
            ids = s.entry_table(pos).id if pos else []
            return {eid: labels[p][1] for eid, p in zip(ids, pos) if labels[p][1] is not JS_UNDEFINED}

        stamps: dict[str | None, Any] = self._cached("label_timestamps", build)
        return stamps

    def _get_messages(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
        return self._reply(cmd_id, ctype, "messages", lambda: {"messages": self._context().messages})

    def _counts(self) -> dict[str, Any]:
        """Pi's message counts of ``get_session_stats`` (cached).

        Roles from the index, only the assistant messages (tool calls) and messages without a
        role in the index are parsed."""
        return dict(self._cached("counts", self._count_messages))

    def _count_messages(self) -> dict[str, Any]:
        s = self.session
        table = s.entry_table()
        user = assistant = tool_calls = tool_results = total = 0
        parse: list[int] = []
        for i, etype, role in zip(table.index, table.type, table.role):
            if etype != "message":
                continue
            if role == "user":
                user += 1
            elif role == "toolResult":
                tool_results += 1
            elif role is None or role == "assistant":
                parse.append(i)  # no role in the index: the message may not be an object
                continue
            total += 1
        for raw in s.raw_values(parse):
            m = raw.get("message") if isinstance(raw, dict) else None
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

    def _context_usage(self, messages: list[Any]) -> Optional[dict[str, Any]]:
        """Pi ``getContextUsage``: None without a model window.

        Tokens/percent null right after a compaction until an assistant reply after it reports
        usage."""
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

    def _get_session_stats(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
        s = self.session
        data: dict[str, Any] = {}
        f = self._session_file()
        if f is not None:
            data["sessionFile"] = f
        data["sessionId"] = s.session_id
        data.update(self._counts())
        totals = self._cached("usage_totals", lambda: s.usage_totals().to_pi())
        data["tokens"] = totals["tokens"]
        data["cost"] = totals["cost"]
        if self.model is not None:
            window = self.model.get("contextWindow")
            usage = self._cached(f"context_usage:{window!r}", lambda: self._context_usage(self._context().messages))
            if usage is not None:
                data["contextUsage"] = usage
        return response(cmd_id, ctype, data)

    def _get_state(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
        s = self.session
        ctx = self._context()
        model = public_model(self.model)
        thinking = ctx.thinking_level if model.get("reasoning") else "off"
        data: dict[str, Any] = {
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

    def _get_fork_messages(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
        return self._reply(cmd_id, ctype, "fork_messages", self._fork_messages)

    def _fork_messages(self) -> dict[str, Any]:
        s = self.session
        table = s.entry_table()
        users = [
            i for i, etype, role in zip(table.index, table.type, table.role) if etype == "message" and role == "user"
        ]
        out = []
        ids = s.entry_table(users).id if users else []
        for eid, raw in zip(ids, s.raw_values(users)):
            text = user_message_text(raw["message"].get("content"))
            if text:
                out.append({"entryId": eid, "text": text})
        return {"messages": out}

    def _get_last_assistant_text(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
        text = self._cached("last_assistant_text", lambda: last_assistant_text(self._context().messages))
        return response(cmd_id, ctype, {} if text is None else {"text": text})

    def _get_entry(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
        entry_id = c.get("entryId")
        if not isinstance(entry_id, str):
            raise RpcError(f'get_entry: "entryId" must be a string, not {_json_type(entry_id)}')
        e = self.session.get_entry(entry_id)
        if e is None:
            raise EntryNotFoundError.of(entry_id)
        return response(cmd_id, ctype, {"entry": e.raw, "label": self.session.get_label(entry_id)})

    def _list_sessions(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
        from ..listing import list_sessions

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
                d[camel_case(k)] = str(v) if isinstance(v, Path) else (v.isoformat() if hasattr(v, "isoformat") else v)
            out.append(d)
        return response(cmd_id, ctype, {"sessions": out})

    def _search(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
        """RPC ``search`` (after ``hello``; Pi has none): :func:`sessiontree.search` over the session.

        ``{"type":"search","query":Q, "limit"?, "offset"?, "role"?, "entryType"?, "tool"?,
        "branchState"?, "label"?, "since"?, "until"?, "sessionDir"?}``: over the current session's
        file, or over every session of ``sessionDir``. Answers ``{hits, total, nextOffset, tookMs}``, each hit's keys in
        camelCase; a hit's ``path`` whose name is not UTF-8 has ``\\xNN`` for each such byte, as
        ``sessiontree search --json`` and the fleet's rows write it (never a lone surrogate, which
        strict JSON readers refuse); a bad query is ``success:false`` with its one-line message."""
        from ..searching import search, search_files

        q = c.get("query")
        if not isinstance(q, str):
            raise RpcError(f'search: "query" must be a string, not {_json_type(q)}')
        kw: dict[str, Any] = {}
        for key, name in (("limit", "limit"), ("offset", "offset")):
            v = c.get(key)
            if v is not None:
                if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                    raise RpcError(f'search: "{key}" must be a non-negative integer, not {_js_string(v)}')
                kw[name] = v
        for key, name in (
            ("role", "role"),
            ("entryType", "type"),
            ("tool", "tool"),
            ("branchState", "branch_state"),
            ("label", "label"),
            ("since", "since"),
            ("until", "until"),
        ):
            v = c.get(key)
            if v is not None:
                if not isinstance(v, str):
                    raise RpcError(f'search: "{key}" must be a string, not {_json_type(v)}')
                kw[name] = v
        sdir = c.get("sessionDir")
        if sdir is not None and not isinstance(sdir, str):
            raise RpcError('search: "sessionDir" must be a string')
        from ..fleet._sources import is_url

        if sdir is not None and is_url(sdir):  # a client never makes the server fetch objects
            raise RpcError('search: "sessionDir" must be a local folder, not a URL')
        if sdir is not None:
            r = search(q, sdir, **kw)
        else:
            s = self.session
            if s.path is None:
                raise RpcError("search: the session has no file yet (nothing to search)")
            s.flush()
            path = str(Path(s.path).resolve())
            r = search_files(q, [path], path, **kw)
        from ..fleet import path_text

        doc = r.to_dict()
        hits = [{camel_case(k): path_text(v) if k == "path" else v for k, v in h.items()} for h in doc["hits"]]
        return response(
            cmd_id, ctype, {"hits": hits, "total": r.total, "nextOffset": r.next_offset, "tookMs": doc["took_ms"]}
        )
