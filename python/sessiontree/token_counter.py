"""Pluggable token counters: Pi's estimate (the default) or exact counts with tiktoken.

A token counter is any callable ``counter(message: dict) -> int`` returning the tokens of an
``AgentMessage``. :func:`pi_estimate` is Pi's chars/4 estimate (what every golden uses, and
what Pi's compaction decisions are made with). :class:`TiktokenCounter` counts the same text
with a real BPE encoding, for callers who want exact figures for an OpenAI-family model; pass it
as ``CompactionSettings(token_counter=...)``. Cut points then differ from Pi's by design.

tiktoken downloads an encoding file the first time it is used. Offline, give it the file:

* ``TiktokenCounter("o200k_base", encoding_file="/path/o200k_base.tiktoken")``, or
* put the file in ``$TIKTOKEN_CACHE_DIR`` under the name tiktoken expects (the SHA-1 of the
  download URL; :func:`cache_file_name` tells it), or
* ``TiktokenCounter.from_bpe_file(path, pat_str=...)`` for an encoding of your own.

Without any of these and without network, :class:`TokenCounterError` says exactly that.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

from ._jsjson import js_stringify
from .errors import SessionError
from .tokens import estimate_tokens

TokenCounter = Callable[[dict[str, Any]], int]

#: Pi counts an image as 4800 characters, i.e. 1200 estimated tokens; tiktoken cannot see
#: images, so :class:`TiktokenCounter` uses the same 1200.
IMAGE_TOKENS = 1200

_BLOB = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
_KNOWN = {"o200k_base", "cl100k_base", "p50k_base", "p50k_edit", "r50k_base", "gpt2", "o200k_harmony"}
_ENV_LOCK = threading.Lock()


class TokenCounterError(SessionError):
    """A token counter could not be set up (missing package, missing encoding file)."""


def pi_estimate(message: dict[str, Any]) -> int | float:
    """Pi's estimate: ``ceil(UTF-16 code units / 4)`` per role (see :func:`sessiontree.estimate_tokens`)."""
    return estimate_tokens(message)


def message_texts(message: Any) -> tuple[list[str], int]:
    """The texts a message's tokens are counted over, with Pi's choice of fields, and its
    number of images: user/custom/toolResult content text, assistant text, thinking and
    ``name + JSON.stringify(arguments)`` of tool calls, bash command and output, summaries,
    system content, sections and ``JSON.stringify(toolsAdded)``. Lenient: odd shapes add nothing."""
    texts: list[str] = []
    images = 0
    if not isinstance(message, dict):
        return texts, images
    role = message.get("role")

    def content(c: Any) -> None:
        nonlocal images
        if isinstance(c, str):
            texts.append(c)
        elif isinstance(c, list):
            for b in c:
                if isinstance(b, dict):
                    if b.get("type") == "text" and isinstance(b.get("text"), str):
                        texts.append(b["text"])
                    elif b.get("type") == "image":
                        images += 1

    if role in ("user", "custom", "toolResult"):
        content(message.get("content"))
    elif role == "assistant":
        for b in message.get("content") or []:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "text" and isinstance(b.get("text"), str):
                texts.append(b["text"])
            elif b.get("type") == "thinking" and isinstance(b.get("thinking"), str):
                texts.append(b["thinking"])
            elif b.get("type") == "toolCall":
                texts.append(str(b.get("name", "")) + js_stringify(b.get("arguments", {})))
    elif role == "bashExecution":
        texts += [str(message.get("command", "")), str(message.get("output", ""))]
    elif role in ("branchSummary", "compactionSummary"):
        texts.append(str(message.get("summary", "")))
    elif role == "system":
        content(message.get("content"))
        sections = message.get("sections")
        if isinstance(sections, dict):
            texts += [v for v in sections.values() if isinstance(v, str)]
        if message.get("toolsAdded"):
            texts.append(js_stringify(message["toolsAdded"]))
    return texts, images


def cache_file_name(encoding_name: str) -> str:
    """The file name tiktoken looks for in ``$TIKTOKEN_CACHE_DIR`` for a known encoding."""
    return hashlib.sha1(_BLOB.format(encoding_name).encode()).hexdigest()


def _cache_dir() -> Path:
    env = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    return Path(env) if env else Path(tempfile.gettempdir()) / "data-gym-cache"


def _import_tiktoken() -> Any:
    try:
        import tiktoken
        import tiktoken.load  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise TokenCounterError(
            "exact token counts need tiktoken: pip install 'sessiontree[tiktoken]' "
            "(from a source checkout: pip install '.[tiktoken]')"
        ) from exc
    return tiktoken


def _reachable(url: str, timeout: float) -> bool:
    host = urlparse(url).hostname or ""
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def _parse_bpe(data: bytes, path: Path) -> dict[bytes, int]:
    """A ``.tiktoken`` file: one ``<base64 token> <rank>`` per line (tiktoken's format)."""
    try:
        return {base64.b64decode(tok): int(rank) for tok, rank in (line.split() for line in data.splitlines() if line)}
    except (ValueError, binascii.Error) as exc:
        raise TokenCounterError(f"{path} is not a tiktoken BPE file: {exc}") from exc


