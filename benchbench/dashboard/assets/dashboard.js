/* benchbench dashboard: shared state, filters, formatting and safe DOM building.
 *
 * Every string that comes from the data is untrusted: it is put on the page with
 * text nodes (BB.el) only, never through innerHTML. Links are built from the
 * repository URL checked at build time (http/https) and hex commit shas.
 */
"use strict";
(function () {
  const BB = (window.BB = {});
  BB.DATA = () => window.BB_DATA || {};
  BB.index = () => BB.DATA().index || { runs: [], envs: [], workloads: [], benchmarks: [], alerts: [], verdict: { min_effect: 0.05, instructions_min_effect: 0.01 } };

  /* el("a", {class: "x", href: "..."}, "text", node, ...) -> Element; strings become text nodes. */
  BB.el = function (tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "on") for (const [ev, fn] of Object.entries(v)) node.addEventListener(ev, fn);
      else if (k === "class") node.className = v;
      else node.setAttribute(k, String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      node.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  };
  BB.clear = (node) => { while (node.firstChild) node.removeChild(node.firstChild); return node; };

  /* ---- state kept in the URL hash, so a view is a link ---- */
  BB.state = function () {
    const out = {};
    const h = location.hash.replace(/^#/, "");
    for (const [k, v] of new URLSearchParams(h)) out[k] = v;
    return out;
  };
  BB.setState = function (patch) {
    const s = Object.assign(BB.state(), patch);
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(s)) if (v !== "" && v !== null && v !== undefined) p.set(k, v);
    history.replaceState(null, "", "#" + p.toString());
    BB.render();
  };
  BB.link = (page, state) => page + "#" + new URLSearchParams(
    Object.entries(state).filter(([, v]) => v !== "" && v !== null && v !== undefined)).toString();

  /* ---- data scripts: data/<key>.js sets BB_DATA[key]; key is ours (w3, r12) ---- */
  const pending = {};
  BB.load = function (key) {
    if (BB.DATA()[key]) return Promise.resolve(BB.DATA()[key]);
    if (!/^[a-z]+(\/[a-z]\d+)?$/.test(key)) return Promise.reject(new Error("bad data key " + key));
    if (!pending[key]) {
      pending[key] = new Promise((resolve, reject) => {
        const s = document.createElement("script");
        s.src = "data/" + key + ".js";
        s.onload = () => resolve(BB.DATA()[key]);
        s.onerror = () => reject(new Error("cannot load data/" + key + ".js"));
        document.head.appendChild(s);
      });
    }
    return pending[key];
  };

  /* ---- formatting ---- */
  const PREFIX = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"], [1, ""]];
  BB.si = function (v, unit) {
    if (v === null || v === undefined || !isFinite(v)) return "–";
    const a = Math.abs(v);
    for (const [f, p] of PREFIX) if (a >= f) return (v / f).toPrecision(3) + " " + p + (unit || "");
    return v.toPrecision(3) + " " + (unit || "");
  };
  BB.seconds = function (v) {
    if (v === null || v === undefined || !isFinite(v)) return "–";
    const a = Math.abs(v);
    if (a >= 1) return v.toPrecision(3) + " s";
    if (a >= 1e-3) return (v * 1e3).toPrecision(3) + " ms";
    if (a >= 1e-6) return (v * 1e6).toPrecision(3) + " µs";
    return (v * 1e9).toPrecision(3) + " ns";
  };
  /* Instructions per call as `benchbench show` writes them (views/results.py
   * format_instructions): 8,367 · 12.3 M · 4.56 G; "–" for none. */
  BB.count = function (v) {
    if (v === null || v === undefined || !isFinite(v)) return "–";
    const g = (x) => String(Number(x.toPrecision(3)));  // Python's :.3g for these ranges
    if (v >= 1e9) return g(v / 1e9) + " G";
    if (v >= 1e6) return g(v / 1e6) + " M";
    return Math.round(v).toLocaleString("en-US");
  };
  BB.date = (ms) => (ms === null || ms === undefined ? "–" : new Date(ms).toISOString().slice(0, 16).replace("T", " "));
  BB.day = (ms) => (ms === null || ms === undefined ? "" : new Date(ms).toISOString().slice(0, 10));
  BB.short = (sha) => (sha ? String(sha).slice(0, 8) : "–");
  BB.pct = (v) => (v === null || v === undefined ? "–" : (v >= 0 ? "+" : "") + (100 * v).toFixed(1) + " %");

  BB.commit = function (run) {
    const url = BB.index().repo_url;
    if (!run || !run.sha) return BB.el("span", { class: "muted" }, "–");
    if (url && run.link_sha) return BB.el("a", { href: url + "/commit/" + run.link_sha, target: "_blank", rel: "noopener" }, BB.short(run.sha));
    return BB.el("code", {}, BB.short(run.sha));
  };
  BB.envName = (e) => { const env = BB.index().envs[e]; return env ? env.machine : "?"; };
  BB.benchLabel = function (b) {
    const x = BB.index().benchmarks[b];
    if (!x) return "?";
    const w = BB.index().workloads[x.w];
    const size = x.size === null ? "" : "n=" + x.size;
    const args = [size, x.params].filter(Boolean).join(", ");
    return w.workload + ":" + x.variant + "[" + x.dtype + ", " + x.device + "](" + args + ")";
  };

  /* ---- the shared tooltip ---- */
  const tip = () => document.getElementById("tooltip");
  BB.showTip = function (clientX, clientY, lines) {
    const t = tip();
    BB.clear(t);
    lines.forEach((l, i) => t.appendChild(BB.el("div", { class: i ? "" : "tip-head" }, l)));
    t.hidden = false;
    const w = t.offsetWidth, h = t.offsetHeight;
    t.style.left = Math.min(clientX + 14, window.innerWidth - w - 8) + window.scrollX + "px";
    t.style.top = Math.min(clientY + 14, window.innerHeight - h - 8) + window.scrollY + "px";
  };
  BB.hideTip = () => { tip().hidden = true; };

  /* ---- filters ---- */
  const uniq = (xs) => [...new Set(xs)].sort();
  BB.FILTERS = ["suite", "workload", "device", "dtype", "env", "from", "to"];
  BB.renderFilters = function (which) {
    const box = BB.clear(document.getElementById("filters"));
    const ix = BB.index(), st = BB.state();
    const opts = {
      suite: uniq(ix.workloads.map((w) => w.suite)),
      workload: uniq(ix.workloads.filter((w) => !st.suite || w.suite === st.suite).map((w) => w.workload)),
      device: uniq(ix.workloads.flatMap((w) => w.devices)),
      dtype: uniq(ix.workloads.flatMap((w) => w.dtypes)),
      env: ix.envs.map((e) => e.id),
    };
    for (const f of which) {
      if (f === "from" || f === "to") {
        const input = BB.el("input", { type: "date", name: f, value: st[f] || "", on: { change: (ev) => BB.setState({ [f]: ev.target.value }) } });
        box.appendChild(BB.el("label", {}, f === "from" ? "from " : "to ", input));
        continue;
      }
      const sel = BB.el("select", { name: f, on: { change: (ev) => BB.setState(f === "suite" ? { suite: ev.target.value, workload: "" } : { [f]: ev.target.value }) } },
        BB.el("option", { value: "" }, "all"));
      for (const v of opts[f]) {
        const text = f === "env" ? ix.envs.find((e) => e.id === v).machine + " (" + v.slice(0, 10) + ")" : v;
        sel.appendChild(BB.el("option", { value: v, selected: st[f] === v ? "selected" : null }, text));
      }
      box.appendChild(BB.el("label", {}, f + " ", sel));
    }
  };
  /* Does a benchmark / run / time pass the filters in the URL? */
  BB.passBench = function (b, st) {
    const x = BB.index().benchmarks[b], w = BB.index().workloads[x.w];
    return (!st.suite || w.suite === st.suite) && (!st.workload || w.workload === st.workload) &&
      (!st.device || x.device === st.device) && (!st.dtype || x.dtype === st.dtype);
  };
  BB.passEnv = (e, st) => !st.env || (BB.index().envs[e] || {}).id === st.env;
  BB.passTime = function (t, st) {
    if (st.from && t < Date.parse(st.from + "T00:00:00Z")) return false;
    if (st.to && t >= Date.parse(st.to + "T00:00:00Z") + 86400000) return false;
    return true;
  };
  BB.findEnv = (id) => BB.index().envs.findIndex((e) => e.id === id);
  BB.findRun = (id) => BB.index().runs.find((r) => r.id === id);

  BB.section = (title, ...children) => BB.el("section", { class: "card" }, BB.el("h2", {}, title), ...children);
  BB.table = function (headers, rows, cls) {
    return BB.el("table", { class: cls || "" },
      BB.el("thead", {}, BB.el("tr", {}, headers.map((h) => BB.el("th", {}, h)))),
      BB.el("tbody", {}, rows.map((r) => BB.el("tr", { class: r.cls || "" }, (r.cells || r).map((c) => BB.el("td", {}, c))))));
  };
  BB.emptyStore = function () {
    return BB.el("section", { class: "card empty" },
      BB.el("h2", {}, "No runs in this store yet"),
      BB.el("p", {}, "Add one with ", BB.el("code", {}, "benchbench run quick"),
        ", then rebuild this site with ", BB.el("code", {}, "benchbench dashboard build"), "."));
  };

  /* The workload a workload or history page shows, and the selector that changes it. */
  BB.pickWorkload = function (st) {
    const ws = BB.index().workloads.filter((w) => (!st.suite || w.suite === st.suite) && (!st.workload || w.workload === st.workload));
    return ws[0] || null;
  };
  BB.workloadPicker = function (st, page) {
    const ix = BB.index();
    const sel = BB.el("select", { name: "pick-workload", on: { change: (ev) => {
      const w = ix.workloads[Number(ev.target.value)];
      BB.setState({ suite: w.suite, workload: w.workload, bench: "" });
    } } });
    for (const w of ix.workloads) {
      if (st.suite && w.suite !== st.suite) continue;
      sel.appendChild(BB.el("option", { value: w.i, selected: page && page.i === w.i ? "selected" : null }, w.suite + " / " + w.workload));
    }
    return BB.el("label", { class: "picker" }, "workload ", sel);
  };

  /* Each page sets BB.page = {filters: [...], render(main, state)}; errors are shown, not swallowed. */
  BB.render = function () {
    const page = BB.page;
    const main = BB.clear(document.getElementById("main"));
    if (!page) return;
    BB.renderFilters(page.filters || []);
    if (!BB.index().runs.length) { main.appendChild(BB.emptyStore()); return; }
    Promise.resolve().then(() => page.render(main, BB.state())).catch((err) => {
      main.appendChild(BB.el("p", { class: "error" }, "Could not draw this page: " + err.message));
      throw err;
    });
  };
  BB.start = function (page) {
    BB.page = page;
    window.addEventListener("hashchange", BB.render);
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", BB.render);
    else BB.render();
  };
})();
