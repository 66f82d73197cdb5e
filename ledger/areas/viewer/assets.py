"""The viewer's stylesheet and script, served by the ledger itself (no build, nothing fetched
from elsewhere). Colours pass WCAG AA: text at least 4.5:1 on its background, bars and focus
rings at least 3:1 against white."""

from __future__ import annotations

import functools
import hashlib

CSS = """
:root { --fg:#1a1a1a; --muted:#4a4a4a; --bg:#ffffff; --panel:#f4f5f7; --line:#c8ccd2;
  --link:#0b57d0; --call:#1f5fa8; --tool:#23724a; --failed:#b3261e; --truncated:#8a5300;
  --pending:#5c5c5c; --focus:#0b57d0; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color:var(--fg); background:var(--bg); }
a { color:var(--link); }
a:focus-visible, button:focus-visible, summary:focus-visible, input:focus-visible,
select:focus-visible, [tabindex]:focus-visible { outline:3px solid var(--focus);
  outline-offset:2px; }
header.top { display:flex; gap:1.5rem; align-items:center; padding:.6rem 1.2rem;
  background:#1b2430; color:#fff; }
header.top a { color:#fff; text-decoration:none; font-weight:600; margin-right:1.2rem; }
header.top a[aria-current=page] { text-decoration:underline; }
header.top .brand { font-size:1.05rem; margin-right:1rem; }
main { padding:1rem 1.2rem 3rem; max-width:1600px; }
h1 { font-size:1.35rem; margin:.2rem 0 .8rem; word-break:break-all; }
h2 { font-size:1.1rem; margin:1.6rem 0 .5rem; border-bottom:1px solid var(--line); }
.skip-past { display:inline-block; font-size:.85rem; margin:0 0 .3rem; }
.skip { position:absolute; left:-999px; } .skip:focus { left:.5rem; top:.5rem; background:#fff;
  color:var(--link); padding:.3rem; z-index:9; }
.summary { display:flex; flex-wrap:wrap; gap:.6rem; margin:.4rem 0 1rem; }
.summary .card { background:var(--panel); border:1px solid var(--line); border-radius:6px;
  padding:.45rem .8rem; min-width:13rem; }
.card h3 { margin:0 0 .2rem; font-size:.85rem; color:var(--muted); text-transform:uppercase; }
.card dl { display:grid; grid-template-columns:auto auto; gap:0 .8rem; margin:0; }
.card dt { color:var(--muted); } .card dd { margin:0; text-align:right;
  font-variant-numeric:tabular-nums; }
form.filters { display:flex; flex-wrap:wrap; gap:.6rem; align-items:end; margin-bottom:.8rem; }
form.filters label { display:flex; flex-direction:column; font-size:.85rem; color:var(--muted); }
input, select, button { font:inherit; padding:.25rem .4rem; border:1px solid #767676;
  border-radius:4px; background:#fff; color:var(--fg); }
button { cursor:pointer; background:#e8eaee; }
.table-wrap { overflow-x:auto; }
table { border-collapse:collapse; width:100%; font-variant-numeric:tabular-nums; }
th, td { border-bottom:1px solid var(--line); padding:.3rem .5rem; text-align:left;
  vertical-align:top; white-space:nowrap; }
td.num, th.num { text-align:right; }
th { background:var(--panel); position:sticky; top:0; }
th a { color:var(--fg); }
tbody tr:hover { background:#eef3fb; }
td.task { max-width:22rem; overflow:hidden; text-overflow:ellipsis; }
td.id { white-space:normal; word-break:break-all; max-width:28rem; }
.tag { display:inline-block; padding:0 .4rem; border-radius:3px; border:1px solid currentColor;
  font-size:.8rem; }
.failed { color:var(--failed); } .truncated { color:var(--truncated); }
.pending { color:var(--pending); } .ok { color:#1e6b3a; } .retired { color:var(--truncated); }
ul.checks { list-style:none; margin:.1rem 0 0; padding:0; font-size:.8rem; }
#health-checks .what { font-weight:normal; font-size:.8rem; white-space:normal; }
#health-checks td.examples { white-space:normal; }
.note { max-width:70rem; }
.pager { display:flex; gap:1rem; margin:.8rem 0; }
.muted { color:var(--muted); }
.error { color:var(--failed); font-weight:600; }
svg.timeline { width:100%; height:auto; border:1px solid var(--line); background:#fff; }
svg .lane-label { font-size:11px; fill:var(--fg); }
svg .axis { font-size:10px; fill:var(--muted); }
svg .grid { stroke:#e1e4e8; }
svg rect.bar.call { fill:var(--call); } svg rect.bar.tool { fill:var(--tool); }
svg rect.bar.failed { fill:url(#hatch-failed); stroke:var(--failed); stroke-width:2; }
svg .hatch-ink { fill:var(--failed); } svg .hatch-paper { fill:#fff; }
svg rect.bar.truncated { fill:#fff; stroke:var(--truncated); stroke-width:2; stroke-dasharray:4 2; }
svg a:focus rect.bar { stroke:#000; stroke-width:3; }
.legend { display:flex; gap:1rem; font-size:.85rem; margin:.3rem 0; flex-wrap:wrap; }
.legend i { display:inline-block; width:1.6em; height:.8em; margin-right:.3em;
  vertical-align:middle; }
.legend .l-call { background:var(--call); } .legend .l-tool { background:var(--tool); }
.legend .l-failed { border:2px solid var(--failed);
  background:repeating-linear-gradient(45deg, var(--failed) 0 3px, #fff 3px 6px); }
.legend .l-trunc { border:2px dashed var(--truncated); }
ul.tree, ul.tree ul { list-style:none; padding-left:1.2rem; margin:.2rem 0; }
ul.tree li { margin:.15rem 0; }
.tree .d1 { margin-left:1.2rem; }
.tree .d2 { margin-left:2.4rem; }
.tree .d3 { margin-left:3.6rem; }
.tree .d4 { margin-left:4.8rem; }
.tree .d5 { margin-left:6.0rem; }
.tree .d6 { margin-left:7.2rem; }
.tree .d7 { margin-left:8.4rem; }
.tree .d8 { margin-left:9.6rem; }
.finding { margin:.15rem 0 .15rem 1rem; padding:.1rem .5rem; border-left:3px solid var(--failed);
  background:#fdf1f0; }
details.json { margin:.2rem 0; } details.json > summary { cursor:pointer; color:var(--link); }
pre.json { margin:.3rem 0; padding:.5rem; background:#f7f7f9; border:1px solid var(--line);
  max-height:32rem; overflow:auto; white-space:pre-wrap; word-break:break-word; font-size:12px; }
.j-key { color:#7a1f9c; } .j-str { color:#1d6b1d; } .j-num { color:#0b4f9c; }
.j-lit { color:#8a3b00; font-weight:600; }
.tail-controls { display:flex; gap:1rem; align-items:center; margin:.4rem 0 .8rem; }
.copy-id { display:inline-flex; gap:.3rem; align-items:center; margin:.1rem 0; }
.copy-id input.id-field { font:12px ui-monospace, SFMono-Regular, Menlo, monospace;
  background:var(--panel); }
.copy-id .copied { font-size:.8rem; color:var(--muted); }
tr.differs > th, tr.differs > td { background:#fff8e5; }
.tag.differs { color:var(--truncated); font-weight:600; }
.compare-turns { display:grid; grid-template-columns:minmax(0,1fr) minmax(0,1fr); gap:.8rem; }
.compare-side { border:1px solid var(--line); border-radius:6px; padding:.4rem .7rem;
  min-width:0; }
.compare-side h3 { font-size:1rem; margin:.1rem 0 .4rem; }
.first-difference { border:2px dashed var(--truncated); border-radius:4px; padding:.1rem .4rem; }
.diff-label { margin:0; font-size:.75rem; font-weight:700; color:var(--truncated);
  text-transform:uppercase; }
ul.attempts { display:flex; flex-wrap:wrap; gap:.2rem 1.4rem; list-style:none; padding:0; }
#compare-calls th[scope=colgroup] { text-align:center; }
@media (max-width: 700px) { .compare-turns { grid-template-columns:minmax(0,1fr); } }
.tabs { display:flex; gap:.2rem; margin:.2rem 0 .8rem; border-bottom:1px solid var(--line); }
.tabs a { padding:.3rem .8rem; border:1px solid var(--line); border-bottom:none;
  border-radius:4px 4px 0 0; text-decoration:none; background:var(--panel); }
.tabs a[aria-current=page] { background:#fff; color:var(--fg); font-weight:600;
  margin-bottom:-1px; }
a.to-turn { margin-left:1rem; font-size:.85rem; }
.turn { border:1px solid var(--line); border-radius:6px; margin:.8rem 0; padding:.4rem .7rem;
  max-width:70rem; }
.turn.failed { border-left:6px double var(--failed); }
.turn.truncated { border-left:6px dashed var(--truncated); }
.turn-head { font-size:1rem; margin:.1rem 0; }
.turn-meta { margin:0 0 .4rem; color:var(--muted); font-size:.85rem;
  font-variant-numeric:tabular-nums; }
.msg { margin:.4rem 0; padding:.3rem .6rem; border-left:4px solid var(--line);
  background:#fafbfc; }
.msg .role { font-size:.75rem; font-weight:700; text-transform:uppercase; color:var(--muted); }
.msg.role-system, .msg.role-developer { border-left-color:#6b4fa0; }
.msg.role-user { border-left-color:var(--call); }
.msg.role-assistant { border-left-color:var(--tool); background:#f5faf7; }
.msg.role-error { border-left-color:var(--failed); background:#fdf1f0; }
.text { white-space:pre-wrap; overflow-wrap:anywhere; unicode-bidi:isolate; margin:.15rem 0; }
.preview { unicode-bidi:isolate; color:var(--muted); }
details.reasoning > summary, details.fold > summary { cursor:pointer; color:var(--link); }
.tool-call { display:grid; grid-template-columns:minmax(0,1fr) minmax(0,1fr); gap:.6rem;
  margin:.3rem 0; }
.tool-args, .tool-result { border:1px solid var(--line); border-radius:4px; padding:.25rem .5rem;
  background:#fff; min-width:0; }
.tool-result.failed { border:2px dashed var(--failed); }
.part-head { font-size:.85rem; font-weight:600; }
pre.args { margin:.2rem 0; white-space:pre-wrap; overflow-wrap:anywhere; font-size:12px;
  max-height:24rem; overflow:auto; unicode-bidi:isolate; }
details.image img { max-width:100%; max-height:24rem; }
@media (max-width: 700px) { .tool-call { grid-template-columns:minmax(0,1fr); } }
@media (max-width: 1100px) { main { padding:.6rem; } th, td { padding:.25rem .3rem; } }
#calls tr.payload-row td { white-space:normal; overflow-wrap:anywhere; }
.all-columns { display:none; }
@media (max-width: 700px) {
  header.top { flex-wrap:wrap; gap:.4rem; padding:.5rem .6rem; }
  #calls .opt { display:none; }
  input.all-columns { display:inline-block; margin:.4rem .3rem .4rem 0; }
  label.all-columns { display:inline-block; }
  input.all-columns:checked ~ .table-wrap #calls .opt { display:table-cell; }
  #calls td, #calls th { padding:.25rem .25rem; }
}
"""

