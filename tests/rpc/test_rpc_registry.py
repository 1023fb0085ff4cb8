"""The RPC server's one command registry (``sessiontree.rpc.server.COMMANDS``): the Pi command
table, the commands after ``hello``, the refused agent commands and the ``capabilities`` list
are all built from it, so a command cannot be in one and missing from another."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from tests.support.goldens import CORPUS

import sessiontree.rpc as rpc
from sessiontree import Session
from sessiontree.rpc import AGENT_COMMANDS, CAPABILITIES, COMMANDS, RpcServer

HERE = Path(__file__).resolve().parent
#: Pi 1.6's RPC commands, copied from the '### name' headings of Pi's rpc-commands.md
PI_LIST = [ln.strip() for ln in (HERE / "pi_rpc_commands.txt").read_text().splitlines() if ln.strip() and ln[0] != "#"]
KINDS = {"pi", "hello", "extra", "agent"}


def _server(tmp_path: Path) -> RpcServer:
    dst = tmp_path / "s.jsonl"
    shutil.copyfile(CORPUS / "pi-generated" / "linear_short.jsonl", dst)
    return RpcServer(Session.open(dst))


def test_each_command_is_one_row_of_a_known_kind():
    names = [c.name for c in COMMANDS]
    assert len(names) == len(set(names))
    assert {c.kind for c in COMMANDS} <= KINDS
    for c in COMMANDS:
        assert (c.handler is None) == (c.kind == "agent"), c.name


def test_the_tables_are_built_from_the_registry():
    assert rpc._PI_COMMANDS == {c.name: c.handler for c in COMMANDS if c.kind == "pi"}
    assert rpc._EXTRA_COMMANDS == {c.name: c.handler for c in COMMANDS if c.kind == "extra"}
    assert AGENT_COMMANDS == {c.name for c in COMMANDS if c.kind == "agent"}
    assert CAPABILITIES == [cap for c in COMMANDS for cap in c.capabilities]


def test_every_extra_is_announced_and_every_capability_has_one_owner():
    owners: dict[str, list[str]] = {}
    for c in COMMANDS:
        for cap in c.capabilities:
            owners.setdefault(cap, []).append(c.name)
    assert all(len(v) == 1 for v in owners.values()), owners
    for c in COMMANDS:
        if c.kind == "extra":
            assert c.name in c.capabilities, c.name
        for cap in c.capabilities:  # the command itself, one of its options, or one of its events
            assert cap == c.name or cap.startswith(c.name + ".") or cap.startswith(c.name + "_"), (c.name, cap)


def test_pi_commands_are_exactly_pis_list():
    assert len(PI_LIST) == len(set(PI_LIST)) > 30
    ours = {c.name for c in COMMANDS if c.kind in ("pi", "agent")}
    assert ours == set(PI_LIST)


def test_the_copied_list_is_pis_when_pis_docs_are_here():
    doc = next(
        (
            p
            for p in (
                HERE.parents[2] / "shared" / "reference" / "pi-1.6-docs" / "rpc-commands.md",
                Path("/work/shared/reference/pi-1.6-docs/rpc-commands.md"),
            )
            if p.is_file()
        ),
        None,
    )
    if doc is None:
        pytest.skip("Pi's docs are not beside this checkout")
    assert re.findall(r"^### ([a-z_]+)\s*$", doc.read_text(), re.M) == PI_LIST


def test_the_module_docstring_names_every_command():
    doc = rpc.__doc__ or ""
    pi_part = doc.split("Session commands (Pi 1.6):", 1)[1].split("Beyond Pi", 1)[0]
    extra_part = doc.split("Beyond Pi", 1)[1].split("Launch flags", 1)[0]
    for c in COMMANDS:
        if c.kind == "pi":
            assert f"``{c.name}``" in pi_part, c.name
        if c.kind == "extra":
            assert f"``{c.name}``" in extra_part, c.name


def test_each_kind_answers_as_its_row_says(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # export_html without outputPath writes into the current folder
    for c in COMMANDS:
        if c.kind == "hello":
            continue
        server = _server(tmp_path)  # one each: new_session, clone... move the connection
        try:
            r = server.handle({"type": c.name})
            if c.kind == "agent":
                assert r["error"] == rpc.NOT_AN_AGENT.format(cmd=c.name)
            else:
                assert (r.get("error") == f"Unknown command: {c.name}") == (c.kind == "extra"), (c.name, r)
        finally:
            server.close()
    server = _server(tmp_path)
    try:
        hello = server.handle({"type": "hello"})
        assert hello["success"] and hello["data"]["capabilities"] == CAPABILITIES
        for c in COMMANDS:
            if c.kind == "extra":
                assert server.handle({"type": c.name}).get("error") != f"Unknown command: {c.name}", c.name
    finally:
        server.close()


#: handler-shaped methods that are not commands: an option of a command, reached from its handler
_NOT_COMMANDS = {"_get_tree_flat": "get_tree"}


def test_every_command_method_has_a_row():
    # CONTRIBUTING, "An RPC command", step 2: a method written and never registered is never
    # served, and nothing else fails (a method of the handler's shape is a command)
    import inspect

    from sessiontree.rpc.reads import ReadCommands
    from sessiontree.rpc.writes import WriteCommands

    handlers = {c.handler for c in COMMANDS if c.handler is not None}
    unregistered = []
    for cls in (ReadCommands, WriteCommands):
        for name, f in vars(cls).items():
            if not (inspect.isfunction(f) and name.startswith("_") and not name.startswith("__")):
                continue
            if list(inspect.signature(f).parameters) != ["self", "c", "cmd_id", "ctype"]:
                continue
            if f not in handlers and name not in _NOT_COMMANDS:
                unregistered.append(f"{cls.__name__}.{name}")
    assert unregistered == [], f"add a row to COMMANDS in rpc/server.py for each of {unregistered}"


def test_the_readme_names_every_command():
    # CONTRIBUTING, "An RPC command", step 4: the README's RPC section lists the commands
    readme = (HERE.parents[1] / "README.md").read_text()
    start = readme.index("\n## Pi's RPC")
    section = readme[start : readme.index("\n## ", start + 1)]
    pi_part, extra_part = section.split('After `{"type":"hello"}`', 1)
    missing = [c.name for c in COMMANDS if c.kind == "pi" and f"`{c.name}`" not in pi_part]
    missing += [c.name for c in COMMANDS if c.kind == "extra" and f"`{c.name}`" not in extra_part]
    assert missing == [], f"README.md, section \"Pi's RPC\": name {missing} (Pi's before `hello`, extras after)"
