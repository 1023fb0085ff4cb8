#!/usr/bin/env python3
"""Measure the HTML view (issue 12) and Pi's approach on the same generated sessions, and write
the "HTML view" section of docs/benchmarks.md.

    python benches/html_report.py --sizes 10,100,1024
    python benches/html_report.py --export-only --sizes 10,100,1024   # the export vs pigz

For each size: the export (``Session.export_html`` in a fresh process: time, peak RssAnon, output
size), then both pages in headless Chromium (Debian's, via Playwright ``executable_path``): time
to the first contentful paint, to the tree on screen and to the messages of the leaf, and the
JS heap after a garbage collection (DevTools ``Performance.getMetrics``).

"Pi's approach" is :func:`write_pi_style`: what Pi's ``/export`` does, rebuilt for comparison
(not Pi's template): the whole session inlined as one base64 JSON blob
(``{header, entries, leafId}``), decoded at once (``atob``, ``TextDecoder``, ``JSON.parse``), then
every entry rendered into the tree list and every message of the active path into the page.
Not a timed test; ``tests/seams/test_benches_smoke.py`` runs it once on a tiny session.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from inputs import session_file  # noqa: E402

BEGIN, END = "<!-- html-view -->", "<!-- /html-view -->"

PI_JS = r"""
(function () {
  const t0 = performance.now();
  const bin = atob(document.getElementById('session-data').textContent);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const data = JSON.parse(new TextDecoder().decode(bytes));
  const byId = new Map();
  for (const e of data.entries) byId.set(e.id, e);
  const tree = document.getElementById('tree'), msgs = document.getElementById('messages');
  for (const e of data.entries) {
    const d = document.createElement('div');
    const m = e.message;
    d.textContent = e.type + ' ' + (m && typeof m.content === 'string' ? m.content.slice(0, 80) : '');
    tree.appendChild(d);
  }
  const path = [];
  for (let e = byId.get(data.leafId); e; e = byId.get(e.parentId)) path.push(e);
  path.reverse();
  for (const e of path) {
    const d = document.createElement('div');
    const m = e.message;
    if (m && Array.isArray(m.content)) d.textContent = m.content.map((b) => b.text || b.thinking || '').join('\n');
    else d.textContent = m && typeof m.content === 'string' ? m.content : (e.summary || '');
    msgs.appendChild(d);
  }
  performance.mark('pi-ready');
  window.piReady = true;
})();
"""


def write_pi_style(src: Path, out: Path) -> Path:
    """The Pi-style page for ``src``: one inline base64 blob of ``{header, entries, leafId}``,
    written streaming (base64 in 3-byte-aligned pieces)."""
    from sessiontree import Session

    s = Session.open(src)
    with open(src, "rb") as fh, open(out, "wb") as w:
        w.write(
            b"<!DOCTYPE html><html><head><meta charset='utf-8'><title>pi-style</title></head><body>"
            b"<div id='tree'></div><div id='messages'></div>"
            b"<script id='session-data' type='application/json'>"
        )
        carry = b""

        def emit(data: bytes) -> None:
            nonlocal carry
            data = carry + data
            k = len(data) - len(data) % 3
            w.write(base64.b64encode(data[:k]))
            carry = data[k:]

        header = fh.readline().rstrip(b"\n")
        emit(b'{"header":' + header + b',"leafId":' + json.dumps(s.leaf_id).encode() + b',"entries":[')
        first = True
        for line in fh:
            line = line.rstrip(b"\r\n")
            if not line.strip():
                continue
            emit((b"" if first else b",") + line)
            first = False
        emit(b"]}")
        w.write(base64.b64encode(carry))
        w.write(b"</script><script>" + PI_JS.encode() + b"</script></body></html>")
    return out


EXPORT_CHILD = textwrap.dedent(r"""
    import json, re, sys, threading, time
    from sessiontree import Session
    src, out = sys.argv[1], sys.argv[2]
    def rss():
        with open("/proc/self/status") as f:
            return int(re.search(r"RssAnon:\s+(\d+)", f.read()).group(1)) / 1024
    base = rss(); peak = [base]; done = threading.Event()
    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss()); time.sleep(0.002)
    th = threading.Thread(target=sample, daemon=True); th.start()
    t = time.perf_counter()
    Session.open(src).export_html(out)
    dt = time.perf_counter() - t
    done.set(); th.join()
    print(json.dumps({"time": dt, "peak": peak[0], "base": base}))
