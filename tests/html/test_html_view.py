"""Issue 19 items 32-36: the HTML view in headless Chromium, on a real corpus session
(``real/pimono-before-compaction.jsonl``, 2.3 MB, 1,002 entries) and a generated one with deep
branching (``gen_session.py``; ``SESSIONTREE_HTML_VIEW_MB``, default 8).

32 a search hit is shown in view, highlighted, with next/previous; 33 rows stay readable at any
depth (indentation capped, the depth shown); 34 selecting a tall message shows its top; 35 "Fold
chains" folds visibly (the selected entry's chain too); 36 settings entries read as words and a
tool result shown with its call gets no second card.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sessiontree import Session
from tests.html.test_html_export import CHROMIUM, GEN, ROOT, Page, make_branched, needs_browser

REAL = ROOT / "tests" / "corpus" / "real" / "pimono-before-compaction.jsonl"
VIEW_MB = float(os.environ.get("SESSIONTREE_HTML_VIEW_MB", "8"))

pytestmark = needs_browser


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        )
        yield b
        b.close()


@pytest.fixture(scope="module")
def real_html(tmp_path_factory):
    return Session.open(REAL).export_html(tmp_path_factory.mktemp("real") / "real.html")


@pytest.fixture(scope="module")
def gen_html(tmp_path_factory):
    d = tmp_path_factory.mktemp("gen")
    src = d / "gen.jsonl"
    subprocess.run(
        [sys.executable, str(GEN), "--megabytes", str(VIEW_MB), "--seed", "12", "--out", str(src)],
        check=True,
        capture_output=True,
    )
    return Session.open(src).export_html(d / "gen.html")


def _in_view(p: Page, sel: str, box: str) -> bool:
    """Whether the element ``sel`` is inside the visible rectangle of ``box`` (and the window)."""
    return p.js(
        f"""(() => {{
          const e = document.querySelector({sel!r}), b = document.querySelector({box!r});
          if (!e || !b) return false;
          const r = e.getBoundingClientRect(), q = b.getBoundingClientRect();
          return r.height > 0 && r.top >= q.top - 1 && r.bottom <= q.bottom + 1 && r.top >= 0 && r.bottom <= innerHeight;
        }})()"""
    )


def _settle(p: Page) -> None:
    p.js("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


# ---- 32 ------------------------------------------------------------------------------------


def test_a_search_hit_is_in_view_highlighted_with_next_and_previous(real_html, browser):
    p = Page(browser).open(real_html)
    try:
        p.page.fill("#st-q", "compaction")
        p.page.click("#st-search")
        p.until("window.sessiontreeView.searchDone")
        n = p.page.locator("#st-results .hit").count()
        assert n > 10
        assert _in_view(p, "#st-results", "body") and _in_view(p, "#st-hitnext", "body")
        assert p.page.inner_text("#st-hitpos") == f"1 / {n}"
        seen = []
        for step in ("first", "#st-hitnext", "#st-hitnext", "#st-hitprev"):
            if step != "first":
                p.page.click(step)
            k = p.js("window.sessiontreeView.hitAt")
            i = p.js(f"+document.querySelectorAll('#st-results .hit')[{k}].dataset.hit")
            assert i == k
            p.until("document.querySelector('#st-msgs mark.st-hit')")
            entry = p.js("window.sessiontreeView.api.selected()")
            p.until(f"window.sessiontreeView.rendered === {entry}")
            # the marked text is the needle, inside the selected entry, and on screen
            assert p.js("document.querySelector('#st-msgs mark.st-hit').textContent.toLowerCase()") == "compaction"
            assert p.js("!!document.querySelector('#st-msgs .sel mark.st-hit')")
            assert _in_view(p, "#st-msgs mark.st-hit", "#st-msgs"), step
            assert p.js("document.querySelector('#st-results .hit.cur') !== null")
            seen.append((k, entry))
        assert [k for k, _ in seen] == [0, 1, 2, 1]
        assert seen[1][1] == seen[3][1]
        # Enter in the box: the next hit of the same search
        p.page.focus("#st-q")
        p.page.keyboard.press("Enter")
        p.until("window.sessiontreeView.hitAt === 2")
        p.page.keyboard.press("Shift+Enter")
        p.until("window.sessiontreeView.hitAt === 1")
        assert p.errors == []
    finally:
        p.close()


def test_a_hit_in_hostile_text_is_marked_as_text_and_runs_nothing(tmp_path, browser):
    s, _ = make_branched(tmp_path, hostile=True)
    html = s.export_html(tmp_path / "h.html")
    p = Page(browser).open(html)
    try:
        p.page.fill("#st-q", "onerror")
        p.page.click("#st-search")
        p.until("window.sessiontreeView.searchDone")
        p.until("document.querySelector('#st-msgs mark.st-hit')")
        for _ in range(p.page.locator("#st-results .hit").count()):
            p.page.click("#st-hitnext")
            time.sleep(0.05)
        assert p.js("window.__pwned") is None
        assert p.js("document.querySelectorAll('#st-app script, #st-app img:not(.st-img), #st-app svg').length") == 0
        assert p.errors == []
    finally:
        p.close()


# ---- 33 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["real", "gen"])
def test_rows_are_readable_at_any_depth(which, real_html, gen_html, browser):
    p = Page(browser).open(real_html if which == "real" else gen_html, timeout=300)
    try:
        widths = p.js(
            "Array.from(document.querySelectorAll('#st-tree-inner .row:not([hidden]):not(.chain)'))"
            ".filter(r => r.getBoundingClientRect().bottom > 0 && r.getBoundingClientRect().top < innerHeight)"
            ".map(r => [r.querySelector('.pv').getBoundingClientRect().width, r.getBoundingClientRect().width])"
        )
        assert len(widths) > 10
        # every row on screen gives its preview a quarter of the row at least (before: 0 px for
        # ~92% of a deep session's rows)
        assert all(pv >= max(120, row / 4) for pv, row in widths), min(widths)
        if which == "gen":
            # the generated session branches deeper than the indentation goes: the depth is shown
            assert p.js("document.querySelectorAll('#st-tree-inner .row .dep').length") > 0
            assert p.js("document.querySelector('#st-tree-inner .row .dep').textContent").startswith("↳")
        assert p.errors == []
    finally:
        p.close()


# ---- 34 ------------------------------------------------------------------------------------


def test_selecting_a_tall_message_shows_its_top(real_html, browser):
    p = Page(browser).open(real_html)
    try:
        # the tallest message of the leaf's window, taller than the pane
        i = p.js(
            "(() => { let best = null, h = 0; for (const m of document.querySelectorAll('#st-msgs .m')) "
            "{ const r = m.getBoundingClientRect(); if (r.height > h) { h = r.height; best = +m.dataset.i; } } "
            "return h > document.querySelector('#st-msgs').clientHeight ? best : null; })()"
        )
        assert i is not None
        p.js(f"window.sessiontreeView.api.select({i})")
        p.until(f"window.sessiontreeView.rendered === {i}")
        _settle(p)
        off = p.js(
            f"document.querySelector('#st-msgs .m[data-i=\"{i}\"]').getBoundingClientRect().top"
            " - document.querySelector('#st-msgs').getBoundingClientRect().top"
        )
        assert 0 <= off <= 24, off
        # a click on its tree row does the same
        p.js("window.sessiontreeView.api.select(0)")
        p.until("window.sessiontreeView.rendered === 0")
        p.js(f"window.sessiontreeView.api.select({i})")
        p.page.locator(f'#st-tree-inner .row[data-i="{i}"]').click()
        p.until(f"window.sessiontreeView.rendered === {i}")
        _settle(p)
        assert _in_view(p, f'#st-msgs .m[data-i="{i}"] .h', "#st-msgs")
        assert p.errors == []
    finally:
        p.close()


# ---- 35 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["real", "gen"])
def test_fold_chains_folds_visibly_and_keeps_the_selection_in_view(which, real_html, gen_html, browser):
    p = Page(browser).open(real_html if which == "real" else gen_html, timeout=300)
    try:
        before = p.js("window.sessiontreeView.api.nrows()")
        entries = p.js("window.sessiontreeView.totals.all.n")
        assert before == entries
        p.page.click("#st-foldchains")
        _settle(p)
        after = p.js("window.sessiontreeView.api.nrows()")
        assert after < before / 5, (before, after)
        assert p.page.locator("#st-tree-inner .row.chain:not([hidden])").count() >= 1
        # what is on screen is what is left: no stale rows from before the fold
        assert len(p.rows()) <= after
        # the selected entry (the leaf) or the chain holding it is highlighted on screen
        assert _in_view(p, "#st-tree-inner .row.sel", "#st-tree")
        time.sleep(0.3)  # and it stays folded
        assert p.js("window.sessiontreeView.api.nrows()") == after
        p.page.click("#st-expand")
        _settle(p)
        assert p.js("window.sessiontreeView.api.nrows()") == before
        assert p.errors == []
    finally:
        p.close()


# ---- 36 ------------------------------------------------------------------------------------


def test_settings_entries_read_as_words_and_tool_results_are_not_repeated(real_html, browser):
    p = Page(browser).open(real_html)
    try:
        s = Session.open(REAL)
        levels = [e for e in s.entries() if e.type == "thinking_level_change"]
        assert levels
        e = levels[0]
        i = p.index_of(e.id)
        p.js(f"window.sessiontreeView.api.select({i})")
        p.until(f"window.sessiontreeView.rendered === {i}")
        box = p.page.inner_text(f'#st-msgs .m[data-i="{i}"]')
        assert f"thinking level: {e.raw['thinkingLevel']}" in box, box
        assert p.page.inner_text(f'#st-tree-inner .row[data-i="{i}"] .k').strip() == "thinking level"
        # tool results: shown inside their call's card, never a second "placeholder" card
        p.js("window.sessiontreeView.api.select(window.sessiontreeView.api.indexOf(" + repr(s.leaf_id) + "))")
        p.until("window.sessiontreeView.rendered >= 0")
        paired = p.js("Array.from(document.querySelectorAll('#st-msgs .res[data-r]')).map(r => +r.dataset.r)")
        assert len(paired) > 5
        for r in paired:
            assert p.page.locator(f'#st-msgs .m[data-i="{r}"]').count() == 0
        assert "shown with its call above" not in p.page.inner_text("#st-msgs")
        # selecting such a tool result highlights its place in the call's card
        r = paired[len(paired) // 2]
        p.js(f"window.sessiontreeView.api.select({r})")
        p.until(f"window.sessiontreeView.rendered === {r}")
        _settle(p)
        assert p.page.locator(f'#st-msgs .res.sel[data-r="{r}"]').count() == 1
        assert _in_view(p, f'#st-msgs .res[data-r="{r}"] .h', "#st-msgs")
        assert p.errors == []
    finally:
        p.close()


def test_screenshots_of_the_view(real_html, gen_html, browser, tmp_path):
    """Not an assertion of looks: the screenshots a reviewer looks at (SESSIONTREE_HTML_SHOTS=DIR
    keeps them), taken after a search and after folding; the page must have no errors."""
    out = Path(os.environ.get("SESSIONTREE_HTML_SHOTS", tmp_path))
    out.mkdir(parents=True, exist_ok=True)
    for name, html in (("real", real_html), ("gen", gen_html)):
        p = Page(browser).open(html, timeout=300)
        try:
            p.page.fill("#st-q", "compaction")
            p.page.click("#st-search")
            p.until("window.sessiontreeView.searchDone")
            p.until("document.querySelector('#st-msgs mark.st-hit')")
            _settle(p)
            p.page.screenshot(path=str(out / f"{name}-search.png"))
            p.page.click("#st-foldchains")
            _settle(p)
            p.page.screenshot(path=str(out / f"{name}-fold.png"))
            assert (out / f"{name}-fold.png").stat().st_size > 10_000
            assert p.errors == []
        finally:
            p.close()
