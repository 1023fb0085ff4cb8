"""The CLI is a client of the public API: only the modules that own the Rust core touch it, and
nothing outside ``Session``'s own modules reaches into a ``Session``'s private members."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

import sessiontree

PKG = Path(sessiontree.__file__).parent
#: The package internals that own the core: the Session facade and its entry views, and the
#: two JS rules Python takes from Rust (Date parsing, the ISO clock), and the HTML export, which
#: streams the index in batches (``Index.html_digest``) instead of building entries; and the
#: package's ``__init__.py``, whose ``__version__`` is the core's (Cargo.toml's, issue 22).
#: ``scrub.py`` streams a file through the core's scrubber (``_core.Scrubber``) in blocks.
CORE_OWNERS = {"__init__.py", "session.py", "entries.py", "_jsjson.py", "paths.py", "html/__init__.py", "scrub.py"}


def _names(path: Path) -> list[tuple[int, str, str]]:
    """(line, token, previous two tokens joined) for every NAME token (comments and strings excluded)."""
    out = []
    prev: list[str] = ["", ""]
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type in (tokenize.NAME, tokenize.OP):
            if tok.type == tokenize.NAME:
                out.append((tok.start[0], tok.string, "".join(prev)))
            prev = [prev[1], tok.string]
    return out


def test_no_core_use_outside_the_modules_that_own_it():
    found = []
    for f in sorted(PKG.rglob("*.py")):
        rel = f.relative_to(PKG).as_posix()
        if rel in CORE_OWNERS:
            continue
        found += [f"{rel}:{line}" for line, name, _ in _names(f) if name == "_core"]
    assert found == []


#: Clients of the public API: the CLIs, the RPC server and the fleet package (which must scale
#: through the public batch views, never through the facade's internals).
CLIENTS = [
    "cli.py",
    *sorted(f.relative_to(PKG).as_posix() for f in (PKG / "rpc").rglob("*.py")),
    "_fleet_cli.py",
    "_scrub_cli.py",
    *sorted(f.relative_to(PKG).as_posix() for f in (PKG / "fleet").rglob("*.py")),
]


def test_the_fleet_is_among_the_clients_checked():
    assert {"fleet/__init__.py", "fleet/_rows.py", "fleet/_compact.py", "_fleet_cli.py"} <= set(CLIENTS)


def test_clients_use_no_private_session_members():
    private = [
        f"{client}:{line}: {before}{name}"
        for client in CLIENTS
        for line, name, before in _names(PKG / client)
        if name.startswith("_") and not name.startswith("__") and before in ("s.", "session.")
    ]
    assert private == []
