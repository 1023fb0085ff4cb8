"""A minimal Pi RPC client for the tests, launching its executable the way Pi RPC clients do:
``EXE --version`` first, then ``EXE --mode rpc --session FILE ...``, JSON lines over pipes.

The replays use this byte-exact stand-in (raw lines, any command, any id); the real Pi client,
``pi-agent-python-sdk`` from PyPI, drives ``sessiontree rpc`` unmodified in
``tests/rpc/test_rpc_sdk.py``. This one splits stdout on LF only (never on U+2028/U+2029, which
JSON.stringify leaves raw), matches responses to requests by ``id`` and keeps every other line as
an event.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

EXE = [sys.executable, "-m", "sessiontree", "rpc"]

sys.setrecursionlimit(max(sys.getrecursionlimit(), 50000))


def loads(line: bytes) -> Any:
    return json.loads(line.decode("utf-8"))


class PiRpcClient:
    """Spawn ``EXE`` like a Pi client; ``request(cmd)`` sends one command and returns its response."""

    def __init__(
        self,
        args: list[str],
        *,
        exe: list[str] | None = None,
        env: dict | None = None,
        cwd: str | os.PathLike | None = None,
        check_version: bool = True,
    ):
        self.exe = exe or EXE
        full_env = dict(os.environ)
        full_env.update(env or {})
        if check_version:
            out = subprocess.run([*self.exe, "--version"], capture_output=True, env=full_env, timeout=60, cwd=cwd)
            self.version = out.stdout.decode().strip()
        self.proc = subprocess.Popen(
            [*self.exe, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            cwd=cwd,
        )
        self.lines: "queue.Queue[bytes | None]" = queue.Queue()
        self.events: list = []
        self._n = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        buf = b""
        while True:
            chunk = self.proc.stdout.read1(1 << 16)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:  # LF framing only
                line, buf = buf.split(b"\n", 1)
                self.lines.put(line)
        if buf:
            self.lines.put(buf)
        self.lines.put(None)

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def next_line(self, timeout: float = 60) -> Any:
        line = self.lines.get(timeout=timeout)
        if line is None:
            raise EOFError("the server closed its output")
        return loads(line)

    def request(self, command: dict, timeout: float = 120) -> dict:
        """Send ``command`` (an ``id`` is added when missing) and return the matching response."""
        if "id" not in command:
            self._n += 1
            command = {"id": f"t{self._n}", **command}
        self.send_raw(json.dumps(command, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n")
        while True:
            obj = self.next_line(timeout)
            if isinstance(obj, dict) and obj.get("type") == "response" and obj.get("id") == command["id"]:
                return obj
            self.events.append(obj)

    def close(self, timeout: float = 60) -> tuple[int, str]:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except BrokenPipeError:
            pass
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        while True:
            try:
                item = self.lines.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                self.events.append(loads(item))
        err = self.proc.stderr.read().decode("utf-8", "replace") if self.proc.stderr else ""
        return code, err

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


def isolated_env(tmp: Path) -> dict:
    """An environment whose Pi agent directory is an empty temp folder (no models, no settings)."""
    agent = tmp / "agent"
    agent.mkdir(exist_ok=True)
    return {"PI_CODING_AGENT_DIR": str(agent), "PYTHONUNBUFFERED": "1"}
