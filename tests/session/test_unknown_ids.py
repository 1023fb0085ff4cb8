"""An id no entry has is handled one way on every surface (docs/divergences.md row 32).

- The lookups answer None, as Pi's ``SessionManager.getEntry`` answers ``undefined``:
  ``get_entry``, ``get_label`` (Pi ``getLabel``), ``entry_index``, and ``abandoned_branch``
  (None: the pure rule decides).
- Everything that needs the entry raises :class:`EntryNotFoundError` worded
  ``Entry not found: <id>`` (Pi's RPC text; Pi's ``SessionManager.branch`` says ``Entry <id> not
  found``), a non-string id included; the CLI prints that line and exits 2 (with ``--json``, the
  error document); RPC answers ``success: false`` with that error, ``get_entry`` included (a
  response cannot say ``undefined``).
- Two texts stay Pi's or a request's: RPC ``fork`` answers Pi's ``Invalid entry ID for forking``
  (for an unknown id and for an entry that is not a user message alike), and an extra command's
  id of the wrong JSON type is a malformed request (``"entryId" must be a string``).
"""

from __future__ import annotations

import inspect
import json
import shutil
from pathlib import Path

import pytest

from sessiontree import Session
from sessiontree.errors import EntryNotFoundError
from sessiontree.rpc import RpcServer
from tests.support.cli_run import run_cli

GEN = Path(__file__).resolve().parent.parent / "corpus" / "pi-generated"
TEXT = "Entry not found: nope"

#: every public Session method taking an entry id, and what it does with one no entry has
LOOKUPS = {"get_entry", "get_label", "entry_index", "abandoned_branch"}
RAISES = {
    "branch": {},
    "get_branch": {},
    "get_children": {},
    "get_entries": {},
    "get_entries_page": {},
    "branch_positions": {},
    "branch_table": {},
    "navigate_tree": {},
    "anavigate_tree": {},
    "branch_with_summary": {"summary": "s"},
    "create_branched_session": {},
    "append_label_change": {"label": "x"},
    "append_context_edit": {"replacement": None},
}
ID_PARAMS = ("entry_id", "from_id", "target_id", "since", "leaf_id")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return Path(shutil.copy(GEN / "linear_short.jsonl", tmp_path / "s.jsonl"))


def _id_param(name: str) -> str:
    params = inspect.signature(getattr(Session, name)).parameters
    return next(p for p in params if p in ID_PARAMS)


def test_every_method_taking_an_entry_id_is_in_the_table():
    taking = {
        n
        for n, f in inspect.getmembers(Session, predicate=inspect.isfunction)
        if not n.startswith("_") and any(p in ID_PARAMS for p in inspect.signature(f).parameters)
    }
    assert taking == LOOKUPS | set(RAISES)


@pytest.mark.parametrize("bad", ["nope", 5, None])
@pytest.mark.parametrize("name", sorted(RAISES))
def test_a_method_that_needs_the_entry_raises_the_one_error(path, name, bad):
    s = Session.open(path)
    before = path.read_bytes()
    none_means = (
        "branch_with_summary",
        "get_branch",
        "get_entries",
        "get_entries_page",
        "branch_positions",
        "branch_table",
    )
    if bad is None and name in none_means:
        pytest.skip("None means something there (the leaf, the start, before the first entry)")
    kwargs = {_id_param(name): bad}
    for k, v in RAISES[name].items():
        kwargs[k] = v
    with pytest.raises(EntryNotFoundError) as info:
        r = getattr(s, name)(**kwargs)
        if inspect.iscoroutine(r):
            import asyncio

            asyncio.run(r)
    assert str(info.value) == f"Entry not found: {bad}" and info.value.entry_id == bad
    assert isinstance(info.value, KeyError)  # and a KeyError, as a mapping's missing key
    assert path.read_bytes() == before  # nothing written


@pytest.mark.parametrize("bad", ["nope", 5, None, ["x"]])
def test_the_lookups_answer_none_as_pis_get_entry_does(path, bad):
    s = Session.open(path)
    leaf = s.leaf_id
    assert s.get_entry(bad) is None
    assert s.get_label(bad) is None
    assert s.entry_index(bad) is None
    assert s.abandoned_branch(leaf, bad) is None


@pytest.mark.parametrize(
    "argv",
    [
        ["branch", "--from", "nope"],
        ["branch", "--since", "nope"],
        ["tree", "--around", "nope"],
        ["tree", "--since", "nope"],
        ["entries", "--since", "nope"],
        ["navigate", "nope", "--dry-run"],
        ["navigate", "nope", "--label", "x"],
    ],
)
def test_the_cli_prints_the_one_line_and_exits_2(path, argv):
    before = path.read_bytes()
    command, *rest = argv
    rc, out, err = run_cli(command, path, *rest)
    assert (rc, out, err) == (2, "", f"sessiontree: error: {TEXT}\n")
    rc, out, _ = run_cli(command, path, *rest, "--json")
    assert rc == 2 and json.loads(out) == {"error": True, "exit_code": 2, "message": TEXT}
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "command",
    [
        {"type": "get_entries", "since": "nope"},
        {"type": "get_entry", "entryId": "nope"},
        {"type": "navigate_tree", "targetId": "nope"},
        {"type": "set_label", "entryId": "nope", "label": "x"},
    ],
)
def test_rpc_answers_the_one_error(path, command):
    server = RpcServer(Session.open(path))
    assert server.handle({"type": "hello"})["success"]
    r = server.handle({"id": "c", **command})
    assert (r["success"], r["error"], r["command"]) == (False, TEXT, command["type"])


def test_rpc_fork_keeps_pis_text_and_a_wrong_type_is_a_malformed_request(path):
    server = RpcServer(Session.open(path))
    server.handle({"type": "hello"})
    assert server.handle({"type": "fork", "entryId": "nope"})["error"] == "Invalid entry ID for forking"
    r = server.handle({"type": "get_entry", "entryId": 5})
    assert r["error"] == 'get_entry: "entryId" must be a string, not a number'
    assert server.handle({"type": "get_entries", "since": 5})["error"] == "Entry not found: 5"  # Pi's lookup
