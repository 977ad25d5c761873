/* Overview: open regressions first, the latest run per environment with its
 * failures, and a sparkline per workload and environment. A run this site holds no
 * points of (a date filter can pick one) says where they are instead. */
"use strict";
(function () {
  const BB = window.BB, el = BB.el;

  /* Rows of the regressions table: a fleet's year can leave ~20,000 alerts open, and a
   * table of them all took ~5 s to draw. The index lists them open first, then by
   * severity, newest first: the first ones are the ones to read. */
  const SHOWN_ALERTS = 200;

  function regressions(st) {
    const ix = BB.index();
    const open = ix.alerts.filter((a) => a.status === "open" && a.b >= 0 && BB.passBench(a.b, st) && BB.passEnv(a.env, st));
    if (!open.length) return BB.section("Open regressions", el("p", { class: "ok-note" }, "No open regressions."));
    const rows = open.slice(0, SHOWN_ALERTS).map((a) => {
      const bench = ix.benchmarks[a.b], w = ix.workloads[bench.w];
      const good = ix.runs[a.good], bad = ix.runs[a.bad];
      return { cls: "sev-" + (a.severity || ""), cells: [
        el("span", { class: "badge sev-" + (a.severity || "") }, a.severity || "?"),
        el("a", { href: BB.link("history.html", { suite: w.suite, workload: w.workload, bench: bench.id, env: (ix.envs[a.env] || {}).id }) }, BB.benchLabel(a.b)),
        BB.envName(a.env),
        BB.pct(a.rel_change),
        el("span", {}, BB.commit(good), " → ", BB.commit(bad)),
        BB.date(a.t),
      ] };
    });
    const more = open.length - rows.length;
    return BB.section("Open regressions (" + open.length + ")",
      BB.table(["severity", "benchmark", "environment", "change", "commits", "detected"], rows, "alerts"),
      more > 0 ? el("p", { class: "muted more-alerts" }, "The " + rows.length + " most severe and newest are listed; " + more +
        " more match the filters above (narrow them), and ", el("code", {}, "benchbench regressions"), " lists them all.") : null);
  }

  async function latestRuns(st) {
    const ix = BB.index();
    const cards = el("div", { class: "runs" });
    for (let e = 0; e < ix.envs.length; e++) {
      if (!BB.passEnv(e, st)) continue;
      const runs = ix.runs.filter((r) => r.env === e && BB.passTime(r.t, st));
      if (!runs.length) continue;
      const run = runs[runs.length - 1];
      const card = el("div", { class: "run-card" },
        el("h3", {}, BB.envName(e)),
        el("div", { class: "run-label" }, run.label),
        el("div", {}, BB.date(run.t), " · ", BB.commit(run), run.branch ? " · " + run.branch : "", run.dirty ? " (dirty)" : ""),
        el("div", { class: "counts" },
          el("span", { class: "badge ok" }, run.ok + " ok"), " ",
          el("span", { class: "badge skipped" }, run.skipped + " skipped"), " ",
          el("span", { class: "badge error" }, run.error + " failed")),
        run.data ? el("a", { href: BB.link("compare.html", { a: run.id }) }, "all points of this run")
          : el("div", { class: "muted" }, "its points are in the store: ", el("code", {}, "benchbench show " + run.id)));
      cards.appendChild(card);
      if (run.data && run.error + run.skipped > 0) {
        const doc = await BB.load("runs/r" + run.i);
        const items = [];
        doc.b.forEach((b, k) => {
          if (doc.s[k] === 0) return;
          items.push(el("li", { class: doc.s[k] === 2 ? "error" : "skipped" },
            el("strong", {}, doc.s[k] === 2 ? "error " : "skipped "), BB.benchLabel(b), ": ",
            doc.reason[String(k)] || "no reason recorded"));
        });
        const shown = items.slice(0, 8);
        card.appendChild(el("ul", { class: "failures" }, shown,
          items.length > shown.length ? el("li", {}, "… and " + (items.length - shown.length) + " more") : null));
      }
    }
    return BB.section("Latest run per environment", cards);
  }

  function grid(data, st) {
    const ix = BB.index();
    const envs = ix.envs.map((e, i) => i).filter((e) => BB.passEnv(e, st));
    const works = ix.workloads.filter((w) => (!st.suite || w.suite === st.suite) && (!st.workload || w.workload === st.workload));
    const cell = new Map();
    for (const line of data.lines) {
      if ((st.device && line.device !== st.device) || (st.dtype && line.dtype !== st.dtype)) continue;
      const key = line.w + "/" + line.e;
      if (!cell.has(key)) cell.set(key, new Map());
      const acc = cell.get(key);
      line.r.forEach((r, k) => {
        if (line.v[k] === null) return;
        const a = acc.get(r) || [0, 0];
        a[0] += line.v[k] * line.c[k]; a[1] += line.c[k];
        acc.set(r, a);
      });
    }
    const head = el("tr", {}, el("th", {}, "workload"), envs.map((e) => el("th", {}, BB.envName(e))));
    const body = el("tbody");
    let drawn = 0;
    for (const w of works) {
      const tr = el("tr", {}, el("td", {},
        el("a", { href: BB.link("workload.html", { suite: w.suite, workload: w.workload }) }, w.workload),
        el("div", { class: "muted" }, w.suite)));
      for (const e of envs) {
        const acc = cell.get(w.i + "/" + e);
        const rs = acc ? [...acc.keys()].sort((a, b) => a - b).filter((r) => BB.passTime(ix.runs[r].t, st)) : [];
        if (!rs.length) { tr.appendChild(el("td", { class: "muted" }, "no data")); continue; }
        const ys = rs.map((r) => acc.get(r)[0] / acc.get(r)[1]);
        const tip = (i) => {
          const run = ix.runs[rs[i]];
          return [w.workload + " on " + BB.envName(e), "vs. its usual speed: " + BB.pct(Math.exp(ys[i]) - 1),
            "run: " + run.label, "commit: " + BB.short(run.sha), "date: " + BB.date(run.t)];
        };
        const last = Math.exp(ys[ys.length - 1]) - 1;
        tr.appendChild(el("td", {},
          el("a", { href: BB.link("history.html", { suite: w.suite, workload: w.workload, env: ix.envs[e].id }) },
            BB.sparkline(rs.map((r) => ix.runs[r].t), ys, tip)),
          el("div", { class: last < -0.05 ? "down" : "muted" }, "latest " + BB.pct(last))));
        drawn++;
      }
      body.appendChild(tr);
    }
    return BB.section("Workloads: throughput relative to each point's usual (geometric mean over sizes)",
      el("table", { class: "grid", "data-sparklines": drawn }, el("thead", {}, head), body));
  }

  BB.start({
    filters: ["suite", "workload", "device", "dtype", "env", "from", "to"],
    async render(main, st) {
      main.appendChild(regressions(st));
      const runs = await latestRuns(st);
      main.appendChild(runs);
      main.appendChild(grid(await BB.load("overview"), st));
      window.BB_READY = performance.now();
    },
  });
})();
