"""The HTML view (issue 12): the exported file itself, and the page in a real headless Chromium.

Browser tests use Debian's chromium (``apt-get install chromium``; ``.ci/run`` installs it) driven
by Playwright for Python with ``executable_path`` (no browser download). They skip, saying why,
only when no chromium binary or no playwright module is present.

Waiting is done by polling ``page.evaluate`` (DevTools evaluation): Playwright's
``wait_for_function`` evaluates strings, which the page's Content-Security-Policy forbids.
"""

from __future__ import annotations

import base64
import gzip
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from sessiontree import Session
from sessiontree.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent.parent
CORPUS = sorted((ROOT / "tests" / "corpus").rglob("*.jsonl"))
EXAMPLE = ROOT / "examples" / "session.jsonl"
GEN = ROOT / "tests" / "tools" / "gen_session.py"
#: Size of the generated session the browser loads (the issue asks for 100 MB; lower it on a
#: slow machine with SESSIONTREE_HTML_BIG_MB).
BIG_MB = float(os.environ.get("SESSIONTREE_HTML_BIG_MB", "100"))

NEEDLE = "PLANTED-NEEDLE-7f3a"
PWN = [
    "<script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=1">',
    "</script><script>window.__pwned=1</script><!--",
    '<a href="javascript:window.__pwned=1">click me</a>',
    "<svg onload=window.__pwned=1>",
    "\u2028\u2029 <!-- --> ]]>",
]
PWN_TEXT = " ".join(PWN)


def _chromium() -> str | None:
    for cand in (
        os.environ.get("SESSIONTREE_CHROMIUM"),
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
        "/usr/bin/chromium",
    ):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


# ==== the file (no browser) =========================================================


def _blocks(html: bytes, cls: bytes) -> list[tuple[bytes, bytes]]:
    return [
        (m.group(1), m.group(2))
        for m in re.finditer(rb'<script type="text/plain"([^>]*' + cls + rb"[^>]*)>([^<]*)</script>", html)
    ]


def _segments(html: bytes) -> bytes:
    """The segments' bytes in file order (the page holds them last-first)."""
    blocks = sorted(_blocks(html, b"st-seg"), key=lambda b: int(re.search(rb'data-o="(\d+)"', b[0]).group(1)))
    return b"".join(gzip.decompress(base64.b64decode(body)) for _, body in blocks)


def make_branched(tmp: Path, *, hostile: bool = False) -> tuple[Session, dict[str, str]]:
    """A session with an abandoned branch (holding NEEDLE), a compaction, a label and a name.

    u1 -> a1 -> t1 -> u2 -> a2 (NEEDLE)            abandoned
                 \\-> u3 -> a3 -> compaction(first kept u3) -> u4 -> label -> name   active
    """
    text = PWN_TEXT if hostile else ""
    s = Session.create("/work/proj" + (" " + text if hostile else ""), session_dir=tmp)
    ids: dict[str, str] = {}
    usage = {
        "input": 100,
        "output": 20,
        "cacheRead": 5,
        "cacheWrite": 0,
        "totalTokens": 125,
        "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0, "cacheWrite": 0, "total": 0.3},
    }
    ids["u1"] = s.append_message({"role": "user", "content": "first question " + text, "timestamp": 1})
    ids["a1"] = s.append_message(
        {
            "role": "assistant",
            "timestamp": 2,
            "usage": usage,
            "model": "m" + text,
            "provider": "p",
            "content": [
                {"type": "thinking", "thinking": "thinking it over " + text},
                {"type": "text", "text": "let me look " + text},
                {"type": "toolCall", "id": "call-1", "name": "bash" + text, "arguments": {"command": "ls " + text}},
            ],
        }
    )
    ids["t1"] = s.append_message(
        {
            "role": "toolResult",
            "toolCallId": "call-1",
            "toolName": "bash" + text,
            "isError": False,
            "timestamp": 3,
            "content": [
                {"type": "text", "text": "file.txt\n" * 2000 + text},
                {
                    "type": "image",
                    "mimeType": "text/html" if hostile else "image/png",
                    "data": base64.b64encode(text.encode()).decode()
                    if hostile
                    else "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
                },
            ],
        }
    )
    ids["u2"] = s.append_message({"role": "user", "content": "abandoned question", "timestamp": 4})
    ids["a2"] = s.append_message(
        {
            "role": "assistant",
            "timestamp": 5,
            "usage": usage,
            "content": [{"type": "text", "text": f"the {NEEDLE} is here " + text}],
        }
    )
    s.branch(ids["t1"])
    ids["u3"] = s.append_message({"role": "user", "content": "active question " + text, "timestamp": 6})
    ids["a3"] = s.append_message(
        {
            "role": "assistant",
            "timestamp": 7,
            "usage": usage,
            "content": [{"type": "text", "text": "active answer " + text}],
        }
    )
    ids["c"] = s.append_compaction("summary of the early part " + text, ids["u3"], 1234, usage=usage)
    ids["u4"] = s.append_message({"role": "user", "content": "after the compaction " + text, "timestamp": 8})
    ids["label"] = s.append_label_change(ids["u1"], "start-here " + text)
    ids["name"] = s.append_session_info("Planted test session " + text)
    if hostile:
        s.append_custom_message_entry("ext" + text, [{"type": "text", "text": text}], True)
    return s, ids