JS = """
'use strict';
(function () {
  // Request and response of a call, fetched when its <details> is first opened.
  document.querySelectorAll('details[data-src]').forEach(function (box) {
    box.addEventListener('toggle', function () {
      if (!box.open || box.dataset.loaded) return;
      box.dataset.loaded = '1';
      var target = box.querySelector('.json-body');
      target.textContent = 'Loading…';
      fetch(box.dataset.src, {credentials: 'same-origin'}).then(function (r) {
        if (!r.ok) throw new Error('HTTP ' + r.status);
        return r.text();
      }).then(function (text) {
        // The fragment is server-rendered with every value escaped; parse it inertly.
        var doc = new DOMParser().parseFromString(text, 'text/html');
        target.replaceChildren.apply(target, Array.from(doc.body.childNodes));
      }).catch(function (err) {
        target.textContent = 'Could not load: ' + err.message;
        delete box.dataset.loaded;
      });
    });
  });

  // Copy buttons: shown only with script (the read-only field beside is the fallback).
  document.querySelectorAll('button.copy[data-copy]').forEach(function (button) {
    var field = button.parentNode.querySelector('input.id-field');
    var said = button.parentNode.querySelector('.copied');
    button.hidden = false;
    if (field) field.addEventListener('focus', function () { field.select(); });
    function tell(text) { if (said) said.textContent = text; }
    function bySelection() {
      if (!field) { tell('Select the id to copy it.'); return; }
      field.focus();
      field.select();
      tell(document.execCommand('copy') ? 'Copied.' : 'Selected: press Ctrl+C to copy.');
    }
    button.addEventListener('click', function () {
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(button.dataset.copy).then(function () {
          tell('Copied.');
        }, bySelection);
      } else {
        bySelection();
      }
    });
  });

  // The overview's first page can follow the run: on any new event it is fetched again (at
  // most every 2 s, the same URL, so the same filters and sort) and its rows and summary
  // replaced. Off until asked; without script the page is as it was rendered.
  var overview = document.getElementById('rollouts');
  if (overview && !/[?&]after=/.test(location.search)) {
    var follow = document.createElement('button');
    follow.type = 'button';
    follow.id = 'follow-toggle';
    follow.textContent = 'Follow new rollouts';
    follow.setAttribute('aria-pressed', 'false');
    var told = document.createElement('span');
    told.id = 'follow-status';
    told.setAttribute('role', 'status');
    told.setAttribute('aria-live', 'polite');
    var bar = document.createElement('div');
    bar.className = 'tail-controls';
    bar.append(follow, told);
    var place = overview.closest('.table-wrap') || overview;
    place.parentNode.insertBefore(bar, place);
    var feed = null, timer = null, dirty = false, seen = 0;
    var refresh = function () {
      if (!dirty) return;
      dirty = false;
      fetch(location.href, {credentials: 'same-origin'}).then(function (r) {
        if (!r.ok) throw new Error('HTTP ' + r.status);
        return r.text();
      }).then(function (text) {
        // Server-rendered with every value escaped; parsed inertly, then moved in.
        var doc = new DOMParser().parseFromString(text, 'text/html');
        var rows = doc.querySelector('#rollouts tbody');
        if (rows) overview.tBodies[0].replaceWith(rows);
        var fresh = doc.querySelector('.summary'), old = document.querySelector('.summary');
        if (fresh && old) old.replaceWith(fresh);
        told.textContent = 'Following: updated after event #' + seen + '.';
      }).catch(function (err) { told.textContent = 'Could not update: ' + err.message; });
    };
    follow.addEventListener('click', function () {
      if (feed) {
        feed.close();
        clearInterval(timer);
        feed = null;
        follow.setAttribute('aria-pressed', 'false');
        told.textContent = 'Not following.';
        return;
      }
      feed = new EventSource('/ui/events/stream?after=head');
      feed.onmessage = function (msg) { seen = JSON.parse(msg.data).seq; dirty = true; };
      feed.onopen = function () { told.textContent = 'Following new rollouts.'; };
      timer = setInterval(refresh, 2000);
      follow.setAttribute('aria-pressed', 'true');
    });
  }

  // The live tail: server-sent events into the table, pausable.
  var tail = document.getElementById('tail');
  if (!tail) return;
  var body = tail.querySelector('tbody');
  var status = document.getElementById('tail-status');
  var button = document.getElementById('tail-toggle');
  var after = Number(tail.dataset.after || '0');
  var source = null;
  var keep = 500;
  function cell(row, text, cls) {
    var td = document.createElement('td');
    td.textContent = text;
    if (cls) td.className = cls;
    row.appendChild(td);
    return td;
  }
  function add(ev) {
    var row = document.createElement('tr');
    row.dataset.seq = ev.seq;
    cell(row, String(ev.seq), 'num');
    cell(row, ev.recorded_at);
    cell(row, ev.kind);
    var statusCell = cell(row, '');
    statusCell.dataset.col = 'status';
    if (ev.status) {
      var tag = document.createElement('span');
      tag.className = ev.status.failed ? 'tag failed'
        : ev.status.truncated ? 'tag truncated' : 'ok';
      tag.textContent = (ev.status.failed ? '\u2715 ' : ev.status.truncated ? '\u25e9 ' : '')
        + ev.status.text;
      statusCell.appendChild(tag);
    }
    var idCell = cell(row, '', 'id');
    if (ev.rollout_id) {
      var a = document.createElement('a');
      a.href = ev.rollout_url;
      a.textContent = ev.rollout_id;
      idCell.appendChild(a);
    }
    cell(row, String(ev.generation), 'num');
    cell(row, ev.hash.slice(0, 16), 'muted');
    body.insertBefore(row, body.firstChild);
    while (body.rows.length > keep) body.deleteRow(body.rows.length - 1);
  }
  function start() {
    var stream = tail.dataset.stream;
    source = new EventSource(stream + (stream.indexOf('?') < 0 ? '?' : '&') + 'after=' + after);
    source.onmessage = function (msg) {
      var ev = JSON.parse(msg.data);
      after = Math.max(after, ev.seq);
      add(ev);
    };
    source.onopen = function () { status.textContent = 'Live: following new events.'; };
    source.onerror = function () { status.textContent = 'Reconnecting…'; };
    button.textContent = 'Pause';
    button.setAttribute('aria-pressed', 'false');
  }
  function stop() {
    if (source) source.close();
    source = null;
    status.textContent = 'Paused after seq ' + after + '.';
    button.textContent = 'Resume';
    button.setAttribute('aria-pressed', 'true');
  }
  button.hidden = false;
  button.addEventListener('click', function () { if (source) stop(); else start(); });
  start();
})();
"""

# A favicon of our own (browsers ask for /favicon.ico otherwise, a 404 in every page's log).
ICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" '
    'rx="3" fill="#1b2430"/><rect x="3" y="4" width="7" height="2" fill="#7fb2ff"/>'
    '<rect x="6" y="8" width="7" height="2" fill="#6fd39a"/></svg>'
)


@functools.cache
def fingerprint(text: str) -> str:
    """Part of an asset's URL: cacheable for good, since a changed asset gets a new URL."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]
