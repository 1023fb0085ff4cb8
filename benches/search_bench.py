"""Search against its peers, as ratios measured in one run (docs/benchmarks.md, "Search").

    python benches/search_bench.py [--megabytes 500] [--queries 40] [--store DIR] [--json OUT]

The store: generated sessions (/work/shared/tools/gen_session.py, 8 files, seeded) of about
``--megabytes`` in all, plus tests/corpus. Peers: the PyPI ``tantivy`` package indexing the same
extracted text (``_core.search_extract``, the index's own extraction; stored text, its default
tokenizer: split on non-alphanumerics, lowercase, long tokens removed), its time not counting the
extraction; and one ``rg -F`` pass over the store (ripgrep, Debian package ``ripgrep``).

``--store DIR`` uses a store made beforehand (copied, since a session is appended to).

Figures:
* build: our first search over the store with no index (extraction included; timed inside the
  fresh process, as the package's indexing is timed inside this one: neither counts the
  interpreter's start or the import) / the package's indexing of the extracted text (commit
  included), in wall time and in CPU time (all threads); index size as % of the searchable
  text;
* query p95, top 10 with snippets, in process: ours / the package's (search + a snippet per hit;
  each query's best of 3 interleaved rounds), in wall time and in the calling thread's CPU time,
  and ours / one ``rg -F`` pass (median of the queries' passes);
* CLI p95, one process per query: ``sessiontree search`` / ``python -c`` with the package, wall
  and CPU (the child's user + system);
* after an append: the first search after 1 MB is appended to one session / (a warm query + a
  cold scan of 1 MB);
* memory: peak RSS of a process doing the first search, as % of the store's bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GEN = Path("/work/shared/tools/gen_session.py")


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def make_store(d: Path, megabytes: int) -> list[Path]:
    files = []
    per = max(1, megabytes // 8)
    for i in range(8):
        out = d / f"--gen{i}--" / f"2025-01-0{i + 1}T00-00-00-000Z_gen{i}.jsonl"
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                str(GEN),
                "--megabytes",
                str(per),
                "--branchiness",
                "0.05",
                "--seed",
                str(i + 1),
                "--out",
                str(out),
            ],
            check=True,
        )
        files.append(out)
    shutil.copytree(ROOT / "tests" / "corpus", d / "corpus")
    return files


def extracted(store: Path) -> list[tuple[str, int, str]]:
    from sessiontree import _core

    out = []
    for p in sorted(store.rglob("*.jsonl")):
        off = 0
        with open(p, "rb") as f:
            for line in f:
                t = _core.search_extract(line.rstrip(b"\r\n"))
                if t:
                    out.append((str(p), off, t))
                off += len(line)
    return out


def peer_build(docs: list[tuple[str, int, str]], where: Path) -> tuple[float, object]:
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("text", stored=True)
    sb.add_text_field("path", stored=True)
    sb.add_integer_field("off", stored=True)
    schema = sb.build()
    where.mkdir()
    index = tantivy.Index(schema, path=str(where))
    t = time.perf_counter()
    w = index.writer()
    for path, off, text in docs:
        w.add_document(tantivy.Document(text=text, path=path, off=off))
    w.commit()
    w.wait_merging_threads()
    took = time.perf_counter() - t
    index.reload()
    return took, index


def peer_query(index, q: str) -> float:
    import tantivy

    t = time.perf_counter()
    searcher = index.searcher()
    query = index.parse_query(q, ["text"])
    hits = searcher.search(query, 10).hits
    sg = tantivy.SnippetGenerator.create(searcher, query, index.schema, "text")
    for _score, addr in hits:
        sg.snippet_from_doc(searcher.doc(addr)).to_html()
    return time.perf_counter() - t


#: The package's CLI query: a process that opens its index (argv[1]) and answers argv[2], top 10
#: with a snippet per hit.
PEER_CLI = (
    "import sys, tantivy; ix = tantivy.Index.open(sys.argv[1]); s = ix.searcher();"
    "q = ix.parse_query(sys.argv[2], ['text']); h = s.search(q, 10).hits;"
    "g = tantivy.SnippetGenerator.create(s, q, ix.schema, 'text');"
    "[g.snippet_from_doc(s.doc(a)).to_html() for _, a in h]"
)


def dir_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


def cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_children() -> float:
    """CPU seconds of the waited-for child processes so far (user + system)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