def test_export_returns_path_and_round_trips_the_file(tmp_path):
    s, _ = make_branched(tmp_path)
    out = s.export_html(tmp_path / "view.html")
    assert out == tmp_path / "view.html" and out.is_file()
    html = out.read_bytes()
    assert _segments(html) == s.path.read_bytes()
    csp = re.search(rb'http-equiv="Content-Security-Policy" content="([^"]*)"', html).group(1)
    assert b"default-src 'none'" in csp and b"'unsafe-inline'" not in csp and b"'unsafe-eval'" not in csp
    assert not list(tmp_path.glob(".view.html.*.tmp"))


def test_markup_in_the_data_cannot_close_a_script_element(tmp_path):
    s, _ = make_branched(tmp_path, hostile=True)
    html = s.export_html(tmp_path / "view.html").read_bytes()
    # every </script> closes one of ours: as many as there are <script openings
    assert html.count(b"</script") == html.count(b"<script")
    assert b"<!--" not in html and b"<script>window" not in html and b"<img" not in html
    assert b"\\u003cscript\\u003ewindow.__pwned" in html  # the name, cwd, label: escaped in the meta JSON
    assert _segments(html) == s.path.read_bytes()


def test_cli_export_html(tmp_path, capsys):
    s, _ = make_branched(tmp_path)
    out = tmp_path / "cli.html"
    assert cli_main(["export-html", str(s.path), "-o", str(out), "--json"]) == 0
    assert str(out) in capsys.readouterr().out and out.is_file()
    assert cli_main(["export-html", str(s.path)]) == 0  # default: FILE with .html
    assert s.path.with_suffix(".html").is_file()
    assert cli_main(["export-html", str(s.path), "-o", str(tmp_path / "no" / "dir.html")]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_in_memory_session_exports(tmp_path):
    s = Session.in_memory("/x")
    first = s.append_message({"role": "user", "content": "hello", "timestamp": 1})
    s.append_message({"role": "assistant", "content": [{"type": "text", "text": "hi"}], "timestamp": 2})
    html = s.export_html(tmp_path / "mem.html").read_bytes()
    data = _segments(html)
    assert data.splitlines()[1] == s._core.line(0) and first.encode() in data
    for i in range(len(s)):  # the page finds each entry at the core's offset
        off, length = s._core.record(i).offset, s._core.metrics([i])[0][0]
        assert data[off : off + length] == s._core.line(i)


@pytest.mark.parametrize("path", CORPUS, ids=[str(p.relative_to(ROOT / "tests" / "corpus")) for p in CORPUS])
def test_every_corpus_file_exports(tmp_path, path):
    try:
        s = Session.open(path)
    except Exception as exc:  # not a Pi session: nothing to export (the CLI says so)
        pytest.skip(f"not openable: {type(exc).__name__}")
    html = s.export_html(tmp_path / "c.html").read_bytes()
    assert _segments(html) == path.read_bytes()[: len(_segments(html))]
    assert html.count(b"</script") == html.count(b"<script")


@pytest.mark.parametrize("path", CORPUS, ids=[str(p.relative_to(ROOT / "tests" / "corpus")) for p in CORPUS])
def test_the_core_export_writes_the_digests_and_bytes_of_the_index(tmp_path, path, monkeypatch):
    """Issue 18: the export's index chunks (digested and compressed by the core, several batches
    in flight) are, in order, exactly ``Session.html_digest`` of each batch, and its segments
    (cut at entries' line starts from the index, compressed by the core, written last-first)
    are whole gzip members that together are the file's bytes, each starting where an entry's
    line starts. Small batches and pieces make many of each."""
    import sessiontree.html as h

    monkeypatch.setattr(h, "INDEX_BATCH", 5)
    monkeypatch.setattr(h, "SEGMENT_BYTES", 2048)
    try:
        s = Session.open(path)
    except Exception as exc:
        pytest.skip(f"not openable: {type(exc).__name__}")
    html = s.export_html(tmp_path / "c.html").read_bytes()
    chunks = [gzip.decompress(base64.b64decode(b, validate=True)) for _, b in _blocks(html, b"st-ix")]
    n = len(s)
    want = [s.html_digest(b0, min(n, b0 + 5), h.PREVIEW_CHARS) for b0 in range(0, n, 5)]
    assert chunks == want
    segs = _segment_members(html)
    data = path.read_bytes()
    assert b"".join(d for _, d in segs) == data[: s.indexed_bytes]
    starts = {0} | {s._core.record(i).offset for i in range(n)}
    assert all(o in starts for o, _ in segs)
    meta = orjson.loads(re.search(rb'id="st-meta">([^<]*)</script>', html).group(1))
    assert meta["segments"] == [o for o, _ in segs]
    order = [int(re.search(rb'data-o="(\d+)"', a).group(1)) for a, _ in _blocks(html, b"st-seg")]
    assert order == sorted(order, reverse=True)


# ==== the page, in Chromium ==========================================================

CHROMIUM = _chromium()
try:
    import playwright.sync_api  # noqa: F401

    _PW = None
except ImportError as exc:  # pragma: no cover - the test extra installs it
    _PW = str(exc)

needs_browser = pytest.mark.skipif(
    CHROMIUM is None or _PW is not None,
    reason=(
        "no chromium binary (apt-get install chromium; .ci/run installs it)"
        if CHROMIUM is None
        else f"playwright for Python is not installed ({_PW})"
    ),
)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        )
        yield b
        b.close()