""")


def measure_export(src: Path, out: Path) -> dict:
    r = subprocess.run(
        [sys.executable, "-c", EXPORT_CHILD, str(src), str(out)], check=True, capture_output=True, text=True
    )
    return json.loads(r.stdout)


def chromium() -> str:
    for c in (os.environ.get("SESSIONTREE_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium"):
        if c and os.path.exists(c):
            return c
    raise SystemExit("no chromium (apt-get install chromium)")


def _renderer_rss_mib() -> float:
    """Resident memory (VmRSS) of the Chromium renderer processes descending from this process."""
    me, parent, rss = os.getpid(), {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                parent[int(d)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if b"--type=renderer" not in f.read():
                    continue
            with open(f"/proc/{d}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"VmRSS:"):
                        rss[int(d)] = int(line.split()[1]) / 1024
        except (OSError, IndexError, ValueError):
            continue
    total = 0.0
    for pid, mib in rss.items():
        p, hops = pid, 0
        while p > 1 and hops < 12:
            p, hops = parent.get(p, 0), hops + 1
            if p == me:
                total += mib
                break
    return total


class _PeakRss:
    """Samples :func:`_renderer_rss_mib` every 50 ms in a thread; ``peak`` is the highest seen."""

    def __init__(self) -> None:
        import threading

        self.peak = 0.0
        self._stop = threading.Event()
        self._th = threading.Thread(target=self._run, daemon=True)
        self._th.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _renderer_rss_mib())
            self._stop.wait(0.05)

    def stop(self) -> float:
        self._stop.set()
        self._th.join()
        return self.peak


def measure_page(browser, html: Path, ready: str, marks: list[str], timeout: float) -> dict:
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("crash", lambda *_: errors.append("renderer crashed"))
    out: dict = {}
    rss = _PeakRss()
    try:
        t = time.perf_counter()
        page.goto(html.resolve().as_uri(), wait_until="commit", timeout=timeout * 1000)
        while not page.evaluate(f"!!({ready})"):
            if errors or time.perf_counter() - t > timeout:
                raise RuntimeError(errors[0] if errors else f"not ready after {timeout:.0f} s")
            time.sleep(0.05)
        out["wall"] = time.perf_counter() - t
        cdp = ctx.new_cdp_session(page)
        cdp.send("Performance.enable")
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        out["heap_ready"] = metrics.get("JSHeapUsedSize", 0) / 2**20
        for m in marks:
            out[m] = page.evaluate(f"(performance.getEntriesByName({m!r})[0] || {{startTime: null}}).startTime")
        fcp = "(performance.getEntriesByName('first-contentful-paint')[0] || {startTime: null}).startTime"
        for _ in range(40):  # the paint entry is reported a frame after the paint
            out["fcp"] = page.evaluate(fcp)
            if out["fcp"] is not None:
                break
            time.sleep(0.05)
        cdp.send("HeapProfiler.collectGarbage")
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        out["heap"] = metrics.get("JSHeapUsedSize", 0) / 2**20
    except Exception as exc:  # a page that cannot load is a result too
        out["error"] = str(exc).splitlines()[0][:160]
    finally:
        out["rss"] = rss.stop()
        ctx.close()
    return out


def fmt_ms(v) -> str:
    return "—" if v is None else (f"{v / 1000:.2f} s" if v >= 1000 else f"{v:.0f} ms")


def run(sizes: list[float], work: Path, timeout: float) -> list[dict]:
    from playwright.sync_api import sync_playwright

    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium(), args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        )
        blank = work / "blank.html"
        blank.write_text("<!DOCTYPE html><title>blank</title><p>blank</p><script>window.blankReady = true</script>")
        base = measure_page(browser, blank, "window.blankReady", [], timeout)
        blank.unlink()
        for mb in sizes:
            src = session_file(mb)
            ours, pi = work / f"view-{mb:g}.html", work / f"pi-{mb:g}.html"
            ex = measure_export(src, ours)
            t = time.perf_counter()
            write_pi_style(src, pi)
            pi_write = time.perf_counter() - t
            row = {
                "blank_rss": base.get("rss", 0.0),
                "mb": mb,
                "bytes": src.stat().st_size,
                "entries": sum(1 for _ in open(src, "rb")) - 1,
                "export": ex,
                "size": ours.stat().st_size,
                "pi_size": pi.stat().st_size,
                "pi_write": pi_write,
            }
            row["page"] = measure_page(
                browser,
                ours,
                "window.sessiontreeView && window.sessiontreeView.messagesReady",
                ["st-index", "st-tree", "st-messages"],
                timeout,
            )
            if "error" in row["page"]:
                browser.close()
                browser = p.chromium.launch(
                    executable_path=chromium(), args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
                )
            row["pi"] = measure_page(browser, pi, "window.piReady", ["pi-ready"], timeout)
            if "error" in row["pi"]:
                browser.close()
                browser = p.chromium.launch(
                    executable_path=chromium(), args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
                )
            print(json.dumps(row), flush=True)
            rows.append(row)
            ours.unlink()
            pi.unlink()
        browser.close()
    return rows


def section(rows: list[dict]) -> str:
    load = os.getloadavg()[0]
    sizes = ",".join(f"{r['mb']:g}" for r in rows)
    lines = [
        BEGIN,
        "## HTML view (`export-html`)",
        "",
        f"`python benches/html_report.py --sizes {sizes}` on "
        f"{os.cpu_count()} CPUs, load average {load:.1f} while measuring (other jobs shared the machine: "
        "times are indicative, ratios in the same run are what to compare). Sessions from "
        "`tests/tools/gen_session.py --seed 1`. Export: `Session.export_html` in a fresh process (peak "
        "RssAnon rise over the interpreter). Browser: headless Debian Chromium at 1280x800, one load "
        "each; times from navigation start; *index decoded*, *tree* and *messages* are the page's own marks "
        "(per-entry index decoded; tree pane drawn; the leaf's messages drawn); first paint is the "
        "browser's first contentful paint (for our page, its loading line); JS heap is `JSHeapUsedSize` when ready / after a GC; renderer is the peak "
        "resident memory (VmRSS) of the page's renderer process while it loaded. *Pi-style* is `benches/html_report.py:write_pi_style`: the "
        "session as one inline base64 JSON blob decoded and rendered at once, as Pi's `/export` does "
        "(a rebuild for comparison, not Pi's template).",
        "",
        "| session | entries | export | export RssAnon rise | HTML | Pi-style HTML | first paint | index decoded | tree | messages | JS heap | renderer | Pi-style first paint | Pi-style ready | Pi-style JS heap | Pi-style renderer |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ex, pg, pi = r["export"], r["page"], r["pi"]
        ours = ("failed: " + pg["error"]) if "error" in pg else None
        theirs = ("failed: " + pi["error"]) if "error" in pi else None
        lines.append(
            f"| {r['bytes'] / 2**20:.{0 if r['bytes'] >= 10 * 2**20 else 1}f} MiB | {r['entries']:,} | {ex['time']:.2f} s | {ex['peak'] - ex['base']:.0f} MiB | "
            f"{r['size'] / 2**20:.1f} MiB | {r['pi_size'] / 2**20:.1f} MiB | "
            + (
                f"{ours} | | | | | {pg['rss']:.0f} MiB |"
                if ours
                else f"{fmt_ms(pg['fcp'])} | {fmt_ms(pg['st-index'])} | {fmt_ms(pg['st-tree'])} | {fmt_ms(pg['st-messages'])} | "
                f"{pg['heap_ready']:.0f} / {pg['heap']:.0f} MiB | {pg['rss']:.0f} MiB |"
            )
            + (
                f" {theirs} | | | {pi['rss']:.0f} MiB |"
                if theirs
                else f" {fmt_ms(pi['fcp'])} | {fmt_ms(pi['pi-ready'])} | {pi['heap_ready']:.0f} / {pi['heap']:.0f} MiB | "
                f"{pi['rss']:.0f} MiB |"
            )
        )
    lines += [
        "",
        "The export reads each line twice, both in the core (issue 18): the digests (index chunks) and the "
        "gzip segments (libdeflate level 1), each worked on both cores with a few in flight while earlier "
        "ones are written (the segments with the GIL released); the segment bounds come from the index. "
        "The export section below times it against `pigz -1 -p 2`. The page "
        "decodes the index (ids, kinds, previews, usage) before the first tree paint and a 2 MiB segment "
        "only when an entry in it is shown or searched, so time to the tree grows with the entry count, "
        "not with the bytes of content.",
        END,
    ]
    return "\n".join(lines)


def write_section(text: str, path: Path) -> None:
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    if BEGIN in old and END in old:
        new = old[: old.index(BEGIN)] + text + old[old.index(END) + len(END) :]
    else:
        new = old.rstrip("\n") + "\n\n" + text + "\n"
    path.write_text(new)


def screenshot(out: Path, work: Path) -> Path:
    """The README's picture: the view of examples/session.jsonl at 1280x720, 256 colours."""
    from playwright.sync_api import sync_playwright
    from sessiontree import Session

    html = Session.open(ROOT / "examples" / "session.jsonl").export_html(work / "example.html")
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium(), args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        )
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.goto(html.resolve().as_uri())
        while not page.evaluate("!!(window.sessiontreeView && window.sessiontreeView.messagesReady)"):
            time.sleep(0.05)
        time.sleep(0.3)
        page.screenshot(path=str(out))
        browser.close()
    try:  # shrink: 256 colours (Pillow comes with matplotlib, the bench extra)
        from PIL import Image

        Image.open(out).convert("RGB").quantize(256).save(out, optimize=True)
    except ImportError:
        pass
    return out