class TiktokenCounter:
    """Exact token counts with a tiktoken encoding.

    Args:
        encoding_name: a tiktoken encoding (``o200k_base``, ``cl100k_base``, ...).
        encoding_file: the encoding's ``.tiktoken`` file, used instead of a download (its hash
            is checked by tiktoken for known encodings).
        connect_timeout: seconds allowed to reach the download host when the encoding is
            neither given nor cached.

    Raises:
        TokenCounterError: tiktoken is missing, or the encoding is neither given, cached nor
            downloadable (the message says where to put the file).
    """

    def __init__(
        self,
        encoding_name: str = "o200k_base",
        *,
        encoding_file: str | os.PathLike[str] | None = None,
        connect_timeout: float = 5.0,
    ):
        tiktoken = _import_tiktoken()
        self.name = f"tiktoken:{encoding_name}"
        if encoding_file is not None:
            self._enc = self._load_from_file(tiktoken, encoding_name, Path(encoding_file))
            return
        if encoding_name in _KNOWN and not (_cache_dir() / cache_file_name(encoding_name)).exists():
            url = _BLOB.format(encoding_name)
            if not _reachable(url, connect_timeout):
                raise TokenCounterError(
                    f"the tiktoken encoding {encoding_name!r} is not cached and {urlparse(url).hostname} cannot be "
                    f"reached. Download {url} elsewhere and either pass "
                    f"TiktokenCounter({encoding_name!r}, encoding_file=PATH) or copy it to "
                    f"{_cache_dir() / cache_file_name(encoding_name)} (set TIKTOKEN_CACHE_DIR to choose the folder)."
                )
        try:
            self._enc = tiktoken.get_encoding(encoding_name)
        except Exception as exc:
            raise TokenCounterError(f"could not load the tiktoken encoding {encoding_name!r}: {exc}") from exc

    @staticmethod
    def _load_from_file(tiktoken: Any, encoding_name: str, path: Path) -> Any:
        if not path.is_file():
            raise TokenCounterError(f"no encoding file at {path}")
        if encoding_name not in _KNOWN:
            raise TokenCounterError(
                f"{encoding_name!r} is not a known tiktoken encoding; use TiktokenCounter.from_bpe_file(path, pat_str=...)"
            )
        from tiktoken_ext import openai_public

        data = path.read_bytes()

        def load_local(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
            # tiktoken's loader, fed our file: same hash check, never a download
            if expected_hash and hashlib.sha256(data).hexdigest() != expected_hash:
                raise TokenCounterError(f"{path} is not the {encoding_name} encoding file (hash mismatch)")
            return _parse_bpe(data, path)

        with _ENV_LOCK:
            original = openai_public.load_tiktoken_bpe
            openai_public.load_tiktoken_bpe = load_local
            try:
                params = openai_public.ENCODING_CONSTRUCTORS[encoding_name]()
            finally:
                openai_public.load_tiktoken_bpe = original
        return tiktoken.Encoding(**params)

    @classmethod
    def from_bpe_file(
        cls,
        path: str | os.PathLike[str],
        *,
        pat_str: str,
        name: str = "custom",
        special_tokens: dict[str, int] | None = None,
    ) -> "TiktokenCounter":
        """A counter for an encoding of your own: a ``.tiktoken`` file (base64 token and rank per
        line) and its split pattern. Nothing is downloaded.

        Raises:
            TokenCounterError: the file is missing or not a BPE ranks file.
        """
        tiktoken = _import_tiktoken()
        p = Path(path)
        if not p.is_file():
            raise TokenCounterError(f"no encoding file at {p}")
        ranks = _parse_bpe(p.read_bytes(), p)
        self = cls.__new__(cls)
        self.name = f"tiktoken:{name}"
        self._enc = tiktoken.Encoding(
            name=name, pat_str=pat_str, mergeable_ranks=ranks, special_tokens=special_tokens or {}
        )
        return self

    def count_text(self, text: str) -> int:
        """Tokens of a string (special-token text is counted as ordinary text)."""
        return len(self._enc.encode(text, disallowed_special=()))

    def __call__(self, message: dict[str, Any]) -> int:
        """Tokens of an ``AgentMessage`` (the fields Pi's estimate counts; images 1200 each)."""
        texts, images = message_texts(message)
        return (
            sum(len(t) for t in self._enc.encode_batch(texts, disallowed_special=())) + images * IMAGE_TOKENS
            if texts
            else images * IMAGE_TOKENS
        )


__all__ = [
    "TokenCounter",
    "TokenCounterError",
    "TiktokenCounter",
    "pi_estimate",
    "message_texts",
    "cache_file_name",
    "IMAGE_TOKENS",
]
