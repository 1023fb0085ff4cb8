"""``sessiontree rpc`` ``compact`` against Pi 1.6.0's recorded exchanges (``*.jsonl.compact.json``).

Every variant of every compact recording (found by globbing) is replayed through the real
process over a pipe, with a fake OpenAI-compatible chat-completions server on loopback that
answers request N with ``SUMMARY for request N`` and the recording's fixed usage, as the
harness's server did for Pi. The Pi agent folder holds the variant's ``models.json`` (its
``baseUrl`` pointing at our server) and ``settings.json``; the model is picked as Pi picks it
(the session's model, found in the models file).

Pi's ``set_model`` appended a ``model_change`` before ``compact``; this server refuses agent
commands, so the test appends the same entry with the library (with the entries Pi appended at
startup) before launching. Checked: the ``get_state`` answers, the ``compact`` response (or its
error), the ``compaction_start``/``compaction_end`` events, every HTTP request body Pi sent, the
appended compaction entry (all but ``id``/``timestamp``), ``get_messages`` after compaction,
``get_session_stats`` (tokens, cost and ``contextUsage`` including the summary usage).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from tests.support.goldens import CORPUS, GOLDEN_DIRS
from tests.support.rpc_client import PiRpcClient

from sessiontree import Session
from sessiontree.summarizers.base import MIN_SUMMARY_OUTPUT_TOKENS

pytest.importorskip("openai")
from tests.summarizers.test_summarizer_http import FakeLLM, _Handler, openai_sse, parse_pi_user_text  # noqa: E402


class _KindHandler(_Handler):
    """Answers each request with the text Pi's fake server gave the request of the same kind
    (history or split-turn prefix): the two calls of a split turn run concurrently, so their
    arrival order is not fixed, but what each one is asked is."""

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        fake = self.server.fake  # type: ignore[attr-defined]
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.loads(raw)
        with fake.lock:
            fake.requests.append({"path": self.path, "body": body})
        kind = parse_pi_user_text(body["messages"][1]["content"][0]["text"])["kind"]
        n = fake.kinds.index(kind) + 1 if kind in fake.kinds else 99
        openai_sse(f"SUMMARY for request {n}", fake.usage)(self)


sys.setrecursionlimit(max(sys.getrecursionlimit(), 50000))


def compact_recordings() -> list[Path]:
    out: list[Path] = []
    for d in GOLDEN_DIRS:
        out.extend(sorted((CORPUS / d).glob("*.jsonl.compact.json")))
    return out


def _params() -> list:
    out = []
    for path in compact_recordings():
        golden = json.loads(path.read_text(encoding="utf-8"))
        for name, v in golden.items():
            if isinstance(v, dict) and "exchanges" in v:
                out.append(
                    pytest.param(path, name, id=f"{path.parent.name}/{path.name[: -len('.jsonl.compact.json')]}:{name}")
                )
    return out


def _exchange(variant: dict, ctype: str, which: int = 0) -> dict:
    return [e for e in variant["exchanges"] if e["command"]["type"] == ctype][which]


def _append_startup(session: Session, variant: dict) -> None:
    for entry in (variant.get("startup") or {}).get("appended_entries") or []:
        if entry.get("type") == "thinking_level_change":
            session.append_thinking_level_change(entry["thinkingLevel"])
        elif entry.get("type") != "session":
            raise AssertionError(f"unexpected startup entry {entry.get('type')}")


def _mask(value, port_re, ddir: str):
    """Recordings write Pi's folder ``<dir>`` and Pi's fake-server port."""
    text = json.dumps(value, ensure_ascii=False)
    text = port_re.sub("127.0.0.1:<port>", text).replace(ddir + "/", "<dir>/")
    return json.loads(text)


@pytest.fixture
def fake():
    server = FakeLLM()
    server.server.RequestHandlerClass = _KindHandler
    yield server
    server.close()


@pytest.mark.parametrize("rec_path,variant_name", _params())
def test_rpc_compact_matches_pi(rec_path: Path, variant_name: str, tmp_path: Path, fake: FakeLLM) -> None:
    golden = json.loads(rec_path.read_text(encoding="utf-8"))
    variant = golden[variant_name]
    usage = golden["fake_llm"]["usage"]
    fake.usage = usage
    fake.kinds = [
        parse_pi_user_text(r["body"]["messages"][1]["content"][0]["text"])["kind"] for r in variant["llm_requests"]
    ]
    port_re = re.compile(r"127\.0\.0\.1:\d+")

    src = rec_path.with_name(rec_path.name[: -len(".compact.json")])
    work = tmp_path / "s"
    work.mkdir()
    copy = work / src.name
    shutil.copyfile(src, copy)
    agent = tmp_path / "agent"
    agent.mkdir()
    models = json.loads(json.dumps(variant["models_json"]).replace("<port>", str(fake.server.server_address[1])))
    (agent / "models.json").write_text(json.dumps(models))
    if variant.get("settings_json") is not None:
        (agent / "settings.json").write_text(json.dumps(variant["settings_json"]))

    s = Session.open(copy)
    _append_startup(s, variant)
    model_change = s.append_model_change("fake", "fake-model")  # Pi's set_model
    s.close()
    pi_model_change = variant["last_id_before_compact"]

    client = PiRpcClient(
        ["--mode", "rpc", "--session", str(copy)], env={"PI_CODING_AGENT_DIR": str(agent)}, check_version=False
    )  # the version handshake is checked by test_rpc_replay
    mask = lambda v: _mask(v, port_re, str(work))  # noqa: E731

    def ours(ctype: str, **extra) -> dict:
        return mask(client.request({"type": ctype, **extra}))

    def pi(ctype: str, which: int = 0) -> dict:
        return _mask(_exchange(variant, ctype, which)["response"], port_re, "<dir>")

    def same_but_id(a: dict, b: dict) -> None:
        assert {k: v for k, v in a.items() if k != "id"} == {k: v for k, v in b.items() if k != "id"}

    state = ours("get_state")
    same_but_id(state, pi("get_state", 0))
    assert "fake-key" not in json.dumps(state)  # the models file's key never leaves the server

    compact = _exchange(variant, "compact")
    got = ours("compact", **{k: v for k, v in compact["command"].items() if k not in ("id", "type")})
    want = _mask(compact["response"], port_re, "<dir>")
    budgets = [r["body"].get("max_completion_tokens") for r in variant["llm_requests"]]
    if any(isinstance(b, int) and b < MIN_SUMMARY_OUTPUT_TOKENS for b in budgets):
        # Divergence (docs/divergences.md, summary output budget): Pi asks for a summary in as
        # little as 1 token; we answer an error, send nothing and append nothing
        assert got["success"] is False and "output tokens" in got["error"], got
        assert fake.requests == []
        assert ours("get_entries", since=model_change)["data"]["entries"] == []
        code, err = client.close()
        assert code == 0, err
        return
    same_but_id(got, want)

    # the HTTP requests: same count and shape; the same conversation, previous summary and
    # focus in the user text (our instruction wording is our own: test_summarizer_http)
    assert len(fake.requests) == len(variant["llm_requests"])
    order = {parse_pi_user_text(r["body"]["messages"][1]["content"][0]["text"])["kind"]: r for r in fake.requests}
    fake.requests = [order[k] for k in fake.kinds]
    window = variant["models_json"]["providers"]["fake"]["models"][0]["contextWindow"]
    for mine, theirs in zip(fake.requests, variant["llm_requests"]):
        ours_b, pi_b = mine["body"], theirs["body"]
        assert mine["path"] == theirs["path"] == "/v1/chat/completions"
        assert list(ours_b) == list(pi_b)
        for key in ("model", "stream", "stream_options", "store"):
            assert ours_b[key] == pi_b[key], key
        if window >= 200000 or pi_b["max_completion_tokens"] == 1:
            assert ours_b["max_completion_tokens"] == pi_b["max_completion_tokens"]
        assert [m["role"] for m in ours_b["messages"]] == [m["role"] for m in pi_b["messages"]]
        assert parse_pi_user_text(ours_b["messages"][1]["content"][0]["text"]) == parse_pi_user_text(
            pi_b["messages"][1]["content"][0]["text"]
        )

    # the events
    events = [mask(e) for e in client.events]
    assert events == _mask(variant["events"], port_re, "<dir>")

    # the appended entry
    r = ours("get_entries", since=model_change)
    pi_r = pi("get_entries")
    assert len(r["data"]["entries"]) == len(pi_r["data"]["entries"])
    for a, b in zip(r["data"]["entries"], pi_r["data"]["entries"]):
        assert list(a) == list(b), "key order"
        assert a["parentId"] == model_change and b["parentId"] == pi_model_change
        assert {k: v for k, v in a.items() if k not in ("id", "timestamp", "parentId")} == {
            k: v for k, v in b.items() if k not in ("id", "timestamp", "parentId")
        }

    # the context after compaction (a compaction summary's timestamp is its entry's, ours)
    def no_summary_ts(resp: dict) -> dict:
        msgs = [
            {k: v for k, v in m.items() if not (m.get("role") == "compactionSummary" and k == "timestamp")}
            for m in resp["data"]["messages"]
        ]
        return dict(resp, id=None, data={"messages": msgs})

    assert no_summary_ts(ours("get_messages")) == no_summary_ts(pi("get_messages"))
    same_but_id(ours("get_session_stats"), pi("get_session_stats"))
    same_but_id(ours("get_state"), pi("get_state", 1))
    code, err = client.close()
    assert code == 0, err


def test_there_are_compact_recordings() -> None:
    assert len(_params()) >= 50