#: The first search in a fresh process: prints (import s, search wall s, search CPU s).
BUILD_CODE = """
import json, resource, sys, time
t = time.perf_counter()
from sessiontree import search
t1 = time.perf_counter()
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
c = cpu()
search('zzzunlikely', sys.argv[1])
print(json.dumps([t1 - t, time.perf_counter() - t1, cpu() - c]))
"""


def build_child(store: Path, env: dict[str, str]) -> tuple[float, float, float, int]:
    """(import s, search wall s, search CPU s, peak RSS bytes) of the first search in a child."""
    out = subprocess.run(
        [sys.executable, "-c", BUILD_CODE, str(store)], check=True, env=env, capture_output=True, text=True
    ).stdout
    imp, wall, cpu = json.loads(out.splitlines()[-1])
    return imp, wall, cpu, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--megabytes", type=int, default=int(os.environ.get("SESSIONTREE_BENCH_SEARCH_MB", "64")))
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--store", help="a store made beforehand (copied; --megabytes is then ignored)")
    a = ap.parse_args()
    rg = shutil.which("rg")
    res: dict[str, object] = {"megabytes": a.megabytes} if not a.store else {"store": a.store}
    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        store = tmpd / "store"
        if a.store:
            shutil.copytree(a.store, store)
            files = sorted(p for p in store.rglob("*.jsonl") if "corpus" not in p.parts)
        else:
            files = make_store(store, a.megabytes)
        store_bytes = sum(p.stat().st_size for p in store.rglob("*.jsonl"))
        cache = tmpd / "cache"
        env = dict(os.environ, SESSIONTREE_INDEX_CACHE=str(cache))
        os.environ["SESSIONTREE_INDEX_CACHE"] = str(cache)
        # build: the first search, in a fresh process (its peak RSS too)
        import_s, build_s, build_cpu, rss = build_child(store, env)
        docs = extracted(store)
        text_bytes = sum(len(t.encode()) for _, _, t in docs)
        c = cpu_self()
        peer_s, index = peer_build(docs, tmpd / "peer")
        peer_cpu = cpu_self() - c
        ours_bytes = dir_bytes(cache / "search")
        res.update(
            store_bytes=store_bytes,
            text_bytes=text_bytes,
            build_s=build_s,
            peer_build_s=peer_s,
            build_ratio=build_s / peer_s,
            build_cpu_s=build_cpu,
            peer_build_cpu_s=peer_cpu,
            build_cpu_ratio=build_cpu / peer_cpu,
            child_import_s=import_s,
            index_pct_of_text=100 * ours_bytes / text_bytes,
            peer_index_pct_of_text=100 * dir_bytes(tmpd / "peer") / text_bytes,
            peak_rss_pct_of_store=100 * rss / store_bytes,
        )
        # queries: words sampled from the text (seeded), each a single word or a two-word phrase
        from sessiontree import search

        rnd = random.Random(5)
        words = [w for _, _, t in rnd.sample(docs, min(400, len(docs))) for w in re.findall(r"[a-z]{5,12}", t.lower())]
        qs = []
        for i in range(a.queries):
            ws = re.findall(r"[a-z]{3,12}", rnd.choice(docs)[2].lower()) if i % 3 == 2 else []
            if len(ws) >= 2:
                j = rnd.randrange(len(ws) - 1)
                qs.append(f'"{ws[j]} {ws[j + 1]}"')
            else:
                qs.append(rnd.choice(words))
        search(qs[0], store)  # warm
        # each query's best of 3 rounds, ours and the package's interleaved; wall and this
        # thread's CPU (both answer in the calling thread)
        ours_w: list[list[float]] = [[] for _ in qs]
        ours_c: list[list[float]] = [[] for _ in qs]
        peer_w: list[list[float]] = [[] for _ in qs]
        peer_c: list[list[float]] = [[] for _ in qs]
        for _ in range(3):
            for i, q in enumerate(qs):
                t, c = time.perf_counter(), time.thread_time()
                search(q, store, limit=10)
                ours_w[i].append(time.perf_counter() - t)
                ours_c[i].append(time.thread_time() - c)
                c = time.thread_time()
                peer_w[i].append(peer_query(index, q))
                peer_c[i].append(time.thread_time() - c)
        ours = [min(x) for x in ours_w]
        peer = [min(x) for x in peer_w]
        ours_cpu = [min(x) for x in ours_c]
        peer_cpu = [min(x) for x in peer_c]
        res.update(
            query_p95_ms=1000 * p95(ours),
            peer_query_p95_ms=1000 * p95(peer),
            query_ratio_vs_peer=p95(ours) / p95(peer),
            query_cpu_p95_ms=1000 * p95(ours_cpu),
            peer_query_cpu_p95_ms=1000 * p95(peer_cpu),
            query_cpu_ratio_vs_peer=p95(ours_cpu) / p95(peer_cpu),
        )
        if rg:
            passes = []
            for q in qs[:5]:
                t = time.perf_counter()
                subprocess.run([rg, "-F", "-i", "-c", q.strip('"'), str(store)], stdout=subprocess.DEVNULL)
                passes.append(time.perf_counter() - t)
            res.update(
                rg_pass_ms=1000 * statistics.median(passes), query_ratio_vs_rg=p95(ours) / statistics.median(passes)
            )
        # the CLI, one process per query, against the package in one process per query
        cli, pcli, cli_cpu, pcli_cpu = [], [], [], []
        peer_code = PEER_CLI
        for q in qs[:10]:
            t, c = time.perf_counter(), cpu_children()
            subprocess.run(
                [sys.executable, "-m", "sessiontree", "search", q, str(store), "--limit", "10", "--json"],
                env=env,
                stdout=subprocess.DEVNULL,
                check=True,
            )
            cli.append(time.perf_counter() - t)
            cli_cpu.append(cpu_children() - c)
            t, c = time.perf_counter(), cpu_children()
            subprocess.run([sys.executable, "-c", peer_code, str(tmpd / "peer"), q], check=True)
            pcli.append(time.perf_counter() - t)
            pcli_cpu.append(cpu_children() - c)
        res.update(
            cli_p95_ms=1000 * p95(cli),
            peer_cli_p95_ms=1000 * p95(pcli),
            cli_ratio_vs_peer=p95(cli) / p95(pcli),
            cli_cpu_p95_ms=1000 * p95(cli_cpu),
            peer_cli_cpu_p95_ms=1000 * p95(pcli_cpu),
            cli_cpu_ratio_vs_peer=p95(cli_cpu) / p95(pcli_cpu),
        )
        # where the CLI's time goes: the imports alone, one process each (medians of 5)
        imports: dict[str, list[float]] = {"sessiontree.cli": [], "tantivy": []}
        for _ in range(5):
            for mod, xs in imports.items():
                t = time.perf_counter()
                subprocess.run([sys.executable, "-c", f"import {mod}"], env=env, check=True)
                xs.append(time.perf_counter() - t)
        res.update(
            cli_import_ms=1000 * statistics.median(imports["sessiontree.cli"]),
            peer_import_ms=1000 * statistics.median(imports["tantivy"]),
        )
        # after an append of 1 MB to one session
        from sessiontree import Session

        warm, warm_cpu = [], []
        for _ in range(5):
            t, c = time.perf_counter(), cpu_self()
            search(qs[1], store, limit=10)
            warm.append(time.perf_counter() - t)
            warm_cpu.append(cpu_self() - c)
        one_mb = tmpd / "onemb.jsonl"
        subprocess.run([sys.executable, str(GEN), "--megabytes", "1", "--seed", "99", "--out", str(one_mb)], check=True)
        body = one_mb.read_bytes().split(b"\n", 1)[1]
        t, c = time.perf_counter(), cpu_self()
        Session.open(one_mb, index_cache=False)
        scan_1mb, scan_cpu = time.perf_counter() - t, cpu_self() - c
        with open(files[0], "ab") as f:
            f.write(body)
        t, c = time.perf_counter(), cpu_self()
        search(qs[1], store, limit=10)
        after, after_cpu = time.perf_counter() - t, cpu_self() - c
        res.update(
            warm_query_ms=1000 * statistics.median(warm),
            scan_1mb_ms=1000 * scan_1mb,
            after_append_ms=1000 * after,
            after_append_ratio=after / (statistics.median(warm) + scan_1mb),
            after_append_cpu_ratio=after_cpu / (statistics.median(warm_cpu) + scan_cpu),
        )
    for k, v in res.items():
        print(f"{k}: {v:.3f}" if isinstance(v, float) else f"{k}: {v}")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