# ---- --export-only (issue 18): the export against `pigz -1 -p 2` of the same file -----------

EXPORT_ONLY_CHILD = textwrap.dedent(r"""
    import json, resource, sys, time
    def cpu():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime
    t0 = time.perf_counter()
    from sessiontree import Session
    s = Session.open(sys.argv[1])
    t1 = time.perf_counter()
    c1 = cpu()
    s.export_html(sys.argv[2])
    t2 = time.perf_counter()
    print(json.dumps({"open": t1 - t0, "export": t2 - t1, "cpu": cpu() - c1}))
""")


def _children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed(cmd: list[str], stdout=subprocess.DEVNULL) -> tuple[float, str]:
    t = time.perf_counter()
    r = subprocess.run(cmd, check=True, stdout=stdout, text=stdout is subprocess.PIPE)
    return time.perf_counter() - t, (r.stdout or "")


def export_only(files: list[tuple[str, Path]], work: Path, rounds: int, baseline: str | None = None) -> list[dict]:
    """For each file: ``rounds`` rounds, each running (in this order, fresh processes) the
    export (``Session.open`` + ``export_html``; the child reports both), the CLI
    ``python -m sessiontree export-html`` (the whole process) and ``pigz -1 -p 2 -c``; the
    best of each. Ratios are to pigz's best in the same run. ``baseline``: another interpreter
    (one whose ``sessiontree`` is an older checkout) whose export is timed the same way, first
    in each round."""
    pigz = shutil.which("pigz")
    if pigz is None:
        raise SystemExit("pigz is not installed (apt-get install -y pigz)")
    rows = []
    for label, src in files:
        out = work / f"export-only-{src.stem}.html"
        gz = work / f"export-only-{src.stem}.gz"
        best = {k: float("inf") for k in ("export", "open", "cli", "pigz", "export_cpu", "pigz_cpu")}
        if baseline:
            best["baseline"] = float("inf")
        for _ in range(rounds):
            if baseline:
                _, text = _timed([baseline, "-c", EXPORT_ONLY_CHILD, str(src), str(out)], stdout=subprocess.PIPE)
                best["baseline"] = min(best["baseline"], json.loads(text)["export"])
            _, text = _timed([sys.executable, "-c", EXPORT_ONLY_CHILD, str(src), str(out)], stdout=subprocess.PIPE)
            child = json.loads(text)
            best["export"] = min(best["export"], child["export"])
            best["export_cpu"] = min(best["export_cpu"], child["cpu"])
            best["open"] = min(best["open"], child["open"])
            best["cli"] = min(
                best["cli"], _timed([sys.executable, "-m", "sessiontree", "export-html", str(src), "-o", str(out)])[0]
            )
            with open(gz, "wb") as fh:
                c = _children_cpu()
                best["pigz"] = min(best["pigz"], _timed([pigz, "-1", "-p", "2", "-c", str(src)], stdout=fh)[0])
                best["pigz_cpu"] = min(best["pigz_cpu"], _children_cpu() - c)
        rows.append(
            {
                "label": label,
                "bytes": src.stat().st_size,
                "html": out.stat().st_size,
                "gz": gz.stat().st_size,
                **best,
                "load": os.getloadavg(),
            }
        )
        out.unlink()
        gz.unlink()
    return rows


