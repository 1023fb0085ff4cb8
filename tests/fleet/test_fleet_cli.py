"""`sessiontree stats` and `sessiontree compact-all`: the CLI over the public fleet API."""

from __future__ import annotations

import json
from pathlib import Path
import shutil
import subprocess
import sys

import pytest

pq = pytest.importorskip("pyarrow.parquet")

from tests.support.fleet_store import shared_store  # noqa: E402

from sessiontree import Session  # noqa: E402
from sessiontree.cli import main  # noqa: E402
from sessiontree.fleet import session_stats  # noqa: E402


def test_stats_writes_the_same_parquet_as_the_api(tmp_path_factory, tmp_path, capsys):
    root, paths = shared_store(tmp_path_factory)
    some = root / "--home-dev-p3--"
    out, ent = tmp_path / "s.parquet", tmp_path / "e.parquet"
    assert (
        main(
            [
                "stats",
                str(some),
                "--parquet",
                str(out),
                "--entries-parquet",
                str(ent),
                "--context-window",
                "50000",
                "--workers",
                "2",
            ]
        )
        == 0
    )
    printed = capsys.readouterr()
    n = len(list(some.glob("*.jsonl")))
    assert printed.out.startswith(f"{n} sessions (0 unreadable, ")
    assert "[" not in printed.err  # no progress bar when stderr is not a terminal
    assert pq.read_table(out).to_pylist() == session_stats(some, context_window=50000, workers=1).to_pylist()
    assert pq.read_table(ent).num_rows == sum(len(Session.open(p)) for p in some.glob("*.jsonl"))
    assert main(["stats", str(some), "--parquet", str(tmp_path / "x.parquet"), "--engine", "nope"]) == 2
    assert main(["stats", str(some), "--workers", "0"]) == 2  # a bad option (--parquet is optional: a summary)


def test_stats_progress_bar_when_asked(tmp_path_factory, tmp_path, capsys):
    root, _ = shared_store(tmp_path_factory)
    assert (
        main(
            [
                "stats",
                str(root / "--home-dev-p1--"),
                "--parquet",
                str(tmp_path / "s.parquet"),
                "--progress",
                "--workers",
                "1",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "sessions" in err and "100%|" in err  # tqdm's bar, run to its end


def test_compact_all_offline_resumable(tmp_path_factory, tmp_path):
    root, paths = shared_store(tmp_path_factory)
    mine = tmp_path / "sessions" / "--home-dev-p2--"
    mine.mkdir(parents=True)
    for p in sorted((root / "--home-dev-p2--").glob("*.jsonl"))[:12]:
        shutil.copyfile(p, mine / p.name)
    before = {p.name: len(Session.open(p)) for p in mine.glob("*.jsonl")}
    outcomes = tmp_path / "o.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "sessiontree",
        "compact-all",
        str(mine),
        "--context-window",
        "56384",
        "--keep-recent-tokens",
        "2000",
        "--outcomes",
        str(outcomes),
        "--json",
        "--concurrency",
        "2",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["sessions"] == 12 and doc["outcomes"].get("compacted", 0) >= 1
    grown = {p.name for p in mine.glob("*.jsonl") if len(Session.open(p)) > before[p.name]}
    assert len(grown) == doc["outcomes"]["compacted"]
    for name in grown:
        s = Session.open(mine / name)
        assert s.get_entry(s.leaf_id).type == "compaction"
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    # only the compacted sessions are final: the rest are decided again, and none compacted
    redo = json.loads(again.stdout)
    assert again.returncode == 0 and redo["skipped"] == {"compacted": len(grown)}
    assert redo["sessions"] == 12 - len(grown) and "compacted" not in redo["outcomes"]
    assert main(["compact-all", str(mine)]) == 2  # --context-window is required


def test_stats_without_the_fleet_extra_is_one_line_not_a_traceback(tmp_path):
    """Without pyarrow (the `fleet` extra), `sessiontree stats` says how to install it in one
    line and exits 2: the CLI never prints a traceback."""
    shutil.copy(Path(__file__).parent.parent.parent / "examples" / "session.jsonl", tmp_path / "s.jsonl")
    code = (
        "import sys\n"
        "sys.modules['pyarrow'] = None  # as if the fleet extra were not installed\n"
        "from sessiontree.cli import main\n"
        f"sys.exit(main(['stats', {str(tmp_path)!r}, '--parquet', {str(tmp_path / 'o.parquet')!r}]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert "pip install 'sessiontree[fleet]'" in proc.stderr and "pip install '.[fleet]'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.parquet").exists()


def test_stats_counts_one_unreadable_file_in_the_singular(tmp_path, capsys):
    store = tmp_path / "store"
    store.mkdir()
    (store / "bad.jsonl").write_bytes(b"not a session\n")
    assert main(["stats", str(store), "--parquet", str(tmp_path / "s.parquet")]) == 0
    err = capsys.readouterr().err
    assert "sessiontree: 1 file could not be read:" in err, err
