// cbench report: sortable tables, the leaderboard's filter and comparison selector, and the difference
// plot, drawn here from the page's own table data so that it always shows what the table shows.
// No dependencies; every name is put in the page as text (never as HTML).
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  function cellValue(row, i, type) {
    var cell = row.cells[i];
    var v = cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent.trim();
    if (type === "number") {
      var x = parseFloat(v);
      return isNaN(x) ? null : x;  // empty cells sort last either way
    }
    return v.toLowerCase();
  }
  function sortTable(table, i, th) {
    var type = th.getAttribute("data-type") || "text";
    var dir = th.getAttribute("aria-sort") === "descending" ? "ascending" : "descending";
    if (!th.hasAttribute("aria-sort") || th.getAttribute("aria-sort") === "none") {
      dir = type === "number" ? "descending" : "ascending";
    }
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, i, type), y = cellValue(b, i, type);
      if (x === null && y === null) return 0;
      if (x === null) return 1;
      if (y === null) return -1;
      var c = x < y ? -1 : x > y ? 1 : 0;
      return dir === "ascending" ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.setAttribute("aria-sort", "none"); });
    th.setAttribute("aria-sort", dir);
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      th.addEventListener("click", function (ev) {
        if (ev.target.tagName === "A") return;  // a case link in the header opens the case
        sortTable(table, i, th);
      });
    });
  });

  function el(name, attrs, text) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }
  var dataEl = document.getElementById("table-data");
  var data = dataEl ? JSON.parse(dataEl.textContent) : null;
  var filterEl = document.getElementById("filter");
  var select = document.getElementById("against");

  function visibleNames() {
    var q = filterEl ? filterEl.value.trim().toLowerCase() : "";
    return data.entries.filter(function (e) {
      return !q || e.name.toLowerCase().indexOf(q) >= 0 || e.kind.toLowerCase().indexOf(q) >= 0;
    }).map(function (e) { return e.name; });
  }

  // the difference plot: per case, each shown entry's AUROC minus the compared entry's
  function drawDiff() {
    var box = document.getElementById("diff-plot");
    if (!box || !data) return;
    var against = select ? select.value : data.entries[0].name;
    var base = null;
    data.entries.forEach(function (e) { if (e.name === against) base = e; });
    var shown = visibleNames();
    var others = data.entries.filter(function (e) { return e.name !== against && shown.indexOf(e.name) >= 0; });
    var cases = data.cases;
    var bw = Math.max(3, Math.min(12, Math.floor(220 / Math.max(1, others.length))));
    var group = bw * Math.max(1, others.length) + 14;
    var left = 46, top = 10, h = 190, height = top + h + 40;
    // wide enough for the bars and for the legend's first row (up to six entries of 150 px)
    var width = Math.max(left + group * cases.length + 10, left + Math.min(6, others.length) * 150 + 10);
    var svg = el("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height, id: "diff-svg",
                         "data-against": against, role: "img"});
    svg.appendChild(el("title", {}, "edge AUROC minus " + against + "'s, per case"));
    function y(v) { return top + (1 - v) / 2 * h; }  // -1 .. 1
    [-1, -0.5, 0, 0.5, 1].forEach(function (t) {
      svg.appendChild(el("line", {x1: left, x2: width - 6, y1: y(t), y2: y(t), stroke: t === 0 ? "#000" : "#eee"}));
      svg.appendChild(el("text", {x: left - 4, y: y(t) + 3, "text-anchor": "end"}, String(t)));
    });
    cases.forEach(function (c, ci) {
      var x0 = left + ci * group + 7;
      svg.appendChild(el("text", {x: x0 + (group - 14) / 2, y: top + h + 14, "text-anchor": "middle"}, c));
      if (ci > 0) svg.appendChild(el("line", {x1: x0 - 7, x2: x0 - 7, y1: top, y2: top + h, stroke: "#ddd"}));
      others.forEach(function (e, i) {
        var a = e.auroc[c], b = base ? base.auroc[c] : null;
        if (a === null || a === undefined || b === null || b === undefined) return;
        var d = Math.round((a - b) * 1e6) / 1e6;
        var x = x0 + i * bw;
        var bar = el("rect", {x: x, width: Math.max(1, bw - 1), y: Math.min(y(d), y(0)),
                              height: Math.max(1, Math.abs(y(d) - y(0))), fill: e.colour, "class": "diff-bar"});
        bar.setAttribute("data-entry", e.name);
        bar.setAttribute("data-case", c);
        bar.setAttribute("data-value", d.toFixed(6));
        bar.appendChild(el("title", {}, e.name + ", case " + c + ": " + (d >= 0 ? "+" : "") + d.toFixed(3)));
        svg.appendChild(bar);
      });
    });
    var legend = el("g", {"class": "legend"});
    others.forEach(function (e, i) {
      var lx = left + (i % 6) * 150, ly = top + h + 26 + Math.floor(i / 6) * 13;
      legend.appendChild(el("rect", {x: lx, y: ly - 8, width: 9, height: 9, fill: e.colour}));
      legend.appendChild(el("text", {x: lx + 13, y: ly}, e.name));
    });
    svg.setAttribute("height", height + Math.ceil(others.length / 6) * 13);
    svg.setAttribute("viewBox", "0 0 " + width + " " + (height + Math.ceil(others.length / 6) * 13));
    svg.appendChild(legend);
    box.textContent = "";
    box.appendChild(svg);
    var label = document.getElementById("diff-against");
    if (label) label.textContent = against;
  }

  function applyFilter() {
    var shown = data ? visibleNames() : null;
    var q = filterEl.value.trim().toLowerCase();
    Array.prototype.forEach.call(document.querySelectorAll("table.filterable tbody tr"), function (tr) {
      var name = tr.getAttribute("data-name") || "";
      var keep = shown ? shown.indexOf(name) >= 0 : (!q || tr.textContent.toLowerCase().indexOf(q) >= 0);
      tr.style.display = keep ? "" : "none";
    });
    drawDiff();
  }
  if (filterEl) filterEl.addEventListener("input", applyFilter);

  var statsEl = document.getElementById("stats");
  if (select && statsEl) {
    var stats = JSON.parse(statsEl.textContent);
    select.addEventListener("change", function () {
      var against = select.value, row = stats[against] || {};
      document.getElementById("p-head").textContent = "p vs " + against;
      document.getElementById("a12-head").textContent = "A12 vs " + against;
      Array.prototype.forEach.call(document.querySelectorAll("#leaderboard tbody tr"), function (tr) {
        var s = row[tr.getAttribute("data-name")];
        var p = tr.querySelector("td.p"), a = tr.querySelector("td.a12");
        p.setAttribute("data-value", s ? s.p : "");
        a.setAttribute("data-value", s ? s.a12 : "");
        p.textContent = s ? (s.p >= 1e-3 ? s.p.toFixed(4) : s.p.toExponential(1)) : "–";
        a.textContent = s ? s.a12.toFixed(3) : "–";
      });
      drawDiff();
    });
  }
  drawDiff();
})();