class Page:
    """A page with its console errors, page errors and network requests recorded."""

    def __init__(self, browser, *, bypass_csp: bool = False):
        self.ctx = browser.new_context(
            bypass_csp=bypass_csp, accept_downloads=True, viewport={"width": 1280, "height": 800}
        )
        self.page = self.ctx.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on(
            "console",
            lambda m: self.errors.append(f"console.{m.type}: {m.text}") if m.type in ("error", "warning") else None,
        )
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))

    def open(self, html: Path, query: str = "", timeout: float = 120.0) -> "Page":
        self.url = html.resolve().as_uri()
        self.page.goto(self.url + query, wait_until="commit", timeout=timeout * 1000)
        self.until("window.sessiontreeView && window.sessiontreeView.messagesReady", timeout)
        return self

    def js(self, expr: str):
        return self.page.evaluate(expr)

    def until(self, expr: str, timeout: float = 60.0):
        end = time.monotonic() + timeout
        while True:
            v = self.js(f"!!({expr})")
            if v:
                return
            errs = self.js("window.sessiontreeView ? window.sessiontreeView.errors : []")
            assert not errs, errs
            assert time.monotonic() < end, f"timed out waiting for {expr}; errors: {self.errors}"
            time.sleep(0.05)

    def index_of(self, entry_id: str) -> int:
        return self.js(f"window.sessiontreeView.api.indexOf({entry_id!r})")

    def rows(self) -> list[int]:
        return self.js(
            "Array.from(document.querySelectorAll('#st-tree-inner .row:not([hidden])'))"
            ".map(r => r.dataset.i === '' ? -1 : +r.dataset.i)"
        )

    def close(self):
        self.ctx.close()


@pytest.fixture
def page(browser):
    p = Page(browser)
    yield p
    p.close()


def _no_network(p: Page) -> None:
    assert all(u.startswith(p.url) or u.startswith(("blob:", "data:")) for u in p.requests), p.requests


@needs_browser
def test_example_loads_clean_with_leaf_and_name(tmp_path, page):
    s = Session.open(EXAMPLE)
    html = s.export_html(tmp_path / "example.html")
    page.open(html)
    top = page.page.inner_text("#st-top")
    assert f"active leaf: {s.leaf_id}" in top
    name = s.session_name or f"Session {s.session_id}"
    assert page.page.inner_text("#st-name") == name
    assert page.js("document.title").startswith(name)
    # the leaf is selected and its message shown; only visible rows are in the DOM
    assert page.js("window.sessiontreeView.api.selected()") == page.index_of(s.leaf_id)
    assert page.js(f"!!document.querySelector('#st-msgs .m.sel[data-i=\"{page.index_of(s.leaf_id)}\"]')")
    assert page.errors == []
    _no_network(page)


