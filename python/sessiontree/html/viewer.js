/* sessiontree HTML view. Session content is untrusted: it is only ever set as textContent
   (or as a blob: URL of an image block), never parsed as HTML. */
(function () {
  'use strict';
  const doc = document;
  const $ = (id) => doc.getElementById(id);
  const ROWH = 22, CLIP = 4000, RESULTS_MAX = 500, WINDOW = 60;

  function el(tag, cls, text) {
    const e = doc.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function b64(s) {
    const bin = atob(s), n = bin.length, u = new Uint8Array(n);
    for (let i = 0; i < n; i++) u[i] = bin.charCodeAt(i);
    return u;
  }
  // one piped stream: a bad or truncated input rejects the promise returned (no write or close
  // promise is left to reject unhandled)
  async function gunzip(u8) {
    const out = new Response(new Blob([u8]).stream().pipeThrough(new DecompressionStream('gzip')));
    return new Uint8Array(await out.arrayBuffer());
  }
  const utf8 = new TextDecoder('utf-8');
  const fmtInt = (x) => (x >= 1e6 ? (x / 1e6).toFixed(2) + 'M' : x >= 1e4 ? (x / 1e3).toFixed(1) + 'k' : String(Math.round(x)));
  const fmtCost = (x) => '$' + (x >= 100 ? x.toFixed(0) : x >= 1 ? x.toFixed(2) : x.toFixed(4));
  const nextFrame = () => new Promise((r) => setTimeout(r, 0));

  const meta = JSON.parse($('st-meta').textContent);
  const N = meta.n;
  const S = (window.sessiontreeView = { ready: false, errors: [] });

  // ---- columns ------------------------------------------------------------------------
  const ID = new Array(N), PREV = new Array(N), REF = new Array(N);
  const KIND = new Uint16Array(N), KINDS = [], KINDOF = new Map();
  const OFF = new Float64Array(N), LEN = new Float64Array(N), TS = new Float64Array(N);
  const EST = new Float64Array(N).fill(NaN), U = new Float64Array(N * 5).fill(NaN), HASU = new Uint8Array(N);
  const IDX = new Map();
  let PARENT, START, KIDS, ROOTS;

  async function loadIndex() {
    let base = 0;
    for (const node of doc.querySelectorAll('script.st-ix')) {
      const c = JSON.parse(utf8.decode(await gunzip(b64(node.textContent))));
      const m = c.id.length;
      for (let j = 0; j < m; j++) {
        const i = base + j;
        const id = c.id[j];
        ID[i] = id; PREV[i] = c.p[j]; REF[i] = c.r[j];
        if (typeof id === 'string') IDX.set(id, i);
        let k = KINDOF.get(c.k[j]);
        if (k === undefined) { k = KINDS.length; KINDS.push(c.k[j]); KINDOF.set(c.k[j], k); }
        KIND[i] = k;
        OFF[i] = c.o[j]; LEN[i] = c.l[j]; TS[i] = c.t[j] === null ? NaN : c.t[j];
        if (c.e[j] !== null) EST[i] = c.e[j];
        const u = c.u[j];
        if (u) { HASU[i] = 1; for (let f = 0; f < 5; f++) U[i * 5 + f] = u[f] === null ? NaN : u[f]; }
      }
      base += m;
    }
    const t = await gunzip(b64($('st-treedata').textContent));
    const dv = new Uint32Array(t.buffer, t.byteOffset, t.byteLength >> 2);
    const nr = dv[0], ns = dv[1], nk = dv[2];
    ROOTS = dv.subarray(3, 3 + nr); START = dv.subarray(3 + nr, 3 + nr + ns); KIDS = dv.subarray(3 + nr + ns, 3 + nr + ns + nk);
    PARENT = new Int32Array(N).fill(-1);
    for (let p = 0; p + 1 < START.length; p++) for (let k = START[p]; k < START[p + 1]; k++) PARENT[KIDS[k]] = p;
  }
  const nKids = (i) => (i + 1 < START.length ? START[i + 1] - START[i] : 0);
  const kind = (i) => KINDS[KIND[i]];
  function kindClass(i) {
    const k = kind(i);
    if (k === 'message:user') return 'user';
    if (k === 'message:assistant') return 'assistant';
    if (k === 'message:toolResult' || k === 'message:bashExecution') return 'tool';
    return k.replace(/[^a-z_]/gi, '_');
  }
  const SHORT = { 'message:user': 'user', 'message:assistant': 'assistant', 'message:toolResult': 'tool result',
    'message:bashExecution': 'bash', 'branch_summary': 'branch summary', 'thinking_level_change': 'thinking level',
    'model_change': 'model', 'session_info': 'name', 'custom_message': 'custom msg', 'context_edit': 'context edit' };
  // what a settings entry's preview is, in words: "thinking level: high", "model: anthropic/claude-…"
  const META = { thinking_level_change: 'thinking level', model_change: 'model', session_info: 'session name',
    label: 'label', custom: 'custom', context_edit: 'context edit' };
  const shortKind = (i) => SHORT[kind(i)] || kind(i);

  // ---- tree order, sums, paths ---------------------------------------------------------
  let PRE, IND, SUBN, POS, CHL, BEFORE, ONACT, ONVIEW, KEPT;
  const SUM = { est: null, u: null };
  let activeLeaf = -1, viewLeaf = -1, selected = -1, actPath = [], viewPath = [];
  const FOLD = new Uint8Array(N), CFOLD = new Uint8Array(N);

  function buildOrder() {
    PRE = new Int32Array(N); IND = new Uint16Array(N); POS = new Int32Array(N).fill(-1);
    const seen = new Uint8Array(N); let n = 0;
    const stack = [];
    for (let r = ROOTS.length - 1; r >= 0; r--) stack.push(ROOTS[r], 0);
    while (stack.length) {
      const ind = stack.pop(), i = stack.pop();
      if (seen[i]) continue;
      seen[i] = 1; POS[i] = n; PRE[n++] = i; IND[i] = Math.min(ind, 65535);
      const nk = nKids(i), ci = nk > 1 ? ind + 1 : ind;
      for (let k = START[i + 1] - 1; k >= START[i]; k--) stack.push(KIDS[k], ci);
    }
    PRE = PRE.subarray(0, n);
    // subtree sizes (in preorder), sums and single-child chain lengths, bottom-up
    SUBN = new Int32Array(N); CHL = new Int32Array(N);
    SUM.est = new Float64Array(N); SUM.u = new Float64Array(N * 5);
    for (let k = n - 1; k >= 0; k--) {
      const i = PRE[k];
      SUBN[i] += 1;
      if (!isNaN(EST[i])) SUM.est[i] += EST[i];
      for (let f = 0; f < 5; f++) { const v = U[i * 5 + f]; if (v === v) SUM.u[i * 5 + f] += v; }
      if (nKids(i) === 1) { const c = KIDS[START[i]]; if (PARENT[c] === i && POS[c] === k + 1) CHL[i] = CHL[c] + 1; }
      const p = PARENT[i];
      if (p >= 0 && POS[p] >= 0 && POS[p] < k) {
        SUBN[p] += SUBN[i]; SUM.est[p] += SUM.est[i];
        for (let f = 0; f < 5; f++) SUM.u[p * 5 + f] += SUM.u[i * 5 + f];
      }
    }
    // compaction boundaries: firstKeptEntryId of each compaction
    KEPT = new Map();
    for (let i = 0; i < N; i++) if (kind(i) === 'compaction' && typeof REF[i] === 'string') {
      const t = IDX.get(REF[i]); if (t !== undefined) KEPT.set(t, i);
    }
  }
  function pathTo(i) {
    const out = [], seen = new Set();
    while (i >= 0 && !seen.has(i)) { seen.add(i); out.push(i); i = PARENT[i]; }
    return out.reverse();
  }
  function setActive() {
    activeLeaf = meta.leaf === null || meta.leaf === undefined ? -1 : meta.leaf;
    actPath = activeLeaf >= 0 ? pathTo(activeLeaf) : [];
    ONACT = new Uint8Array(N); for (const i of actPath) ONACT[i] = 1;
    // before the latest compaction on the active path: what the model no longer sees
    BEFORE = new Uint8Array(N);
    for (let k = actPath.length - 1; k >= 0; k--) {
      const c = actPath[k];
      if (kind(c) !== 'compaction') continue;
      const fk = IDX.get(REF[c]);
      for (let j = 0; j < k; j++) { if (actPath[j] === fk) break; BEFORE[actPath[j]] = 1; }
      break;
    }
  }
  function setView(leaf) {
    viewLeaf = leaf;
    viewPath = leaf >= 0 ? pathTo(leaf) : [];
    ONVIEW = new Uint8Array(N); for (const i of viewPath) ONVIEW[i] = 1;
  }
  function leafBelow(i) {
    if (ONACT[i]) return activeLeaf;
    let guard = 0;
    while (nKids(i) > 0 && guard++ < N) i = KIDS[START[i + 1] - 1];
    return i;
  }
  function sumOf(list) {
    const s = { n: 0, est: 0, u: [0, 0, 0, 0, 0] };
    for (const i of list) {
      s.n++; if (EST[i] === EST[i]) s.est += EST[i];
      for (let f = 0; f < 5; f++) { const v = U[i * 5 + f]; if (v === v) s.u[f] += v; }
    }
    return s;
  }
  const usageText = (u) => 'in ' + fmtInt(u[0]) + ' · out ' + fmtInt(u[1]) + ' · cache ' + fmtInt(u[2] + u[3]) + ' · ' + fmtCost(u[4]);

  // ---- layout --------------------------------------------------------------------------
  const app = $('st-app');
  app.className = ''; app.textContent = '';
  const top = el('header'); top.id = 'st-top';
  const h1 = el('h1'); h1.id = 'st-name';
  const sub = el('div'); sub.id = 'st-sub';
  const stats = el('div'); stats.id = 'st-stats';
  const tools = el('div'); tools.id = 'st-tools';
  const q = el('input'); q.type = 'search'; q.id = 'st-q'; q.placeholder = 'Search the session data…';
  const scope = el('select'); scope.id = 'st-scope';
  for (const [v, t] of [['all', 'all branches'], ['active', 'active path'], ['abandoned', 'abandoned branches'], ['before', 'before compaction']]) {
    const o = el('option', null, t); o.value = v; scope.appendChild(o);
  }
  const bSearch = el('button', null, 'Search'); bSearch.id = 'st-search';
  const bLeaf = el('button', null, 'Go to leaf'); bLeaf.id = 'st-goleaf';
  const bPrev = el('button', null, '◀ prompt'); bPrev.id = 'st-prevprompt'; bPrev.title = 'previous user message on this path (key k)';
  const bNext = el('button', null, 'prompt ▶'); bNext.id = 'st-nextprompt'; bNext.title = 'next user message on this path (key j)';
  const bFold = el('button', null, 'Fold chains'); bFold.id = 'st-foldchains';
  const bExpand = el('button', null, 'Expand all'); bExpand.id = 'st-expand';
  const bDl = el('button', null, 'Download JSONL'); bDl.id = 'st-download';
  const status = el('span'); status.id = 'st-status';
  tools.append(q, scope, bSearch, bPrev, bNext, bLeaf, bFold, bExpand, bDl, status);
  top.append(h1, sub, stats, tools);
  const main = el('div'); main.id = 'st-main';
  const treeBox = el('nav'); treeBox.id = 'st-tree';
  const inner = el('div'); inner.id = 'st-tree-inner'; treeBox.appendChild(inner);
  const right = el('section'); right.id = 'st-right';
  // the search results sit above the message pane, outside its scroller: always in view
  const results = el('div'); results.id = 'st-results'; results.hidden = true;
  const hitBar = el('div', 'hitbar'); hitBar.id = 'st-hitbar';
  const hitHead = el('span', 'h'); hitHead.id = 'st-hithead';
  const bHitPrev = el('button', null, '◀ previous'); bHitPrev.id = 'st-hitprev'; bHitPrev.title = 'previous hit (Shift+Enter in the search box)';
  const bHitNext = el('button', null, 'next ▶'); bHitNext.id = 'st-hitnext'; bHitNext.title = 'next hit (Enter in the search box)';
  const hitPos = el('span', 'pos'); hitPos.id = 'st-hitpos';
  hitBar.append(bHitPrev, hitPos, bHitNext, hitHead);
  const hitList = el('div', 'hitlist'); hitList.id = 'st-hitlist';
  results.append(hitBar, hitList);
  const msgs = el('div'); msgs.id = 'st-msgs';
  right.append(results, msgs);
  main.append(treeBox, right);
  app.append(top, main);
  const setStatus = (t) => { status.textContent = t; };

  // ---- tree pane (virtualized) -----------------------------------------------------------
  let rows = new Int32Array(0), nrows = 0;
  const ROWOF = new Int32Array(N).fill(-1);
  function buildRows() {
    const out = new Int32Array(PRE.length + 16); let m = 0;
    for (let k = 0; k < PRE.length;) {
      const i = PRE[k];
      if (m + 2 >= out.length) break;
      out[m++] = i;
      if (FOLD[i]) { k += SUBN[i]; continue; }
      if (CFOLD[i] && CHL[i] >= 3) {
        out[m++] = -(CHL[i] - 1) - 1; // a "hidden entries" row
        k += CHL[i]; continue;
      }
      k++;
    }
    rows = out; nrows = m;
    ROWOF.fill(-1);
    for (let r = 0; r < m; r++) if (out[r] >= 0) ROWOF[out[r]] = r;
    inner.style.height = (nrows * ROWH) + 'px';
  }
  // the row showing entry i: its own, else the folded chain or subtree holding it
  function rowShowing(i) {
    if (ROWOF[i] >= 0) return ROWOF[i];
    for (let p = PARENT[i], g = 0; p >= 0 && g < N; p = PARENT[p], g++) {
      const r = ROWOF[p];
      if (r >= 0) return r + 1 < nrows && rows[r + 1] < 0 && !FOLD[p] ? r + 1 : r;
    }
    return -1;
  }
  function scrollToRow(m) {
    if (m < 0) return;
    const y = m * ROWH;
    if (y < treeBox.scrollTop || y > treeBox.scrollTop + treeBox.clientHeight - ROWH) treeBox.scrollTop = Math.max(0, y - treeBox.clientHeight / 3);
  }
  // indentation: one step per branch point (as Pi's /tree), capped so that a fifth of the pane
  // at most goes to it; deeper rows show their depth instead of moving further right
  const INDENT = 12;
  const indentCap = () => Math.max(3, Math.floor(((treeBox.clientWidth || 600) * 0.2) / INDENT));
  const pool = [];
  function rowFor(r, i) {
    let d = pool[r];
    if (!d) { d = pool[r] = el('div', 'row'); inner.appendChild(d); }
    return d;
  }
  function renderTree() {
    const first = Math.max(0, Math.floor(treeBox.scrollTop / ROWH) - 8), cap = indentCap();
    const selRow = selected >= 0 ? rowShowing(selected) : -1;
    const count = Math.ceil((treeBox.clientHeight || 600) / ROWH) + 16;
    let r = 0;
    for (let m = first; m < Math.min(nrows, first + count); m++, r++) {
      const i = rows[m], d = rowFor(r);
      d.hidden = false; d.style.top = (m * ROWH) + 'px'; d.textContent = '';
      if (i < 0) {
        const prevNode = rows[m - 1];
        d.className = 'row chain' + (m === selRow ? ' sel' : ''); d.dataset.i = ''; d.dataset.chain = String(prevNode); d.title = '';
        d.style.paddingLeft = (6 + Math.min(IND[prevNode], cap) * INDENT + 14) + 'px';
        d.textContent = '⋯ ' + (-i - 1) + ' entries in a single-child chain (click to unfold)';
        continue;
      }
      let cls = 'row t-' + kindClass(i);
      if (ONACT[i]) cls += ' active';
      if (ONVIEW[i]) cls += ' viewed';
      if (i === activeLeaf) cls += ' leaf';
      if (i === selected) cls += ' sel';
      if (KEPT.has(i)) cls += ' kept-b';
      d.className = cls; d.dataset.i = String(i); delete d.dataset.chain;
      d.style.paddingLeft = (6 + Math.min(IND[i], cap) * INDENT) + 'px';
      const tg = el('span', 'tg');
      if (nKids(i) > 1 || (FOLD[i] && nKids(i) > 0)) { tg.textContent = FOLD[i] ? '▸' : '▾'; tg.dataset.fold = String(i); tg.title = 'fold this subtree'; }
      else if (CHL[i] >= 3 && (PARENT[i] < 0 || nKids(PARENT[i]) !== 1)) { tg.textContent = CFOLD[i] ? '⋯' : '⋮'; tg.dataset.cfold = String(i); tg.title = 'fold this single-child chain'; }
      const num = el('span', 'num');
      let nt = '';
      if (EST[i] === EST[i]) nt += fmtInt(EST[i]) + ' tok';
      if (HASU[i] && U[i * 5 + 4] > 0) nt += ' ' + fmtCost(U[i * 5 + 4]);
      if (nKids(i) > 1 || FOLD[i]) nt += '  Σ ' + SUBN[i] + ' · ' + fmtInt(SUM.est[i]) + ' tok · ' + fmtCost(SUM.u[i * 5 + 4]);
      num.textContent = nt;
      // the row's tooltip (an attribute value, never markup): node and subtree figures
      let tip = shortKind(i) + ' ' + String(ID[i]);
      if (EST[i] === EST[i]) tip += '\nestimate: ' + EST[i] + ' tokens';
      if (HASU[i]) tip += '\nusage: ' + usageText(Array.from(U.subarray(i * 5, i * 5 + 5)).map((v) => (v === v ? v : 0)));
      tip += '\nsubtree: ' + SUBN[i] + ' entries · ~' + fmtInt(SUM.est[i]) + ' tok · ' + usageText(Array.from(SUM.u.subarray(i * 5, i * 5 + 5)));
      d.title = tip;
      d.append(num, tg);
      if (IND[i] > cap) { const dp = el('span', 'dep', '↳' + IND[i]); dp.title = 'branch depth ' + IND[i] + ' (indentation stops at ' + cap + ')'; d.append(dp); }
      if (i === activeLeaf) d.append(el('span', 'lab', 'leaf'));
      const lab = typeof ID[i] === 'string' && Object.prototype.hasOwnProperty.call(meta.labels, ID[i]) ? meta.labels[ID[i]] : null;
      if (lab !== null && lab !== undefined && lab !== '') d.append(el('span', 'lab', String(lab)));
      if (KEPT.has(i)) d.append(el('span', 'kept', '✂ context kept from here'));
      d.append(el('span', 'k', shortKind(i) + ' '), el('span', 'pv', PREV[i]));
    }
    for (; r < pool.length; r++) pool[r].hidden = true;
  }
  let treeQueued = false;
  const queueTree = () => { if (!treeQueued) { treeQueued = true; requestAnimationFrame(() => { treeQueued = false; renderTree(); }); } };
  treeBox.addEventListener('scroll', queueTree);
  window.addEventListener('resize', queueTree);
  inner.addEventListener('click', (ev) => {
    const t = ev.target.closest('[data-fold],[data-cfold],.row');
    if (!t) return;
    if (t.dataset.fold) { const i = +t.dataset.fold; FOLD[i] ^= 1; buildRows(); renderTree(); return; }
    if (t.dataset.cfold) { const i = +t.dataset.cfold; CFOLD[i] ^= 1; buildRows(); renderTree(); return; }
    if (t.dataset.chain) { CFOLD[+t.dataset.chain] = 0; buildRows(); renderTree(); return; }
    if (t.dataset.i) select(+t.dataset.i, { scrollTree: false });
  });
  function reveal(i) {
    for (let p = i, g = 0; p >= 0 && g < N; p = PARENT[p], g++) { if (p !== i) FOLD[p] = 0; CFOLD[p] = 0; }
    buildRows();
    scrollToRow(ROWOF[i]);
    renderTree();
  }

  // ---- segments and entries ------------------------------------------------------------
  // segment k holds the file's bytes from SEGOFF[k]; the exporter writes them last-first, so
  // the leaf's end of the file is parsed first; a segment not parsed yet is waited for. The
  // parser inserts an element before its text and appends the text as the bytes arrive (a big
  // page on a loaded machine or a slow disk), so an element is read only once the parser is
  // past its end tag: something follows it, or the document is parsed
  const SEGOFF = Float64Array.from(meta.segments || []);
  const segCache = new Map();
  let domDone = doc.readyState !== 'loading';
  doc.addEventListener('DOMContentLoaded', () => { domDone = true; });
  async function segOffsets() { return SEGOFF; }
  async function segNode(k) {
    for (;;) {
      const n = $('g' + k);
      if (n && (n.nextSibling || domDone)) return n;
      if (!n && domDone) throw new Error('segment ' + k + ' is missing from the page');
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  function segOf(off) {
    let lo = 0, hi = SEGOFF.length - 1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (SEGOFF[mid] <= off) lo = mid; else hi = mid - 1; }
    return lo;
  }
  async function segment(k) {
    let s = segCache.get(k);
    if (s) { segCache.delete(k); segCache.set(k, s); return s; }
    s = segNode(k).then((n) => gunzip(b64(n.textContent)));
    segCache.set(k, s);
    s.catch(() => { if (segCache.get(k) === s) segCache.delete(k); });  // a failure is not kept
    if (segCache.size > 12) segCache.delete(segCache.keys().next().value);
    return s;
  }
  async function rawText(i) {
    await segOffsets();
    const k = segOf(OFF[i]);
    const data = await segment(k);
    const a = OFF[i] - SEGOFF[k];
    return utf8.decode(data.subarray(a, a + LEN[i]));
  }
  async function entry(i) {
    try { return JSON.parse(await rawText(i)); } catch (e) { return { type: '?', _error: String(e) }; }
  }

  // ---- message pane --------------------------------------------------------------------
  let win = [0, 0];
  // the search hit being shown: its entry; texts with a match past the clip are shown whole while
  // that entry is on screen, and every match of the query (the matcher's spans) is marked
  const HIT = { on: false, entry: -1, rendering: false };
  function markText(box) {
    const walk = doc.createTreeWalker(box, NodeFilter.SHOW_TEXT, {
      acceptNode: (n) => (n.parentElement && n.parentElement.closest('.txt,.name') ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT),
    });
    const nodes = [];
    for (let n = walk.nextNode(); n; n = walk.nextNode()) nodes.push(n);
    let first = null;
    for (const n of nodes) {
      const sp = MATCHER.spans(n.nodeValue);
      // from the last span back: splitting a text node leaves the offsets before it valid
      for (let k = sp.length - 2; k >= 0; k -= 2) {
        const mid = n.splitText(sp[k]); mid.splitText(sp[k + 1] - sp[k]);
        const mk = el('mark', 'st-hit'); mid.replaceWith(mk); mk.append(mid);
        if (k === 0 && !first) first = mk;
      }
    }
    if (first) for (let d = first.parentElement; d && d !== box; d = d.parentElement) if (d.tagName === 'DETAILS') d.open = true;
    return first;
  }
  function clipped(text, cls) {
    const box = el(cls === 'pre' ? 'pre' : 'div', 'txt');
    const s = typeof text === 'string' ? text : JSON.stringify(text, null, 2);
    if (s === undefined) return box;
    if (s.length <= CLIP) { box.textContent = s; return box; }
    if (HIT.rendering) { const sp = MATCHER.spans(s); if (sp.length && sp[1] > CLIP) { box.textContent = s; return box; } }
    box.textContent = s.slice(0, CLIP);
    const wrap = el('div');
    const b = el('button', 'more', 'show all (' + s.length.toLocaleString() + ' characters)');
    b.addEventListener('click', () => { box.textContent = s; b.remove(); });
    wrap.append(box, b);
    return wrap;
  }
  function imageBlock(b) {
    const mime = typeof b.mimeType === 'string' && /^image\/(png|jpeg|gif|webp|bmp)$/.test(b.mimeType) ? b.mimeType : 'application/octet-stream';
    const len = typeof b.data === 'string' ? b.data.length : 0;
    const btn = el('button', 'more', 'show image (' + mime + ', ' + fmtInt(len * 3 / 4) + ' bytes)');
    btn.addEventListener('click', () => {
      try {
        const img = el('img', 'st-img'); img.alt = 'image from the session';
        img.src = URL.createObjectURL(new Blob([b64(String(b.data))], { type: mime }));
        btn.replaceWith(img);
      } catch (e) { btn.textContent = 'image could not be decoded'; }
    });
    return btn;
  }
  function contentInto(box, content) {
    if (typeof content === 'string') { box.append(clipped(content)); return; }
    if (!Array.isArray(content)) { if (content !== undefined && content !== null) box.append(clipped(content, 'pre')); return; }
    for (const b of content) {
      if (!b || typeof b !== 'object') continue;
      if (b.type === 'text') box.append(clipped(b.text));
      else if (b.type === 'image') box.append(imageBlock(b));
      else if (b.type === 'thinking') {
        const d = el('details', 'think'); d.append(el('summary', null, 'thinking (' + fmtInt(String(b.thinking || '').length) + ' chars)'), clipped(b.thinking));
        box.append(d);
      } else box.append(clipped(b, 'pre'));
    }
  }
  const TOOLRES = new Map(); // toolCallId -> [entry indices]
  function buildToolMap() {
    for (let i = 0; i < N; i++) if (kind(i) === 'message:toolResult' && typeof REF[i] === 'string') {
      const a = TOOLRES.get(REF[i]); if (a) a.push(i); else TOOLRES.set(REF[i], [i]);
    }
  }
  function resultFor(callId) {
    const a = TOOLRES.get(callId); if (!a) return -1;
    for (const i of a) if (ONVIEW[i]) return i;
    return a[0];
  }
  function header(i, e, who) {
    const h = el('div', 'h');
    h.append(el('span', 'who', who));
    const lab = typeof ID[i] === 'string' && Object.prototype.hasOwnProperty.call(meta.labels, ID[i]) ? meta.labels[ID[i]] : null;
    if (lab) h.append(el('span', 'lab', String(lab)));
    let t = (typeof ID[i] === 'string' ? ID[i] : '(no id)');
    if (Math.abs(TS[i]) <= 8.64e15) t += ' · ' + new Date(TS[i]).toISOString().replace('T', ' ').slice(0, 19);
    if (EST[i] === EST[i]) t += ' · ~' + fmtInt(EST[i]) + ' tok';
    if (HASU[i]) t += ' · ' + usageText(Array.from(U.subarray(i * 5, i * 5 + 5)).map((v) => (v === v ? v : 0)));
    if (e && e.message && typeof e.message.model === 'string') t += ' · ' + e.message.model;
    h.append(el('span', null, t));
    return h;
  }
  const pairedShown = new Set();
  async function renderEntry(i, e) {
    const k = kind(i), m = e && typeof e.message === 'object' && e.message ? e.message : null;
    const box = el('div', 'm');
    box.dataset.i = String(i);
    if (BEFORE[i]) box.classList.add('off');
    if (k === 'message:user') { box.classList.add('user'); box.append(header(i, e, 'user')); contentInto(box, m.content); }
    else if (k === 'message:assistant') {
      box.classList.add('assistant'); box.append(header(i, e, 'assistant'));
      const content = Array.isArray(m.content) ? m.content : [];
      for (const b of content) {
        if (b && b.type === 'toolCall') {
          const c = el('div', 'call');
          c.append(el('span', 'name', '→ ' + String(b.name)), clipped(b.arguments, 'pre'));
          const r = typeof b.id === 'string' ? resultFor(b.id) : -1;
          if (r >= 0) {
            pairedShown.add(r);
            const re = await entry(r), rm = re && re.message ? re.message : {};
            const res = el('div', 'res' + (rm.isError ? ' err' : '')); res.dataset.r = String(r);
            const rh = el('div', 'h', (rm.isError ? 'error' : 'result') + ' · ' + (typeof ID[r] === 'string' ? ID[r] : ''));
            const j = el('a', 'jump', ' (go)'); j.dataset.jump = String(r); rh.append(j);
            res.append(rh); contentInto(res, rm.content); c.append(res);
          } else c.append(el('div', 'h', 'no result recorded'));
          box.append(c);
        } else contentInto(box, [b]);
      }
      if (m.errorMessage) box.append(clipped('error: ' + String(m.errorMessage)));
    } else if (k === 'message:toolResult') {
      if (pairedShown.has(i)) return null;  // shown inside its call's card above: no second card
      box.classList.add('tool');
      box.append(header(i, e, 'tool result · ' + String(m.toolName)));
      contentInto(box, m.content);
    } else if (k === 'message:bashExecution') {
      box.classList.add('tool'); box.append(header(i, e, 'bash'));
      box.append(clipped('$ ' + String(m.command), 'pre'), clipped(m.output === undefined ? '' : m.output, 'pre'));
    } else if (k === 'compaction') {
      box.classList.add('compaction'); box.append(header(i, e, 'compaction'));
      const h = el('div', 'h', 'tokens before: ' + e.tokensBefore + ' · first kept: ');
      const j = el('a', 'jump', String(e.firstKeptEntryId)); const t = IDX.get(e.firstKeptEntryId);
      if (t !== undefined) j.dataset.jump = String(t);
      h.append(j); box.append(h, clipped(e.summary));
    } else if (k === 'branch_summary') {
      box.classList.add('branch_summary'); box.append(header(i, e, 'branch summary'));
      const h = el('div', 'h', 'from: '); const j = el('a', 'jump', String(e.fromId)); const t = IDX.get(e.fromId);
      if (t !== undefined) j.dataset.jump = String(t);
      h.append(j); box.append(h, clipped(e.summary));
    } else if (k === 'custom_message') { box.append(header(i, e, 'custom message · ' + String(e.customType))); contentInto(box, e.content); }
    else if (m) { box.append(header(i, e, String(m.role))); contentInto(box, m.content); }
    else {
      box.classList.add('meta'); box.append(header(i, e, shortKind(i)));
      const what = META[k];
      box.append(el('span', 'txt', what ? what + ': ' + String(PREV[i]) : PREV[i]));
    }
    return box;
  }
  let renderSeq = 0;
  async function renderMessages(target) {
    const seq = ++renderSeq;
    const at = viewPath.indexOf(target);
    const p = at >= 0 ? at : viewPath.length - 1;
    if (win[1] === 0 || p < win[0] || p >= win[1]) win = [Math.max(0, p - WINDOW + 10), Math.min(viewPath.length, p + 10)];
    if (win[1] - win[0] < WINDOW) win = [Math.max(0, Math.min(win[0], win[1] - WINDOW)), Math.min(viewPath.length, Math.max(win[1], win[0] + WINDOW))];
    const ids = viewPath.slice(win[0], win[1]);
    const es = await Promise.all(ids.map(entry));
    if (seq !== renderSeq) return;
    pairedShown.clear();
    HIT.rendering = HIT.entry >= 0 && ids.indexOf(HIT.entry) >= 0;
    const frag = doc.createDocumentFragment();
    const info = el('div', 'pathinfo', 'Path to ' + (typeof ID[viewLeaf] === 'string' ? ID[viewLeaf] : '—') + ': ' + viewPath.length + ' entries, showing ' + (win[0] + 1) + '–' + win[1] + (viewLeaf === activeLeaf ? ' (the active path)' : ' (not the active path)'));
    frag.append(info);
    if (win[0] > 0) { const b = el('button', 'more', '▲ show ' + Math.min(100, win[0]) + ' earlier'); b.dataset.more = '-1'; frag.append(b); }
    for (let k = 0; k < ids.length; k++) {
      const i = ids[k];
      if (KEPT.has(i)) frag.append(el('div', 'boundary', '✂ compaction ' + (ID[KEPT.get(i)] || '') + ': the model\'s context starts here'));
      let box;
      try { box = await renderEntry(i, es[k]); } catch (err) {
        // content of a shape nothing expects (or too deep to print): show the raw line
        box = el('div', 'm'); box.dataset.i = String(i);
        box.append(el('div', 'h', shortKind(i) + ' · ' + String(ID[i]) + ' · shown raw (' + String(err && err.message || err) + ')'));
        try { box.append(clipped(await rawText(i), 'pre')); } catch (e2) { /* segment unreadable */ }
      }
      if (box) frag.append(box);
    }
    if (win[1] < viewPath.length) { const b = el('button', 'more', '▼ show ' + Math.min(100, viewPath.length - win[1]) + ' later'); b.dataset.more = '1'; frag.append(b); }
    HIT.rendering = false;
    if (seq !== renderSeq) return;
    msgs.textContent = ''; msgs.append(frag);
    // the target's top in view (a tall message is not centred mid-output); a search hit: the
    // matched text, highlighted, in view
    const t = msgs.querySelector('.m[data-i="' + target + '"]') || msgs.querySelector('.res[data-r="' + target + '"]');
    if (t) {
      t.classList.add('sel');
      const mk = HIT.entry === target && HIT.on ? markText(t) : null;
      const top = msgs.getBoundingClientRect().top;
      if (mk) msgs.scrollTop += mk.getBoundingClientRect().top - top - msgs.clientHeight / 3;
      else msgs.scrollTop += t.getBoundingClientRect().top - msgs.getBoundingClientRect().top - 6;
    }
    S.rendered = target;
  }
  msgs.addEventListener('click', (ev) => {
    const b = ev.target.closest('[data-more],[data-jump]');
    if (!b) return;
    if (b.dataset.jump) { select(+b.dataset.jump); return; }
    const d = +b.dataset.more;
    if (d < 0) win[0] = Math.max(0, win[0] - 100); else win[1] = Math.min(viewPath.length, win[1] + 100);
    renderMessages(selected);
  });

  function updateUrl() {
    try {
      const u = new URL(location.href);
      if (viewLeaf >= 0 && typeof ID[viewLeaf] === 'string') u.searchParams.set('leafId', ID[viewLeaf]); else u.searchParams.delete('leafId');
      if (selected >= 0 && typeof ID[selected] === 'string') u.searchParams.set('targetId', ID[selected]); else u.searchParams.delete('targetId');
      history.replaceState(null, '', u.toString());
    } catch (e) { /* file:// without history: ignore */ }
  }
  function select(i, opt) {
    opt = opt || {};
    if (!(i >= 0 && i < N)) return;
    if (!opt.hit) HIT.entry = -1;  // another entry chosen: no hit to mark
    if (!ONVIEW[i]) { setView(opt.leaf !== undefined ? opt.leaf : leafBelow(i)); win = [0, 0]; }
    selected = i;
    if (opt.scrollTree !== false) reveal(i); else renderTree();
    updateUrl();
    return renderMessages(i);
  }

  // ---- search --------------------------------------------------------------------------
  // The query language and the matcher are the CLI's (`sessiontree search`): rust/src/search/
  // query.rs and tokenize.rs compiled to WebAssembly (rust/wasm/matcher.rs), embedded in the
  // page (gzip, base64). No second copy of the rule here: this code only moves text in and out.
  const MATCHER = (() => {
    const enc = new TextEncoder();
    let mod = null, x = null, loading = null, query = null;
    async function instantiate() {
      if (!mod) {
        const node = $('st-wasm');
        if (!node) throw new Error('the search matcher is missing from the page');
        mod = await WebAssembly.compile(await gunzip(b64(node.textContent)));
      }
      x = (await WebAssembly.instantiate(mod, {})).exports;
      // a new instance after a trap: the query parsed again
      if (query !== null) x.st_parse(put(query));
    }
    const load = () => (loading = loading || instantiate());
    // the text as UTF-8 in the module's buffer (a lone surrogate as U+FFFD: the same UTF-16
    // length, so offsets map back onto the string); returns its length in bytes
    function put(s) {
      const n = s.length * 3;
      const p = x.st_buffer(n);
      return enc.encodeInto(s, new Uint8Array(x.memory.buffer, p, n)).written;
    }
    function out(k) {
      const dv = new DataView(x.memory.buffer, x.st_out_ptr(), 8 * k), r = new Array(2 * k);
      for (let j = 0; j < 2 * k; j++) r[j] = dv.getUint32(4 * j, true);
      return r;
    }
    // the module traps only on a defect (a panic): a new instance for the next text
    async function recover(e) { S.errors.push('search matcher: ' + String(e)); loading = null; await load(); }
    return {
      load,
      recover,
      // null when the query parses, else the error's one line
      parse(q) {
        query = null;
        if (x.st_parse(put(q))) { query = q; return null; }
        return utf8.decode(new Uint8Array(x.memory.buffer, x.st_out_ptr(), x.st_out_len()));
      },
      // [start, end, start, end, ...] (UTF-16 offsets) when `text` matches the whole query, else null
      match(text) { const k = x.st_match(put(text)); return k < 0 ? null : out(k); },
      // what a matching text must hold: per positive item, its alternatives' parts of letters
      // a-z (each must occur in the text, lowercased, for one alternative of each item)
      needles() {
        const n = x.st_needles();
        const t = utf8.decode(new Uint8Array(x.memory.buffer, x.st_out_ptr(), n));
        return n ? t.split('\n').map((c) => c.split('\t').map((a) => (a ? a.split(' ') : []))) : [];
      },
      // the query's matches in `text`, whether or not it matches the whole query
      spans(text) { if (query === null || !text) return []; const k = x.st_spans(put(text)); return k < 0 ? [] : out(k); },
    };
  })();

  // What of an entry the CLI searches (rust/src/search/extract.rs), from the parsed line: the
  // pieces joined by "\n"; null for a line it does not search. A string it reads holding a lone
  // surrogate (a \ud800 escape) makes its JSON reader refuse the line (in a tool call's
  // arguments: the arguments), as here. Tested against the core's extraction, entry by entry
  // (tests/html/test_html_search_wasm.py).
  const ESC = /\\u[dD][89a-fA-F]/;
  const LONE = /[\ud800-\udbff](?![\udc00-\udfff])|(?:^|[^\ud800-\udbff])[\udc00-\udfff]/;
  const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
  const bad = (v) => typeof v === 'string' && LONE.test(v);
  const badKeys = (o) => Object.keys(o).some((k) => LONE.test(k));
  function badObj(o, fields) { return badKeys(o) || fields.some((f) => bad(o[f])); }
  function badContent(c) {
    if (bad(c)) return true;
    if (!Array.isArray(c)) return false;
    return c.some((b) => (isObj(b) ? badObj(b, ['type', 'text', 'thinking', 'name']) : bad(b)));
  }
  const byCodePoint = (a, b) => {
    // the order of the core's JSON object keys (bytes of UTF-8: code points)
    for (let i = 0, j = 0; i < a.length && j < b.length;) {
      const ca = a.codePointAt(i), cb = b.codePointAt(j);
      if (ca !== cb) return ca < cb ? -1 : 1;
      i += ca > 0xffff ? 2 : 1; j += cb > 0xffff ? 2 : 1;
    }
    return a.length - b.length;
  };
  function argScalars(v, out, lone) {
    // every scalar, depth first, objects by key, down to 64 containers deep; nothing when the
    // core's JSON reader refuses the value: nested 128 deep, a number out of range, a lone
    // surrogate (`lone`: the line has a \uD800-\uDFFF escape)
    const pieces = [], stack = [[v, 0]];
    while (stack.length) {
      const [y, d] = stack.pop();
      if (typeof y === 'string') { if (lone && LONE.test(y)) return; if (y && d <= 64) pieces.push(y); }
      else if (typeof y === 'number') { if (!isFinite(y)) return; if (d <= 64) pieces.push(String(y)); }
      else if (typeof y === 'boolean') { if (d <= 64) pieces.push(y ? 'true' : 'false'); }
      else if (y !== null && typeof y === 'object') {
        if (d >= 127) return;
        const arr = Array.isArray(y), keys = arr ? null : Object.keys(y).sort(byCodePoint);
        if (lone && !arr && keys.some((k) => LONE.test(k))) return;
        const vals = arr ? y : keys.map((k) => y[k]);
        for (let k = vals.length - 1; k >= 0; k--) stack.push([vals[k], d + 1]);
      }
    }
    for (const p of pieces) out.push(p);
  }
  function contentPieces(c, out) {
    if (typeof c === 'string') { if (c) out.push(c); return; }
    if (!Array.isArray(c)) return;
    for (const b of c) {
      if (!isObj(b)) continue;
      const t = b.type === 'text' ? b.text : b.type === 'thinking' ? b.thinking : undefined;
      if (typeof t === 'string' && t) out.push(t);
    }
  }
  // `lone`: the line may hold a lone surrogate (it has a \uD800-\uDFFF escape: decoded bytes never do)
  function searchText(e, lone) {
    if (!isObj(e) || typeof e.type !== 'string' || e.type === 'session') return null;
    const m = e.message;
    if (lone && (badObj(e, ['type', 'id', 'timestamp', 'summary', 'label', 'name', 'message']) || badContent(e.content) ||
      (isObj(m) && (badObj(m, ['role', 'command', 'output', 'summary', 'toolName']) || badContent(m.content))))) return null;
    const out = [], str = (v) => { if (typeof v === 'string' && v) out.push(v); };
    switch (e.type) {
      case 'message': {
        if (!Object.prototype.hasOwnProperty.call(e, 'message')) return null;
        const mm = isObj(m) ? m : {}, role = typeof mm.role === 'string' ? mm.role : '';
        if (role === 'bashExecution') { str(mm.command); str(mm.output); }
        else if (role === 'branchSummary' || role === 'compactionSummary') str(mm.summary);
        else if (role === 'toolResult') contentPieces(mm.content, out);
        else {
          contentPieces(mm.content, out);
          if (Array.isArray(mm.content)) for (const b of mm.content) {
            if (!isObj(b) || b.type !== 'toolCall') continue;
            str(b.name);
            if (Object.prototype.hasOwnProperty.call(b, 'arguments')) argScalars(b.arguments, out, lone);
          }
        }
        break;
      }
      case 'compaction': case 'branch_summary': str(e.summary); break;
      case 'label': str(e.label); break;
      case 'session_info': str(e.name); break;
      case 'custom_message': contentPieces(e.content, out); break;
    }
    return out.join('\n');
  }

  function inScope(i, sc) {
    if (sc === 'active') return ONACT[i] === 1;
    if (sc === 'abandoned') return ONACT[i] === 0;
    if (sc === 'before') return BEFORE[i] === 1;
    return true;
  }
  // a hit's line in the list: up to 160 characters of its text around the first match, the
  // matches in it marked
  function snippetInto(btn, text, sp) {
    const a = Math.max(0, sp[0] - 60), b = Math.min(text.length, Math.max(sp[1], a + 160));
    let at = a;
    if (a > 0) btn.append(doc.createTextNode('…'));
    for (let k = 0; k < sp.length && sp[k] < b; k += 2) {
      if (sp[k + 1] <= at) continue;
      const s0 = Math.max(sp[k], at), s1 = Math.min(sp[k + 1], b);
      btn.append(doc.createTextNode(text.slice(at, s0).replace(/\s+/g, ' ')), el('mark', null, text.slice(s0, s1)));
      at = s1;
    }
    btn.append(doc.createTextNode(text.slice(at, b).replace(/\s+/g, ' ') + (b < text.length ? '…' : '')));
  }
  let searchSeq = 0, HITS = [], hitAt = -1, lastQuery = null;
  function goHit(k) {
    if (!HITS.length) return;
    hitAt = ((k % HITS.length) + HITS.length) % HITS.length;
    for (const b of hitList.querySelectorAll('.hit.cur')) b.classList.remove('cur');
    const b = hitList.children[hitAt];
    if (b) { b.classList.add('cur'); const top = b.offsetTop - hitList.offsetTop; if (top < hitList.scrollTop || top > hitList.scrollTop + hitList.clientHeight - b.offsetHeight) hitList.scrollTop = top - 4; }
    hitPos.textContent = (hitAt + 1) + ' / ' + HITS.length;
    HIT.on = !!lastQuery; HIT.entry = HITS[hitAt];
    S.hitAt = hitAt;
    return select(HITS[hitAt], { hit: true });
  }
  bHitNext.addEventListener('click', () => goHit(hitAt + 1));
  bHitPrev.addEventListener('click', () => goHit(hitAt - 1));
  async function runSearch() {
    const seq = ++searchSeq;
    const text = q.value, needle = text.trim();
    hitList.textContent = ''; results.hidden = !needle; HITS = []; hitAt = -1; hitPos.textContent = '';
    HIT.on = false; HIT.entry = -1;
    lastQuery = null; S.searchError = null; S.hitIds = S.hitOffsets = null;
    bHitPrev.disabled = bHitNext.disabled = false;
    if (!needle) return;
    const sc = scope.value;
    const head = hitHead; head.textContent = 'searching…';
    await MATCHER.load();
    if (seq !== searchSeq) return;
    let err;
    try { err = MATCHER.parse(text); } catch (trap) { await MATCHER.recover(trap); err = 'the query could not be read: ' + String(trap); }
    if (seq !== searchSeq) return;
    if (err !== null) {
      // a bad query: its one line (a long query's echo cut short)
      S.searchError = err;
      head.textContent = err.length > 300 ? err.slice(0, 300) + '…' : err;
      bHitPrev.disabled = bHitNext.disabled = true; hitPos.textContent = '0 / 0';
      S.searchDone = seq;
      return;
    }
    lastQuery = { text, scope: sc };
    // a line whose text matches holds every positive item's letters (as it holds its tokens):
    // a line without them is skipped unparsed. A \u escape could spell them: such lines are read
    const needles = MATCHER.needles();
    const mayHold = (low) => needles.every((c) => c.some((alt) => alt.every((p) => low.includes(p))));
    await segOffsets();
    let hits = 0, scanned = 0;
    let i = 0, t0 = performance.now();
    for (let k = 0; k < SEGOFF.length && hits < RESULTS_MAX; k++) {
      const end = k + 1 < SEGOFF.length ? SEGOFF[k + 1] : Infinity;
      let any = false;
      for (let j = i; j < N && OFF[j] < end; j++) if (inScope(j, sc)) { any = true; break; }
      if (!any) { while (i < N && OFF[i] < end) i++; continue; }
      const data = await segment(k);
      if (seq !== searchSeq) return;
      for (; i < N && OFF[i] < end && hits < RESULTS_MAX; i++) {
        if (!inScope(i, sc)) continue;
        scanned++;
        const a = OFF[i] - SEGOFF[k];
        const line = utf8.decode(data.subarray(a, a + LEN[i]));
        const esc = line.includes('\\u');
        if (!esc && !mayHold(line.toLowerCase())) continue;
        let e; try { e = JSON.parse(line); } catch (err2) { continue; }
        const s = searchText(e, esc && ESC.test(line));
        if (s === null) continue;
        let sp;
        try { sp = MATCHER.match(s); } catch (trap) { await MATCHER.recover(trap); if (seq !== searchSeq) return; continue; }
        if (sp === null) continue;
        hits++;
        const btn = el('button', 'hit'); btn.dataset.hit = String(HITS.length); HITS.push(i);
        const tag = ONACT[i] ? 'active' : 'abandoned';
        btn.append(el('span', 'lab', shortKind(i)), el('span', 'h', (typeof ID[i] === 'string' ? ID[i] : '') + ' · ' + tag + (BEFORE[i] ? ' · before compaction' : '') + ' — '));
        if (sp.length) snippetInto(btn, s, sp); else btn.append(doc.createTextNode(s.slice(0, 160).replace(/\s+/g, ' ')));
        hitList.append(btn);
        if (HITS.length === 1) goHit(0);  // the first hit at once: the search visibly does something
        else hitPos.textContent = (hitAt + 1) + ' / ' + HITS.length;
        // a long scan gives the page a frame now and then
        if (performance.now() - t0 > 50) { await nextFrame(); t0 = performance.now(); if (seq !== searchSeq) return; }
      }
      head.textContent = 'searching… ' + hits + ' found';
      await nextFrame(); t0 = performance.now();
      if (seq !== searchSeq) return;
    }
    bHitPrev.disabled = bHitNext.disabled = hits < 2;
    if (!hits) hitPos.textContent = '0 / 0';
    head.textContent = hits + (hits >= RESULTS_MAX ? '+' : '') + ' result' + (hits === 1 ? '' : 's') + ' for “' + needle + '” in ' + scope.options[scope.selectedIndex].text + ' (' + scanned + ' entries searched)';
    S.hitIds = HITS.map((j) => ID[j]); S.hitOffsets = HITS.map((j) => OFF[j]);
    S.searchDone = seq;
  }
  bSearch.addEventListener('click', runSearch);
  // Enter: search, or the next hit of the same search (Shift+Enter: the previous one)
  q.addEventListener('keydown', (ev) => {
    if (ev.key !== 'Enter') return;
    if (lastQuery && lastQuery.text === q.value && lastQuery.scope === scope.value && HITS.length) goHit(hitAt + (ev.shiftKey ? -1 : 1));
    else runSearch();
  });
  hitList.addEventListener('click', (ev) => { const b = ev.target.closest('[data-hit]'); if (b) goHit(+b.dataset.hit); });

  // ---- download, folding buttons ---------------------------------------------------------
  bDl.addEventListener('click', async () => {
    await segOffsets();
    const parts = [];
    for (let k = 0; k < SEGOFF.length; k++) { parts.push(await gunzip(b64((await segNode(k)).textContent))); setStatus('preparing download ' + (k + 1) + '/' + SEGOFF.length); }
    const a = el('a'); a.download = String(meta.file || 'session.jsonl').replace(/[\/\\]/g, '_');
    a.href = URL.createObjectURL(new Blob(parts, { type: 'application/x-ndjson' }));
    doc.body.appendChild(a); a.click(); a.remove();
    setStatus('');
  });
  // folds every single-child chain of 3+ entries, the selected entry's too (it is then shown
  // by its chain's "⋯ N entries" row, scrolled into view): nothing is unfolded again
  bFold.addEventListener('click', () => {
    for (let k = 0; k < PRE.length; k++) { const i = PRE[k]; if (CHL[i] >= 3 && (PARENT[i] < 0 || nKids(PARENT[i]) !== 1)) CFOLD[i] = 1; }
    buildRows();
    if (selected >= 0) scrollToRow(rowShowing(selected));
    renderTree();
    setStatus('folded: ' + nrows + ' rows for ' + PRE.length + ' entries');
  });
  bExpand.addEventListener('click', () => { FOLD.fill(0); CFOLD.fill(0); buildRows(); if (selected >= 0) scrollToRow(ROWOF[selected]); renderTree(); setStatus(''); });
  bLeaf.addEventListener('click', () => { if (activeLeaf >= 0) select(activeLeaf, { leaf: activeLeaf }); });
  function jumpPrompt(dir) {
    let k = viewPath.indexOf(selected);
    if (k < 0) k = dir > 0 ? -1 : viewPath.length;
    for (k += dir; k >= 0 && k < viewPath.length; k += dir) if (kind(viewPath[k]) === 'message:user') return select(viewPath[k]);
  }
  bPrev.addEventListener('click', () => jumpPrompt(-1));
  bNext.addEventListener('click', () => jumpPrompt(1));
  doc.addEventListener('keydown', (ev) => {
    if (ev.target && (ev.target.tagName === 'INPUT' || ev.target.tagName === 'SELECT')) return;
    if (ev.key === 'j') jumpPrompt(1); else if (ev.key === 'k') jumpPrompt(-1);
  });

  // ---- start ---------------------------------------------------------------------------
  async function start() {
    await loadIndex();
    performance.mark('st-index');
    buildOrder(); setActive(); buildToolMap();
    const name = typeof meta.name === 'string' && meta.name ? meta.name : null;
    doc.title = (name || 'Session ' + String(meta.header && meta.header.id)) + ' · sessiontree';
    h1.textContent = name || 'Session ' + String(meta.header && meta.header.id);
    sub.textContent = 'id ' + String(meta.header && meta.header.id) + ' · cwd ' + String(meta.header && meta.header.cwd) + ' · ' + N + ' entries' + (meta.problems ? ' · ' + meta.problems + ' damaged or skipped lines' : '') + ' · active leaf: ' + (activeLeaf >= 0 ? String(ID[activeLeaf]) : 'none');
    const all = sumOf(PRE), act = sumOf(actPath);
    const ab = { n: all.n - act.n, est: all.est - act.est, u: all.u.map((v, f) => v - act.u[f]) };
    stats.textContent = '';
    const part = (label, s) => { const sp = el('span'); sp.append(el('b', null, label + ': '), doc.createTextNode(s.n + ' entries · ~' + fmtInt(s.est) + ' tok est · ' + usageText(s.u) + '   ')); return sp; };
    stats.append(part('Active path', act), part('Abandoned branches', ab), part('Total', all));
    S.totals = { all, active: act, abandoned: ab };
    const params = new URLSearchParams(location.search);
    const lp = params.get('leafId'), tp = params.get('targetId');
    let leaf = lp !== null && IDX.has(lp) ? IDX.get(lp) : activeLeaf;
    let target = tp !== null && IDX.has(tp) ? IDX.get(tp) : leaf;
    if (leaf < 0 && target >= 0) leaf = leafBelow(target);
    setView(leaf);
    selected = target;
    buildRows();
    if (target >= 0) reveal(target); else renderTree();
    S.ready = true;
    performance.mark('st-tree');
    if (target >= 0) await renderMessages(target);
    else msgs.append(el('div', 'pathinfo', N ? 'No active leaf: pick an entry in the tree.' : 'This session has no entries.'));
    S.messagesReady = true;
    performance.mark('st-messages');
  }
  S.api = { select, runSearch, rowsShown: () => inner.querySelectorAll('.row:not([hidden])').length, nrows: () => nrows,
    idOf: (i) => ID[i], indexOf: (id) => IDX.get(id), selected: () => selected, viewLeaf: () => viewLeaf,
    // for tests: what of entry i the search reads (the CLI's extraction), and the matcher
    searchTextOfLine: (line) => { let e; try { e = JSON.parse(line); } catch (err) { return null; } return searchText(e, ESC.test(line)); }, matcher: MATCHER };
  start().catch((e) => { S.errors.push(String(e && e.stack || e)); setStatus('error: ' + e); throw e; });
})();
