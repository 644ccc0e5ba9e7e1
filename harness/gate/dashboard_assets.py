"""The dashboard's style sheet and its one script, written beside the pages (``dashboard.css``,
``dashboard.js``) so that the site works from disk (``file://``) with nothing fetched from elsewhere.

The script filters the rows of a page's series table (``tr[data-series]``) by their ``data-framework``,
``data-workload``, ``data-storage``, ``data-strategy``, ``data-machine``, ``data-verdict``, ``data-canary`` and
``data-freshness`` attributes: from the
page's select boxes, or from the address (``index.html#framework=torch_ddp&verdict=regression``, or the same
after ``?``), so that a filtered view can be linked; a value no row has shows no row, a key with no select box is ignored. It only sets
``hidden`` and text, never HTML.
"""

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em 2em; color: #222; }
h1 { font-size: 1.4em; margin: 0 0 .3em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
nav a { margin-right: 1.2em; }
table { border-collapse: collapse; margin: .6em 0; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: middle; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.regression { color: #c0392b; font-weight: 600; } .improvement { color: #1e8449; }
.muted, .note-text { color: #777; } .tick { font-size: 11px; fill: #555; } .note { font-size: 11px; }
.filters label { margin-right: 1em; } .filters select { margin-left: .3em; }
svg.chart { border: 1px solid #e5e5e5; background: #fff; }
ul.provenance { margin: 0; padding-left: 1.1em; font-size: 12px; }
.stale { color: #a04000; font-weight: 600; }
"""

JS = """
(function () {
  "use strict";
  var address = location.hash.length > 1 ? location.hash.slice(1) : location.search.slice(1);
  var selects = Array.prototype.slice.call(document.querySelectorAll("select[data-filter]"));
  var known = selects.map(function (select) { return select.getAttribute("data-filter"); });
  var wanted = {};
  new URLSearchParams(address).forEach(function (value, key) {
    if (known.indexOf(key) >= 0) { wanted[key] = value; }
  });
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr[data-series]"));

  function apply() {
    var shown = 0;
    rows.forEach(function (row) {
      var keep = Object.keys(wanted).every(function (key) {
        return !wanted[key] || row.getAttribute("data-" + key) === wanted[key];
      });
      row.hidden = !keep;
      if (keep) { shown += 1; }
    });
    var count = document.getElementById("shown");
    if (count) { count.textContent = shown + " of " + rows.length + " series shown"; }
    document.body.setAttribute("data-filtered", "yes");
  }

  selects.forEach(function (select) {
    var key = select.getAttribute("data-filter");
    if (wanted[key] !== undefined) { select.value = wanted[key]; }
    select.addEventListener("change", function () {
      wanted[key] = select.value;
      var kept = new URLSearchParams();
      Object.keys(wanted).forEach(function (k) { if (wanted[k]) { kept.set(k, wanted[k]); } });
      history.replaceState(null, "", "#" + kept.toString());
      apply();
    });
  });
  apply();
}());
"""