@needs_browser
def test_search_folding_deep_links_download(tmp_path, browser):
    s, ids = make_branched(tmp_path)
    html = s.export_html(tmp_path / "b.html")
    p = Page(browser).open(html)
    try:
        assert p.page.inner_text("#st-name") == "Planted test session"
        assert f"active leaf: {s.leaf_id}" in p.page.inner_text("#st-sub")
        # totals: three assistant usages + the compaction's usage, one assistant abandoned
        totals = p.js("window.sessiontreeView.totals")
        assert totals["all"]["u"][4] == pytest.approx(1.2) and totals["abandoned"]["u"][4] == pytest.approx(0.3)
        assert totals["abandoned"]["n"] == 2
        # compaction boundary marked at the first kept entry, label inline
        u3 = p.index_of(ids["u3"])
        assert p.js(f"document.querySelector('.row[data-i=\"{u3}\"]').classList.contains('kept-b')")
        assert "start-here" in p.page.inner_text(f'.row[data-i="{p.index_of(ids["u1"])}"]')
        # per node and per subtree figures: the root's subtree holds everything ($1.20)
        tip = p.page.get_attribute(f'.row[data-i="{p.index_of(ids["u1"])}"]', "title")
        assert "subtree: 11 entries" in tip and "$1.20" in tip
        tip = p.page.get_attribute(f'.row[data-i="{p.index_of(ids["a1"])}"]', "title")
        assert "usage: in 100 · out 20 · cache 5 · $0.3000" in tip

        # search the abandoned branch: found, and the jump selects the entry and shows its path
        p.page.fill("#st-q", NEEDLE)
        p.page.select_option("#st-scope", "abandoned")
        p.page.click("#st-search")
        p.until("window.sessiontreeView.searchDone")
        hits = p.page.locator("#st-results .hit")
        assert hits.count() == 1 and NEEDLE in hits.first.inner_text()
        hits.first.click()
        a2 = p.index_of(ids["a2"])
        p.until(f"window.sessiontreeView.rendered === {a2}")
        assert p.js("window.sessiontreeView.api.viewLeaf()") == a2
        assert NEEDLE in p.page.inner_text(f'#st-msgs .m.sel[data-i="{a2}"]')
        assert p.page.locator(f'.row.sel[data-i="{a2}"]').count() == 1
        assert f"targetId={ids['a2']}" in p.js("location.search")
        # the same search on the active path finds nothing
        p.page.select_option("#st-scope", "active")
        p.page.click("#st-search")
        p.until("window.sessiontreeView.searchDone >= 2")
        assert p.page.locator("#st-results .hit").count() == 0
        # before compaction: u1..t1 on the active path
        p.page.fill("#st-q", "let me look")
        p.page.select_option("#st-scope", "before")
        p.page.click("#st-search")
        p.until("window.sessiontreeView.searchDone >= 3")
        assert p.page.locator("#st-results .hit").count() == 1

        # folding the branch point hides both subtrees' rows; unfolding brings them back
        t1 = p.index_of(ids["t1"])
        before = p.rows()
        assert a2 in before
        p.page.click(f'[data-fold="{t1}"]')
        after = p.rows()
        assert t1 in after and a2 not in after and u3 not in after
        p.page.click(f'[data-fold="{t1}"]')
        assert p.rows() == before
        # folding the single-child chain u3 -> ... -> name leaves its head, a marker and its tail
        p.page.click(f'[data-cfold="{u3}"]')
        chain = p.rows()
        assert u3 in chain and -1 in chain and p.index_of(ids["c"]) not in chain
        p.page.click(".row.chain")
        assert p.index_of(ids["c"]) in p.rows()

        # tool call paired with its result; long output cut with "show all"
        p.page.click(f'.row[data-i="{p.index_of(ids["a1"])}"]')
        p.until(f"window.sessiontreeView.rendered === {p.index_of(ids['a1'])}")
        call = p.page.locator("#st-msgs .call").first
        assert "file.txt" in call.inner_text()
        more = call.locator("button.more", has_text="show all")
        assert more.count() == 1
        more.click()
        assert call.inner_text().count("file.txt") >= 2000
        call.locator("button.more", has_text="show image").click()
        assert p.page.locator("#st-msgs img.st-img").count() == 1

        # jumping between prompts on the viewed path (still a2's: u1 before a1, u2 after it)
        p.page.click("#st-prevprompt")
        p.until(f"window.sessiontreeView.rendered === {p.index_of(ids['u1'])}")
        p.page.click("#st-nextprompt")
        p.until(f"window.sessiontreeView.rendered === {p.index_of(ids['u2'])}")
        p.page.keyboard.press("k")
        p.until(f"window.sessiontreeView.rendered === {p.index_of(ids['u1'])}")

        # the JSONL download is the original file, byte for byte
        with p.page.expect_download() as dl:
            p.page.click("#st-download")
        assert Path(dl.value.path()).read_bytes() == s.path.read_bytes()
        assert dl.value.suggested_filename == s.path.name
        assert p.errors == []
        _no_network(p)
    finally:
        p.close()

    # Pi's deep link: ?leafId=<abandoned leaf>&targetId=<entry on it>
    q = Page(browser).open(html, f"?leafId={ids['a2']}&targetId={ids['u2']}")
    try:
        a2, u2 = q.index_of(ids["a2"]), q.index_of(ids["u2"])
        assert q.js("window.sessiontreeView.api.viewLeaf()") == a2
        assert q.js("window.sessiontreeView.api.selected()") == u2
        assert q.page.locator(f'#st-msgs .m.sel[data-i="{u2}"]').count() == 1
        assert "not the active path" in q.page.inner_text("#st-msgs .pathinfo")
        assert q.errors == []
    finally:
        q.close()