EXPORT_BEGIN, EXPORT_END = "<!-- html-export -->", "<!-- /html-export -->"


def write_export_section(table: str, path: Path) -> None:
    """The ``--export-only`` table between its own markers, after the HTML view section."""
    text = (
        EXPORT_BEGIN
        + "\n### Export at compression speed (issue 18): `python benches/html_report.py --export-only --sizes 10,100,1024`\n\n"
        + table
        + "\n"
        + EXPORT_NOTES
        + EXPORT_END
    )
    old = path.read_text()
    if EXPORT_BEGIN in old and EXPORT_END in old:
        new = old[: old.index(EXPORT_BEGIN)] + text + old[old.index(EXPORT_END) + len(EXPORT_END) :]
    elif END in old:
        k = old.index(END) + len(END)
        new = old[:k] + "\n\n" + text + old[k:]
    else:
        new = old.rstrip("\n") + "\n\n" + text + "\n"
    path.write_text(new)


EXPORT_NOTES = (
    "Each row: best of `--rounds` rounds, each running in turn (fresh processes) `Session.open` +"
    " `export_html` (the time of `export_html` alone), the CLI `python -m sessiontree export-html"
    " FILE -o OUT` (the whole process: interpreter, import, open, export) and `pigz -1 -p 2 -c"
    " FILE > OUT.gz`; the ratios are to pigz's best in the same run. Page cache warm (each file"
    " is read by every contender every round). *CPU*: user + system seconds of `export_html`"
    " (in the child) and of pigz (best of the rounds): on a machine with more runnable threads"
    " than cores the wall ratio also reflects how many threads each contender runs (pigz: two"
    " compressing and one writing), so the CPU ratio is the steadier figure there; on an idle"
    " machine both use the two cores and the wall ratio is the target's. Load average at the end"
    " of each row.\n"
)


