// cbench report: sortable tables and the "against" selector of the leaderboard. No dependencies.
(function () {
  "use strict";
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
  var select = document.getElementById("against");
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
    });
  }
})();