@needs_browser
@pytest.mark.parametrize("bypass_csp", [False, True], ids=["with-csp", "csp-bypassed"])
def test_injected_markup_runs_nothing(tmp_path, browser, bypass_csp):
    """Hostile markup everywhere (name, cwd, label, text, thinking, tool names and arguments,
    results, an HTML 'image', a custom message) renders as text and runs nothing, even with
    the CSP bypassed (so the textContent discipline alone holds)."""
    s, ids = make_branched(tmp_path, hostile=True)
    html = s.export_html(tmp_path / "h.html")
    p = Page(browser, bypass_csp=bypass_csp).open(html)
    try:
        # open everything that renders content: every entry, thinking, images, show-all, search
        for i in range(len(s)):
            p.js(f"window.sessiontreeView.api.select({i})")
            p.until(f"window.sessiontreeView.rendered === {i}")
            p.js("document.querySelectorAll('#st-msgs details').forEach(d => d.open = true)")
            for b in p.page.locator("#st-msgs button.more").all():
                if b.is_visible():
                    b.click()
        p.page.fill("#st-q", "<script>")
        p.page.click("#st-search")
        p.until("window.sessiontreeView.searchDone")
        assert p.page.locator("#st-results .hit").count() >= 5
        p.page.locator("#st-results .hit").first.click()
        time.sleep(0.2)
        assert p.js("window.__pwned") is None
        assert (
            p.js(
                "document.querySelectorAll('#st-app script, #st-app img:not(.st-img), #st-app svg, "
                "#st-app a[href], #st-app iframe').length"
            )
            == 0
        )
        assert "<script>window.__pwned=1</script>" in p.page.inner_text("#st-msgs") + p.page.inner_text("#st-results")
        assert p.page.inner_text("#st-name").startswith("Planted test session <script>")
        assert p.errors == []
        _no_network(p)
    finally:
        p.close()


@needs_browser
def test_every_corpus_file_loads_in_the_browser(tmp_path, browser):
    p = Page(browser)
    loaded = 0
    try:
        for path in CORPUS:
            try:
                s = Session.open(path)
            except Exception:
                continue
            html = s.export_html(tmp_path / (path.stem + ".html"))
            p.errors.clear()
            p.open(html)
            sub = p.page.inner_text("#st-sub")
            assert f"{len(s)} entries" in sub, path
            if s.leaf_id is not None:
                assert f"active leaf: {s.leaf_id}" in sub, path
            assert p.errors == [], (path, p.errors)
            loaded += 1
    finally:
        p.close()
    assert loaded >= 50


