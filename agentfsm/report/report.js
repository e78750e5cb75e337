// agentfsm report: builds the runs table, the failure groups and a run's timeline from
// the JSON data in #report-data. Vanilla script, no network: the page works from disk.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var runs = data.runs;
  var ROW_LIMIT = 1000;
  var state = { outcome: "", reason: "", failure: "", text: "", edge: -1, sort: "n", desc: false, all: false, current: -1 };
  var OUTCOMES = ["ok", "exhausted", "failed", "incomplete"];

  function $(id) { return document.getElementById(id); }
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) {
      for (var key in attrs) {
        if (key === "text") node.textContent = attrs[key];
        else if (key === "cls") node.className = attrs[key];
        else node.setAttribute(key, attrs[key]);
      }
    }
    (children || []).forEach(function (child) {
      if (child !== null && child !== undefined) node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }
  function badge(kind, text) { return el("span", { cls: "badge " + kind.replace(/ /g, "-"), text: text || kind }); }
  function json(value) { return JSON.stringify(value, null, 1); }
  function callText(call) { return call.name + "(" + JSON.stringify(call.args) + ")"; }
  function pre(text) { return el("pre", { text: text }); }

  runs.forEach(function (run, n) {
    run.n = n + 1;
    run.tokens = run.tin + run.tout;
    run.search = [run.id, run.task, run.prompt, run.error, run.reason, run.file].join(" ").toLowerCase();
  });

  // -- overview and notes ------------------------------------------------------------
  function overview() {
    var counts = {};
    runs.forEach(function (run) { counts[run.outcome] = (counts[run.outcome] || 0) + 1; });
    var parts = [el("b", { text: runs.length + " run" + (runs.length === 1 ? "" : "s") })];
    OUTCOMES.forEach(function (o) { if (counts[o]) parts.push(" · ", badge(o, o + " " + counts[o])); });
    var kinds = Object.keys(data.kinds).map(function (k) { return data.kinds[k] + " " + k; }).join(", ");
    parts.push(" · from " + kinds + " file(s) · built " + data.generated);
    if (data.replayed) parts.push(" · with replay verdicts");
    parts.forEach(function (p) { $("overview").appendChild(typeof p === "string" ? document.createTextNode(p) : p); });
    data.notes.forEach(function (note) { $("notes").appendChild(el("li", { text: note })); });
  }

  // -- failure and correction groups ---------------------------------------------------
  function groups(target, list, filterKey) {
    var box = $(target);
    if (!list.length) { box.appendChild(el("p", { cls: "empty", text: "none" })); return; }
    var wrap = el("div", { cls: "groups" });
    list.forEach(function (group) {
      var outcomes = Object.keys(group.outcomes).map(function (o) { return group.outcomes[o] + " " + o; }).join(", ");
      var filter = el("a", { href: "#", text: "show in table", "data-filter": group.reason });
      filter.addEventListener("click", function (ev) {
        ev.preventDefault();
        if (filterKey === "reason") { state.reason = group.reason; $("filter-reason").value = group.reason; state.outcome = ""; $("filter-outcome").value = ""; }
        else { state.text = ""; $("filter-text").value = ""; state.outcome = ""; $("filter-outcome").value = ""; state.reason = ""; $("filter-reason").value = ""; state.failure = group.reason; }
        render();
        $("runs-section").scrollIntoView();
      });
      var links = el("div", { cls: "links" });
      group.runs.slice(0, 12).forEach(function (n) {
        links.appendChild(el("a", { href: "#run=" + (n + 1), text: runs[n].task || runs[n].id }));
      });
      if (group.runs.length > 12) links.appendChild(el("span", { cls: "muted", text: "… " + (group.runs.length - 12) + " more" }));
      wrap.appendChild(el("div", { cls: "group", "data-reason": group.reason }, [
        el("span", { cls: "reason", text: group.reason }),
        el("span", { cls: "count", text: group.runs.length + " run" + (group.runs.length === 1 ? "" : "s") + " (" + outcomes + ")" }),
        " ", filter, links,
      ]));
    });
    box.appendChild(wrap);
  }

  // -- the table -----------------------------------------------------------------------
  function fillFilters() {
    var present = {};
    runs.forEach(function (run) { present[run.outcome] = true; });
    OUTCOMES.forEach(function (o) { if (present[o]) $("filter-outcome").appendChild(el("option", { value: o, text: o })); });
    data.corrections.forEach(function (group) {
      $("filter-reason").appendChild(el("option", { value: group.reason, text: group.reason + " (" + group.runs.length + ")" }));
    });
    $("filter-outcome").addEventListener("change", function () { state.outcome = this.value; state.failure = ""; render(); });
    $("filter-reason").addEventListener("change", function () { state.reason = this.value; render(); });
    $("filter-text").addEventListener("input", function () { state.text = this.value.toLowerCase(); render(); });
    $("show-all").addEventListener("click", function () { state.all = true; render(); });
    Array.prototype.forEach.call(document.querySelectorAll("#runs th"), function (th) {
      th.addEventListener("click", function () {
        var key = th.getAttribute("data-key");
        state.desc = state.sort === key ? !state.desc : th.getAttribute("data-type") === "num";
        state.sort = key;
        render();
      });
    });
  }

  function matches(run) {
    if (state.outcome && run.outcome !== state.outcome) return false;
    if (state.failure && (run.outcome === "ok" || (run.reason || run.outcome) !== state.failure)) return false;
    if (state.reason && run.reasons.indexOf(state.reason) < 0) return false;
    if (state.edge >= 0 && run.edges.indexOf(state.edge) < 0) return false;
    if (state.text && run.search.indexOf(state.text) < 0) return false;
    return true;
  }

  function compare(a, b) {
    var x = a[state.sort], y = b[state.sort];
    if (typeof x === "boolean") { x = x ? 1 : 0; y = y ? 1 : 0; }
    var r = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
    if (r === 0) r = a.n - b.n;
    return state.desc ? -r : r;
  }

  function cell(text, cls) { return el("td", { cls: cls || "", text: String(text) }); }

  function render() {
    var shown = runs.filter(matches).sort(compare);
    var body = document.querySelector("#runs tbody");
    var rows = document.createDocumentFragment();
    var limit = state.all ? shown.length : Math.min(shown.length, ROW_LIMIT);
    for (var k = 0; k < limit; k++) {
      var run = shown[k];
      var name = el("td", { cls: "run" }, [run.task || run.id, run.prompt ? el("small", { text: run.prompt }) : null]);
      var outcome = el("td", null, [badge(run.outcome), run.replay ? " " : null, run.replay ? badge(run.replay) : null]);
      var tr = el("tr", { "data-run": run.n, "data-outcome": run.outcome, cls: run.n === state.current ? "current" : "" }, [
        cell(run.n, "num"), name, outcome, cell(run.reason), cell(run.steps, "num"), cell(run.corrections, "num"),
        cell(run.calls, "num"), el("td", { cls: "num", title: run.tin + " in / " + run.tout + " out", text: String(run.tokens) }),
        cell(run.seconds.toFixed(3), "num"), cell(run.exhausted ? "yes" : ""), cell(run.error, "error"),
      ]);
      rows.appendChild(tr);
    }
    body.textContent = "";
    body.appendChild(rows);
    $("more").hidden = limit >= shown.length;
    $("shown").textContent = shown.length + " of " + runs.length + " runs" + (limit < shown.length ? " (first " + limit + " listed)" : "");
    Array.prototype.forEach.call(document.querySelectorAll("#runs th"), function (th) {
      th.className = th.getAttribute("data-key") === state.sort ? (state.desc ? "desc" : "asc") : "";
    });
    var chip = $("filter-edge");
    chip.hidden = state.edge < 0 && !state.failure;
    chip.textContent = "";
    if (state.edge >= 0) chip.appendChild(document.createTextNode("edge " + data.edges[state.edge].split("|").join(" → ").replace(/ → ([^→]*)$/, " on $1") + " "));
    if (state.failure) chip.appendChild(document.createTextNode("failure: " + state.failure + " "));
    if (!chip.hidden) {
      var clear = el("button", { type: "button", title: "clear", text: "×" });
      clear.addEventListener("click", function () { state.edge = -1; state.failure = ""; selectEdge(); render(); });
      chip.appendChild(clear);
    }
  }

  document.querySelector("#runs tbody").addEventListener("click", function (ev) {
    var tr = ev.target.closest("tr");
    if (tr) location.hash = "run=" + tr.getAttribute("data-run");
  });

  // -- the diagram -----------------------------------------------------------------------
  function selectEdge() {
    Array.prototype.forEach.call(document.querySelectorAll("#diagram .edge"), function (g) {
      g.classList.toggle("selected", state.edge >= 0 && g.getAttribute("data-edge") === data.edges[state.edge]);
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll("#diagram .edge"), function (g) {
    g.addEventListener("click", function () {
      var index = data.edges.indexOf(g.getAttribute("data-edge"));
      state.edge = state.edge === index ? -1 : index;
      selectEdge();
      render();
      $("runs-section").scrollIntoView();
    });
  });

  // -- a run's timeline ----------------------------------------------------------------
  var HEADS = {
    request: "request", contract: "contract", model: "model output", parse: "parsed", guard: "guard",
    retry: "correction sent", transition: "transition", tool_call: "tool call", tool_result: "tool result",
    final: "final answer", error: "error", end: "run end", note: "note",
  };

  function item(it, run) {
    var li = el("li", { cls: it.k, "data-kind": it.k });
    var head = el("div", { cls: "head" }, [HEADS[it.k] || it.k]);
    var body = [];
    switch (it.k) {
      case "request":
        head.appendChild(document.createTextNode(" · tool_choice " + it.choice + " · tools: " + (it.tools.join(", ") || "none")));
        it.messages.forEach(function (m) {
          var text = m.role + ": " + (m.text || "") + (m.calls && m.calls.length ? " " + m.calls.map(callText).join(", ") : "") + (m.name ? " [" + m.name + "]" : "");
          body.push(pre(text));
        });
        break;
      case "contract":
        var text = data.contracts[it.hash];
        body.push(el("details", null, [el("summary", { text: "contract " + it.hash.slice(0, 12) + (text ? " (" + text.length + " characters)" : " (hash only)") }), text ? pre(text) : null]));
        break;
      case "model":
        var label = it.candidate ? " candidate " + it.candidate : it.extension ? " extension" : " attempt " + it.attempt;
        head.appendChild(document.createTextNode(label + (it.enforcement ? " · " + it.enforcement : "") + (it.finish ? " · finish " + it.finish : "") + (it.tin !== undefined ? " · " + it.tin + " in / " + it.tout + " out" : "")));
        body.push(pre(it.text));
        break;
      case "parse":
        head.appendChild(document.createTextNode(it.calls.length ? " " + it.calls.length + " call(s)" : " no call"));
        if (it.calls.length) body.push(el("div", { cls: "calls" }, it.calls.map(function (c) { return el("code", { text: callText(c) }); })));
        if (it.problems.length) body.push(el("div", { cls: "muted", text: "problems: " + it.problems.join(", ") }));
        if (it.truncated) body.push(el("div", { cls: "muted", text: "cut off at the token limit" }));
        break;
      case "guard":
        li.classList.add(it.verdict);
        head.appendChild(document.createTextNode(" " + it.guard + " · " + it.verdict + " · "));
        head.appendChild(el("span", { cls: "reason-code", text: it.reason }));
        if (it.detail) body.push(el("div", { text: it.detail }));
        break;
      case "retry":
        head.appendChild(document.createTextNode(" #" + it.attempt + " · "));
        head.appendChild(el("span", { cls: "reason-code", text: it.reason }));
        body.push(pre(it.message));
        break;
      case "transition":
        head.textContent = it.from + " → " + it.to + " (" + it.event + ")";
        break;
      case "tool_call":
        body.push(el("div", { cls: "calls" }, [el("code", { text: callText(it) })]));
        break;
      case "tool_result":
        head.appendChild(document.createTextNode(" " + (it.name || it.id) + " · " + it.status));
        body.push(pre(it.text));
        break;
      case "final":
        if (it.exhausted) head.appendChild(document.createTextNode(" · budget spent: the model's best acceptable reply"));
        body.push(pre(it.text));
        break;
      case "error":
        head.appendChild(document.createTextNode(" " + it.error));
        body.push(pre(it.message));
        break;
      case "end":
        head.appendChild(document.createTextNode(" · " + it.status + " · " + it.steps + " step(s), " + it.corrections + " correction(s)"));
        break;
      case "note":
        body.push(el("div", { text: it.text }));
        break;
    }
    if (it.at !== undefined) head.appendChild(el("span", { cls: "at", text: "+" + it.at.toFixed(3) + " s" }));
    li.appendChild(head);
    body.forEach(function (b) { li.appendChild(b); });
    var d = run.divergence;
    if (d && (it.i === d.index || it.o === d.index)) {
      li.classList.add("diverged");
      li.appendChild(divergenceBox(d));
    }
    return li;
  }

  function divergenceBox(d) {
    return el("div", { cls: "divergence" }, [
      el("div", null, [el("b", { text: "recorded (then)" }), pre(Object.keys(d.then).length ? json(d.then) : "(nothing)")]),
      el("div", null, [el("b", { text: "today's code (now)" }), pre(Object.keys(d.now).length ? json(d.now) : "(nothing)")]),
    ]);
  }

  function open(n) {
    var run = runs[n - 1];
    if (!run) return;
    state.current = n;
    $("run-detail").hidden = false;
    $("run-title").textContent = "Run " + n + ": " + (run.task || run.id);
    var meta = $("run-meta");
    meta.textContent = "";
    var fields = [["run id", run.id], ["file", run.file], ["producer", run.producer], ["outcome", run.outcome + (run.reason && run.reason !== run.outcome ? " (" + run.reason + ")" : "")],
      ["steps / model calls", run.steps + " / " + run.calls], ["corrections", String(run.corrections)],
      ["guard reasons", run.reasons.join(", ") || "none"], ["tokens", run.tin + " in / " + run.tout + " out"], ["seconds", run.seconds.toFixed(3)]];
    if (run.replay) fields.push(["replay", run.replay]);
    if (run.error) fields.push(["error", run.error]);
    fields.forEach(function (f) { meta.appendChild(el("dt", { text: f[0] })); meta.appendChild(el("dd", { text: f[1] })); });
    var list = $("timeline");
    list.textContent = "";
    var frag = document.createDocumentFragment();
    var found = false;
    run.items.forEach(function (it) {
      var li = item(it, run);
      if (li.classList.contains("diverged")) found = true;
      frag.appendChild(li);
    });
    if (run.divergence && !found) {
      var extra = el("li", { cls: "diverged" }, [el("div", { cls: "head", text: "divergence: today's run decided more than was recorded (" + run.divergence.event_type + ")" }), divergenceBox(run.divergence)]);
      frag.appendChild(extra);
    }
    list.appendChild(frag);
    Array.prototype.forEach.call(document.querySelectorAll("#runs tbody tr"), function (tr) {
      tr.classList.toggle("current", Number(tr.getAttribute("data-run")) === n);
    });
    $("run-detail").scrollIntoView();
  }

  function route() {
    var m = /^#run=(\d+)$/.exec(location.hash);
    if (m) open(Number(m[1]));
  }
  window.addEventListener("hashchange", route);

  overview();
  groups("failures", data.failures, "failure");
  groups("corrections", data.corrections, "reason");
  fillFilters();
  render();
  route();
  document.body.setAttribute("data-ready-ms", String(Math.round(performance.now())));
  document.body.setAttribute("data-ready", "true");
})();
