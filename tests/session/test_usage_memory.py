"""Session.usage_totals over a long file: its memory is a batch of entries, not the file's."""

from __future__ import annotations


import orjson
import pytest

from tests.support.peak_memory import peak_kb


@pytest.mark.slow
def test_usage_totals_holds_a_batch_not_the_file(tmp_path):
    # 8,000 assistant messages of ~4 KB with usage: ~33 MB. Parsing them all at once held every
    # dict (over the file's size); a batch at a time holds a few MB.
    path = tmp_path / "long.jsonl"
    text = "lorem ipsum dolor sit amet " * 150
    usage = {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15, "cost": {"total": 0.01}}
    with open(path, "wb") as fh:
        head = {"type": "session", "version": 3, "id": "u", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"}
        fh.write(orjson.dumps(head) + b"\n")
        prev = None
        for k in range(8000):
            message = {"role": "assistant", "content": [{"type": "text", "text": text}], "usage": usage, "timestamp": 0}
            e = {"type": "message", "id": f"m{k}", "parentId": prev, "timestamp": "2025-01-01T00:00:01.000Z"}
            e["message"] = message
            fh.write(orjson.dumps(e) + b"\n")
            prev = f"m{k}"
    size_kb = path.stat().st_size // 1024
    opened = peak_kb("from sessiontree import Session; Session.open(sys.argv[1]).leaf_id", str(path))
    summed = peak_kb(
        "from sessiontree import Session; u = Session.open(sys.argv[1]).usage_totals(); assert u.input == 80000, u",
        str(path),
    )
    assert summed - opened < size_kb // 4, (summed, opened, size_kb)  # before: +76 MB (2.3x the file)
