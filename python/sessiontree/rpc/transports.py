"""Two fronts on :class:`~sessiontree.rpc.RpcServer`.

JSON lines on stdin/stdout (:func:`serve_stdio`, one client) and a unix socket
(:class:`UnixServer`, ``--listen``: many clients, one thread each)."""

from __future__ import annotations

import errno
import os
import socket
import stat
import sys
import threading
from typing import Any, Callable, Iterable

from ..errors import SessionError
from .protocol import MAX_LINE_BYTES, RpcError, StreamedText, Text, encode, error_response
from .server import RpcServer

#: the one line a connection gets when the server is out of file descriptors
OUT_OF_DESCRIPTORS = "server out of file descriptors: connection refused, retry later"
#: descriptors ``--listen`` keeps free for session files and writer locks
FD_HEADROOM = 24

_TOO_LONG = object()


def read_lines(stream: Any, max_bytes: int = MAX_LINE_BYTES) -> Iterable[Any]:
    """Command lines of a binary stream.

    LF framing only (a trailing ``\\r`` is stripped; U+2028 and U+2029 are ordinary characters),
    blank lines skipped. A line longer than ``max_bytes`` is skipped to its end and yields
    ``_TOO_LONG`` (memory stays bounded)."""
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


def _too_long_response(max_bytes: int) -> dict[str, Any]:
    return error_response(None, "parse", f"Failed to parse command: line longer than {max_bytes} bytes")


class _LineWriter:
    """Writes JSON lines to a binary stream; one line at a time across threads."""

    def __init__(self, stream: Any):
        self.stream = stream
        self.lock = threading.Lock()
        self.broken = False

    def __call__(self, obj: dict[str, Any]) -> None:
        """Writes ``obj`` as one line.

        A :class:`Text` as its parts, a :class:`StreamedText`'s data as it is produced. If that
        fails half-way, the line is cut and the writer broken: the connection closes, the client
        sees the end of the stream, never a line mixing two answers."""
        with self.lock:
            if self.broken:
                return
            try:
                if isinstance(obj, Text):
                    obj.write_to(self.stream.write)
                    self.stream.write(b"\n")
                else:
                    self.stream.write(encode(obj) + b"\n")
                self.stream.flush()
            except (BrokenPipeError, ConnectionError, OSError, ValueError):
                self.broken = True
            except Exception:
                if not isinstance(obj, StreamedText):
                    raise
                # its data failed after its head was written: the line is cut
                self.broken = True


def serve_stdio(server: RpcServer, stdin: Any = None, stdout: Any = None, max_bytes: int = MAX_LINE_BYTES) -> int:
    """Serve ``server`` on a pair of binary streams (default stdin/stdout) until end of input."""
    stdin = stdin if stdin is not None else sys.stdin.buffer
    stdout = stdout if stdout is not None else sys.stdout.buffer
    out = _LineWriter(stdout)
    server.on_event = out
    try:
        for line in read_lines(stdin, max_bytes):
            out(_too_long_response(max_bytes) if line is _TOO_LONG else server.handle_line(line, text_ok=True))
            if out.broken:
                break
    finally:
        server.close()
    return 0


class UnixServer:
    """Many clients on a unix socket (mode 0600).

    Each connection gets its own :class:`RpcServer` (its own current session) from
    ``make_server(on_event=...)``; connections on one file share its session, its index and one
    writer gate (the servers' :class:`SessionRegistry`). Reads never wait for a writer; a write
    while another client's write to the same file runs is refused (one writer at a time).

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
        """Keep one descriptor in hand.

        So that a connection can still be accepted (and refused) when the process runs out of
        them."""
        if self._spare is None:
            try:
                self._spare = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self._spare = None

    def _refuse_one(self) -> None:
        """Out of descriptors: refuse a waiting connection with the spare descriptor.

        Free the spare one, accept the connection, tell it why and close it, then take the spare
        back."""
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
                sock = self.sock
                if sock is None:  # closed by another thread
                    break
                try:
                    conn, _ = sock.accept()
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
        """Stop accepting, close the socket and remove its file; never raises. A
        :meth:`serve_forever` blocked in ``accept()`` in another thread returns (the socket is
        shut down first: closing it alone does not wake ``accept()`` on Linux). Safe to call
        from two threads at once: one of them closes."""
        self._closing.set()
        with self._active_lock:  # the spare descriptor and the socket are closed once
            spare, self._spare = self._spare, None
            sock, self.sock = self.sock, None
        if spare is not None:
            try:
                os.close(spare)
            except OSError:
                pass
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                sock.close()
            except OSError:
                pass
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
                out(_too_long_response(self.max_bytes) if line is _TOO_LONG else server.handle_line(line, text_ok=True))
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


def _note(message: str) -> None:
    try:
        print(f"sessiontree: rpc: note: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass
