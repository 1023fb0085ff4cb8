"""The RPC commands that write a session or move the connection to another one.

``compact``, ``set_session_name``, ``fork``, ``clone``, ``new_session``, ``switch_session``,
``export_html``; after ``hello``: ``set_label``, ``navigate_tree``, ``follow``."""

from __future__ import annotations

import os
import threading
from typing import Any

from .._jsjson import js_trim as _js_trim  # JavaScript String.prototype.trim, its one home
from ..errors import EntryNotFoundError, SessionError, SessionFileChangedError
from ..orchestration import user_message_text
from ..session import Session
from .base import ServerBase
from .config import compaction_settings, summarizer_for
from .protocol import RpcError, _error_text, _is_summarizer_error, _json_type, error_response, response


class WriteCommands(ServerBase):
    """The write commands (mixed into :class:`RpcServer`)."""

    def _set_session_name(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
        name = c.get("name")
        if not isinstance(name, str):
            raise RpcError(f'set_session_name: "name" must be a string, not {_json_type(name)}')

        if not _js_trim(name):
            raise RpcError("Session name cannot be empty")
        self._write(lambda s: s.append_session_info(name))
        self._emit({"type": "session_info_changed", "name": self.session.session_name})
        return response(cmd_id, ctype, has_data=False)

    def _compact(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
        instructions = c.get("customInstructions")
        if instructions is not None and not isinstance(instructions, str):
            raise RpcError(f'compact: "customInstructions" must be a string, not {_json_type(instructions)}')
        self._emit({"type": "compaction_start", "reason": "manual"})
        end: dict[str, Any] = {"type": "compaction_end", "reason": "manual"}
        try:
            summarizer = self.summarizer
            if summarizer is None:
                if self.model is None:
                    raise RpcError(
                        "No model configured for compaction: give --provider/--model of a models file "
                        "(~/.pi/agent/models.json or --models FILE), or --summarizer offline"
                    )
                summarizer = summarizer_for(self.model)
            kwargs: dict[str, Any] = {}
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

    def _fork(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
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

    def _clone(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
        s = self.session
        leaf = s.leaf_id
        if leaf is None:
            raise RpcError("Nothing to clone: the session has no entries")
        self._switch_session_to(s.create_branched_session(leaf))
        return response(cmd_id, ctype, {"cancelled": False})

    def _new_session(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
        parent = c.get("parentSession")
        if parent is not None and not isinstance(parent, str):
            raise RpcError(f'new_session: "parentSession" must be a string, not {_json_type(parent)}')
        if self.persist:
            self._start_pending(self._new_pending_spec(parent))
        else:
            self._switch_session_to(Session.in_memory(self.session.cwd))
        return response(cmd_id, ctype, {"cancelled": False})

    def _switch_session(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
        path = c.get("sessionPath")
        if not isinstance(path, str) or not path:
            raise RpcError('switch_session: "sessionPath" must be a non-empty string')
        try:
            shared = self.registry.open(path)
        except FileNotFoundError:
            raise RpcError(f"Session file not found: {path}") from None
        self._switch_to(shared)
        return response(cmd_id, ctype, {"cancelled": False})

    def _export_html(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
        s = self.session
        out = c.get("outputPath")
        if out is not None and not isinstance(out, str):
            raise RpcError(f'export_html: "outputPath" must be a string, not {_json_type(out)}')
        if out is None:
            stem = s.path.stem if s.path is not None else s.session_id
            out = os.path.join(os.getcwd(), f"pi-session-{stem}.html")
        return response(cmd_id, ctype, {"path": str(s.export_html(out))})

    # ---- beyond Pi (after hello) ----

    def _set_label(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
        target = c.get("entryId")
        label = c.get("label")
        if not isinstance(target, str):
            raise RpcError(f'set_label: "entryId" must be a string, not {_json_type(target)}')
        if label is not None and not isinstance(label, str):
            raise RpcError(f'set_label: "label" must be a string or null, not {_json_type(label)}')
        new_id = self._write(lambda s: s.append_label_change(target, label or None))
        return response(cmd_id, ctype, {"labelEntryId": new_id})

    def _navigate_tree(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
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
        kwargs: dict[str, Any] = {}
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
        data: dict[str, Any] = {"leafId": result.new_leaf_id, "cancelled": bool(result.cancelled)}
        if result.editor_text is not None:
            data["editorText"] = result.editor_text
        if result.summary_entry is not None:
            data["summaryEntry"] = result.summary_entry.raw
        return response(cmd_id, ctype, data)

    def _follow(self, c: dict[str, Any], cmd_id: Any, ctype: str) -> dict[str, Any]:
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


def _follow_end(s: Session, exc: BaseException, key: Any) -> dict[str, Any]:
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