def export_only_table(rows: list[dict]) -> str:
    cols = [
        "session",
        "export_html (after open)",
        "ratio to pigz",
        "CLI `export-html` (whole process)",
        "ratio to pigz",
        "`pigz -1 -p 2`",
        "HTML / file",
        "gzip / file",
        "CPU: export_html / pigz",
    ]
    base = any("baseline" in r for r in rows)
    if base:
        cols += ["baseline export_html", "its ratio to pigz"]
    cols.append("load average (1, 5, 15 min)")
    head = "| " + " | ".join(cols) + " |\n|" + "---:|" * (len(cols) - 1) + "---|\n"
    lines = [
        f"| {r['label']} | {r['export']:.2f} s | {r['export'] / r['pigz']:.2f}x | {r['cli']:.2f} s | "
        f"{r['cli'] / r['pigz']:.2f}x | {r['pigz']:.2f} s | {r['html'] / r['bytes']:.3f} | {r['gz'] / r['bytes']:.3f} | "
        f"{r['export_cpu']:.2f} / {r['pigz_cpu']:.2f} s = {r['export_cpu'] / max(r['pigz_cpu'], 1e-9):.2f}x | "
        + (f"{r['baseline']:.2f} s | {r['baseline'] / r['pigz']:.2f}x | " if base else "")
        + ", ".join(f"{x:.1f}" for x in r["load"])
        + " |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10,100", help="MiB, comma-separated (default 10,100; add 1024 for 1 GB)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md", help="the markdown file to update")
    ap.add_argument("--work", type=Path, default=None, help="folder for the HTML files (default: the bench dir)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds a page may take to load")
    ap.add_argument(
        "--screenshot", type=Path, default=None, help="only write the README picture (the example's view) to this PNG"
    )
    ap.add_argument(
        "--export-only",
        action="store_true",
        help="only time the export against `pigz -1 -p 2` (interleaved, best of --rounds) and print the table",
    )
    ap.add_argument("--rounds", type=int, default=3, help="rounds of --export-only (default 3)")
    ap.add_argument("--write", action="store_true", help="--export-only: also write its section of --out")
    ap.add_argument(
        "--baseline",
        default=None,
        help="--export-only: also time the export of this interpreter's sessiontree (an older checkout's venv python)",
    )
    ap.add_argument(
        "--files", default="", help="--export-only: these session files (comma-separated) instead of generated ones"
    )
    args = ap.parse_args(argv)
    from inputs import bench_dir

    work = args.work or bench_dir()
    work.mkdir(parents=True, exist_ok=True)
    if args.screenshot:
        print(f"wrote {screenshot(args.screenshot, work)}")
        return 0
    if args.export_only:
        if args.files:
            files = [(Path(f).name, Path(f)) for f in args.files.split(",") if f]
        else:
            files = [(f"{float(x):g} MiB", session_file(float(x))) for x in args.sizes.split(",") if x]
        table = export_only_table(export_only(files, work, args.rounds, args.baseline))
        print(table, end="")
        if args.write:
            write_export_section(table, args.out)
            print(f"wrote the export section of {args.out}")
        return 0
    rows = run([float(x) for x in args.sizes.split(",") if x], work, args.timeout)
    write_section(section(rows), args.out)
    print(f"wrote the HTML view section of {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
