"""The OpenTelemetry export's memory over a long session: what it holds per entry (its group,
time and flags, and a small record per turn) on top of what ``Session.open`` holds."""

from __future__ import annotations

import orjson
import pytest

from tests.support.peak_memory import peak_kb

ENTRIES = 200_000


@pytest.mark.slow
def test_the_export_holds_a_few_bytes_per_entry_over_the_open(tmp_path):
    # 100,000 turns of a user message and an assistant reply (~42 MB): every entry is mapped and
    # every user message makes a turn, so the export's fixed state per entry and per turn is
    # what grows. Before the state was slimmed: 117 bytes per entry over the open's peak; now 53.
    path = tmp_path / "long.jsonl"
    with open(path, "wb") as fh:
        head = {"type": "session", "version": 3, "id": "m", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"}
        fh.write(orjson.dumps(head) + b"\n")
        prev = None
        for k in range(ENTRIES):
            message: dict = {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 0}
            if k % 2:
                message.update(role="assistant", model="m", provider="p", usage={"input": 1}, stopReason="stop")
            e = {"type": "message", "id": f"{k:x}", "parentId": prev, "timestamp": "2025-01-01T00:00:01.000Z"}
            e["message"] = message
            fh.write(orjson.dumps(e) + b"\n")
            prev = f"{k:x}"
    opened = peak_kb("from sessiontree import Session; Session.open(sys.argv[1]).leaf_id", str(path))
    exported = peak_kb(
        "from sessiontree import Session; r = Session.open(sys.argv[1]).to_otlp(sys.argv[2]); assert r.spans > 0",
        str(path),
        str(tmp_path / "t.jsonl"),
    )
    per_entry = (exported - opened) * 1024 / ENTRIES
    assert per_entry < 80, (opened, exported, per_entry)
    lines = (tmp_path / "t.jsonl").read_bytes().splitlines()
    spans = sum(len(orjson.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]) for line in lines)
    assert spans == ENTRIES + 1  # a turn per user message, a chat span per reply, the root