@needs_browser
def test_generated_big_session(tmp_path, browser):
    """A generated session of BIG_MB MiB with a string planted in an abandoned branch."""
    src = tmp_path / "big.jsonl"
    subprocess.run(
        [sys.executable, str(GEN), "--megabytes", str(BIG_MB), "--seed", "12", "--out", str(src)],
        check=True,
        capture_output=True,
    )
    s = Session.open(src)
    leaf = s.leaf_id
    early = s.get_branch()[len(s.get_branch()) // 3].id
    s.branch(early)
    planted = s.append_message({"role": "user", "content": f"needle {NEEDLE} deep down", "timestamp": 1})
    s.branch(leaf)
    new_leaf = s.append_message({"role": "user", "content": "back on the active path", "timestamp": 2})
    s.close()
    s = Session.open(src)
    assert s.leaf_id == new_leaf
    t0 = time.perf_counter()
    html = s.export_html(tmp_path / "big.html")
    export_s = time.perf_counter() - t0
    assert html.stat().st_size < src.stat().st_size  # compressed
    assert b"".join(d for _, d in _segment_members(html.read_bytes())) == src.read_bytes()
    p = Page(browser).open(html, timeout=300)
    try:
        assert f"active leaf: {new_leaf}" in p.page.inner_text("#st-sub")
        # virtualized: a screenful of rows in the DOM, not one per entry
        assert len(p.rows()) < 200 < len(s)
        p.page.fill("#st-q", NEEDLE)
        p.page.select_option("#st-scope", "abandoned")
        p.page.click("#st-search")
        p.until("window.sessiontreeView.searchDone", timeout=300)
        hits = p.page.locator("#st-results .hit")
        assert hits.count() == 1
        hits.first.click()
        i = p.index_of(planted)
        p.until(f"window.sessiontreeView.rendered === {i}", timeout=120)
        assert NEEDLE in p.page.inner_text(f'#st-msgs .m.sel[data-i="{i}"]')
        assert p.page.locator(f'.row.sel[data-i="{i}"]').count() == 1
        assert p.errors == []
    finally:
        p.close()
    print(f"{BIG_MB} MiB: export {export_s:.1f}s, html {html.stat().st_size / 2**20:.1f} MiB")


def _odd_session(path: Path) -> Path:
    """Entries of shapes nothing expects, and a line longer than a segment."""
    deep = "[" * 3000 + "]" * 3000
    lines = [
        '{"type":"session","version":3,"id":"odd","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/x"}',
        '{"type":"message","id":"m1","parentId":null,"timestamp":"garbage","message":{"role":"user","content":42}}',
        '{"type":"message","id":"m2","parentId":"m1","timestamp":"+275760-09-13T00:00:00.001Z","message":'
        '{"role":"assistant","content":[{"type":"toolCall","id":"k","name":{"x":1}},null,7],"usage":{"input":"9","cost":"x"}}}',
        '{"type":"message","id":"m3","parentId":"m2","timestamp":"2026-01-01T00:00:01.000Z","message":'
        '{"role":{"evil":true},"content":"role is an object"}}',
        '{"type":"custom","id":"m4","parentId":"m3","timestamp":"2026-01-01T00:00:02.000Z","customType":"deep","data":'
        + deep
        + "}",
        '{"type":"message","id":"m5","parentId":"m4","timestamp":"2026-01-01T00:00:03.000Z","message":'
        '{"role":"user","content":[{"type":"text","text":"big number 1e400 and a lone \\ud800 surrogate","n":1e400}]}}',
        '{"type":"message","id":"m6","parentId":"m5","timestamp":"2026-01-01T00:00:04.000Z","message":'
        '{"role":"toolResult","toolCallId":"k","toolName":"read","content":[{"type":"text","text":"'
        + "long line " * 3000
        + 'END-OF-LONG"}]}}',
        '{"type":"label","id":"m7","parentId":"m6","timestamp":"2026-01-01T00:00:05.000Z","targetId":["not","a","string"],"label":{"o":1}}',
        "this line is not JSON",
        '{"type":"message","id":"m8","parentId":"m7","timestamp":"2026-01-01T00:00:06.000Z","message":'
        '{"role":"user","content":[{"type":"image","mimeType":"image/png","data":"!!not base64!!"}]}}',
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_segments_never_split_a_line(tmp_path, monkeypatch):
    import sessiontree.html as h

    monkeypatch.setattr(h, "SEGMENT_BYTES", 4096)
    src = _odd_session(tmp_path / "odd.jsonl")
    html = Session.open(src).export_html(tmp_path / "odd.html").read_bytes()
    blocks = _blocks(html, b"st-seg")
    offsets = [int(re.search(rb'data-o="(\d+)"', a).group(1)) for a, _ in blocks]
    assert offsets == sorted(offsets, reverse=True)  # last-first
    segs = [gzip.decompress(base64.b64decode(b)) for _, b in reversed(blocks)]
    assert len(segs) >= 3 and b"".join(segs) == src.read_bytes()
    assert all(seg.endswith(b"\n") for seg in segs)


def _segment_members(html: bytes) -> list[tuple[int, bytes]]:
    """``(offset, bytes)`` of every segment in file order, each checked to be exactly one
    complete gzip member (a truncated stream is what the page's DecompressionStream rejects)."""
    import zlib

    out = []
    for attrs, body in _blocks(html, b"st-seg"):
        d = zlib.decompressobj(31)
        data = d.decompress(base64.b64decode(body, validate=True))
        assert d.eof and not d.unused_data and not d.unconsumed_tail, attrs
        out.append((int(re.search(rb'data-o="(\d+)"', attrs).group(1)), data))
    return sorted(out)


@pytest.mark.parametrize("durability", ["none", "flush", "fsync"])
def test_segments_of_a_session_just_appended_to_are_the_file(tmp_path, monkeypatch, durability):
    """Exported while entries are buffered (``durability="none"``) or held in the store's
    in-memory tail (past the fold threshold too): every segment is a whole gzip member ending at
    a line end, the meta lists their offsets, and together they are the file's bytes, all of them."""
    import sessiontree.html as h

    monkeypatch.setattr(h, "SEGMENT_BYTES", 65536)
    src = tmp_path / "s.jsonl"
    shutil.copy(EXAMPLE, src)
    s = Session.open(src, durability=durability)
    for k in range(2500):  # ~2.5 MB: past the store's 1 MiB fold of appended lines
        s.append_message({"role": "user", "content": f"turn {k} " + "z" * (k % 1500), "timestamp": k})
    html = s.export_html(tmp_path / "view.html").read_bytes()
    on_disk = src.read_bytes()
    assert len(on_disk) == s.indexed_bytes  # the export wrote out what was buffered
    segs = _segment_members(html)
    meta = orjson.loads(re.search(rb'id="st-meta">([^<]*)</script>', html).group(1))
    assert meta["segments"] == [o for o, _ in segs] and len(segs) >= 30
    assert all(o == sum(len(d) for _, d in segs[:k]) for k, (o, _) in enumerate(segs))
    assert all(d.endswith(b"\n") for _, d in segs)
    assert b"".join(d for _, d in segs) == on_disk
    assert re.search(rb'id="st-end">\{"segments":(\d+),"bytes":(\d+)\}', html).groups() == (
        str(len(segs)).encode(),
        str(len(on_disk)).encode(),
    )
    s.close()


@needs_browser
def test_odd_shapes_render_without_errors(tmp_path, browser, monkeypatch):
    import sessiontree.html as h

    monkeypatch.setattr(h, "SEGMENT_BYTES", 4096)
    src = _odd_session(tmp_path / "odd.jsonl")
    s = Session.open(src)
    html = s.export_html(tmp_path / "odd.html")
    p = Page(browser).open(html)
    try:
        for i in range(len(s)):
            p.js(f"window.sessiontreeView.api.select({i})")
            p.until(f"window.sessiontreeView.rendered === {i}")
        assert "END-OF-LONG" not in p.page.inner_text("#st-msgs")  # cut ...
        p.js(f"window.sessiontreeView.api.select({p.index_of('m6')})")
        p.until(f"window.sessiontreeView.rendered === {p.index_of('m6')}")
        p.page.locator("#st-msgs button.more", has_text="show all").first.click()
        assert "END-OF-LONG" in p.page.inner_text("#st-msgs")  # ... until "show all"
        p.js(f"window.sessiontreeView.api.select({p.index_of('m8')})")
        p.until(f"window.sessiontreeView.rendered === {p.index_of('m8')}")
        p.page.locator("#st-msgs button.more", has_text="show image").click()
        assert "could not be decoded" in p.page.inner_text("#st-msgs")
        # the page searches what the CLI searches: the core's JSON reader refuses the line with
        # the lone surrogate escape, so neither finds it (docs/search.md, "In the HTML view")
        p.page.fill("#st-q", "surrogate")
        p.page.click("#st-search")
        p.until("window.sessiontreeView.searchDone")
        assert p.page.locator("#st-results .hit").count() == len(s.search("surrogate", index_cache=False).hits) == 0
        p.page.fill("#st-q", "big number")
        p.page.click("#st-search")
        p.until("window.sessiontreeView.searchDone >= 2")
        assert p.page.locator("#st-results .hit").count() == len(s.search("big number", index_cache=False).hits)
        assert p.js("window.sessiontreeView.errors") == [] and p.errors == []
    finally:
        p.close()


@needs_browser
def test_the_html_benchmark_runs(tmp_path):
    """benches/html_report.py end to end on a tiny session (CI runs every benchmark once)."""
    md = tmp_path / "bm.md"
    env = dict(os.environ, SESSIONTREE_BENCH_DIR=str(tmp_path / "inputs"))
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benches" / "html_report.py"),
            "--sizes",
            "0.5",
            "--out",
            str(md),
            "--work",
            str(tmp_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    text = md.read_text()
    assert "<!-- html-view -->" in text and "<!-- /html-view -->" in text
    row = [ln for ln in text.splitlines() if ln.startswith("| 0.5 MiB |")]
    assert len(row) == 1 and "failed" not in row[0], text


@pytest.mark.parametrize("path", CORPUS, ids=[str(p.relative_to(ROOT / "tests" / "corpus")) for p in CORPUS])
def test_digest_usage_matches_usage_totals(path):
    """The page's usage per entry (rust/src/digest.rs) sums to what sessiontree.usage counts
    (Pi's get_session_stats rules, the one home of that rule) on every corpus file; the token
    estimate per entry is the cut-point search's (Index.estimate_tokens)."""
    import json
    import math

    try:
        s = Session.open(path)
    except Exception as exc:
        pytest.skip(f"not openable: {type(exc).__name__}")
    if s.needs_migration:
        pytest.skip("legacy file: entries are migrated in Python, the digest reads raw lines")
    n = len(s)
    cols = json.loads(s.html_digest(0, n, 80))
    assert len(cols["id"]) == n
    totals = s.usage_totals()
    sums = [0.0] * 5
    for u in cols["u"]:
        if u:
            for f in range(5):
                sums[f] += math.nan if u[f] is None else u[f]
    for f, want in enumerate([totals.input, totals.output, totals.cache_read, totals.cache_write, totals.cost]):
        if not math.isnan(want):
            assert sums[f] == pytest.approx(want), (f, path)
    est = s._core.estimate_tokens(list(range(n)))
    for i in range(n):
        if cols["k"][i].startswith("message:") and est[i] is not None and cols["e"][i] is not None:
            assert cols["e"][i] == est[i], (i, path)


def test_a_file_that_shrank_is_a_typed_error_and_writes_nothing(tmp_path):
    from sessiontree.errors import SessionFileChangedError

    s, _ = make_branched(tmp_path)
    s.close()
    s = Session.open(s.path)
    data = s.path.read_bytes()
    s.path.write_bytes(data[: len(data) // 2])
    with pytest.raises(SessionFileChangedError):
        s.export_html(tmp_path / "gone.html")
    assert not (tmp_path / "gone.html").exists() and not list(tmp_path.glob(".gone.html.*"))


class _StallingServer:
    """Serves one page over loopback HTTP: the bytes up to ``cut``, then nothing until
    :meth:`release` (as a slow disk or a loaded machine delivers a big page to the parser)."""

    def __init__(self, body: bytes, cut: int):
        import http.server
        import threading

        self.go = threading.Event()
        srv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the stdlib's name
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[:cut])
                self.wfile.flush()
                srv.go.wait(60)
                self.wfile.write(body[cut:])

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/view.html"

    def release(self) -> None:
        self.go.set()

    def close(self) -> None:
        self.go.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@needs_browser
def test_a_segment_still_being_parsed_is_waited_for(tmp_path, browser, monkeypatch):
    """The page reads a segment only once the parser has its whole text: the bug was reading a
    ``<script class="st-seg">`` element as soon as it existed, while a loaded machine still
    parsed its base64 ("Compressed input was truncated" from DecompressionStream)."""
    import sessiontree.html as h

    monkeypatch.setattr(h, "SEGMENT_BYTES", 16384)
    src = tmp_path / "s.jsonl"
    shutil.copy(EXAMPLE, src)
    s = Session.open(src)
    for k in range(200):
        s.append_message({"role": "user", "content": f"filler {k} " + "y" * 300, "timestamp": k})
    leaf = s.append_message({"role": "user", "content": f"the leaf says {NEEDLE}", "timestamp": 999})
    html = s.export_html(tmp_path / "view.html").read_bytes()
    s.close()
    # stall in the middle of the first segment written (the file's end, holding the leaf), on a
    # base64 quantum so that what the page sees is valid base64 of a truncated gzip stream
    first = next(re.finditer(rb'<script type="text/plain" class="st-seg" id="g(\d+)"[^>]*>', html))
    body_end = html.index(b"</script>", first.end())
    cut = first.end() + (body_end - first.end()) // 2 // 4 * 4
    srv = _StallingServer(html, cut)
    p = Page(browser)
    try:
        p.page.goto(srv.url, wait_until="commit", timeout=60000)
        p.until("window.sessiontreeView && window.sessiontreeView.ready", timeout=60)
        assert p.js(f"!!document.getElementById('g{int(first.group(1))}')")  # the element is there, half-parsed
        time.sleep(1.0)  # the page wants the leaf's segment now
        assert not p.js("window.sessiontreeView.messagesReady")
        srv.release()
        p.until("window.sessiontreeView.messagesReady", timeout=60)
        i = p.index_of(leaf)
        shown = p.page.inner_text(f'#st-msgs .m.sel[data-i="{i}"]')
        assert NEEDLE in shown and "shown raw" not in shown, (shown, p.errors)
        p.page.fill("#st-q", NEEDLE)
        p.page.click("#st-search")
        p.until("window.sessiontreeView.searchDone")
        assert p.page.locator("#st-results .hit").count() == 1
        assert p.js("window.sessiontreeView.errors") == [] and p.errors == []
    finally:
        p.close()
        srv.close()


@pytest.mark.skipif(shutil.which("pigz") is None, reason="pigz is not installed (apt-get install -y pigz)")
def test_the_export_only_benchmark_runs_and_writes_its_section(tmp_path, capsys):
    """``benches/html_report.py --export-only`` (issue 18) on the example: one round of each
    contender, the table printed with its ratios, and its own marked section written after the
    HTML view's (the rest of the file kept)."""
    sys.path.insert(0, str(ROOT / "benches"))
    try:
        import html_report
    finally:
        sys.path.pop(0)
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n<!-- html-view -->\nview\n<!-- /html-view -->\n\n## Other\nkept\n")
    args = ["--export-only", "--rounds", "1", "--files", str(EXAMPLE), "--work", str(tmp_path), "--write"]
    assert html_report.main(args + ["--out", str(doc)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| session.jsonl |"))
    assert re.search(r"\| [\d.]+x \|", row)
    text = doc.read_text()
    assert text.index("<!-- /html-view -->") < text.index("<!-- html-export -->") < text.index("## Other")
    assert "| session.jsonl |" in text and "kept" in text
    assert html_report.main(args + ["--out", str(doc)]) == 0  # rewritten in place, not added twice
    assert doc.read_text().count("<!-- html-export -->") == 1


@pytest.mark.parametrize("version,expected", [(3, 0), (2, 100)])
def test_the_pages_estimate_of_a_hook_message_follows_the_files_version(version, expected):
    """Pi 1.6 reads a v2 file's ``hookMessage`` message as ``custom`` (``migrateV2ToV3``: its
    content counts); in a v3 file the role is one Pi's ``estimateTokens`` has no case for (0).
    The page's estimate is the session's (``Session.entry_metrics``), by the file's version."""
    header = {"type": "session", "version": version, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}
    entries = [
        {"type": "message", "id": "u", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z"}
        | {"message": {"role": "user", "content": "hello there", "timestamp": 0}},
        {"type": "message", "id": "h", "parentId": "u", "timestamp": "2026-01-01T00:00:01.000Z"}
        | {"message": {"role": "hookMessage", "content": "x" * 400, "timestamp": 0}},
    ]
    s = Session.from_bytes(b"".join(orjson.dumps(e) + b"\n" for e in [header, *entries]))
    page = orjson.loads(s.html_digest(0, len(s), 40))["e"]
    assert s.entry_metrics().tokens == [3, expected]
    assert page == [3, expected]
