/* History: the median time of one point, run after run, per environment, with its
 * CI band, change points, alerts, annotations and failed runs; x is time or commit.
 * Where runs counted the point's instructions, a second chart draws the count per call. */
"use strict";
(function () {
  const BB = window.BB, el = BB.el;

  function benchPicker(benches, b, st) {
    const sel = el("select", { name: "bench", on: { change: (ev) => BB.setState({ bench: ev.target.value }) } });
    for (const k of benches) {
      const x = BB.index().benchmarks[k];
      sel.appendChild(el("option", { value: x.id, selected: k === b ? "selected" : null }, BB.benchLabel(k)));
    }
    const mode = el("select", { name: "x", on: { change: (ev) => BB.setState({ x: ev.target.value }) } },
      el("option", { value: "time" }, "time"),
      el("option", { value: "commit", selected: st.x === "commit" ? "selected" : null }, "commit"));
    return el("div", { class: "pickers" }, el("label", { class: "picker" }, "point ", sel), el("label", { class: "picker" }, "x axis ", mode));
  }

  BB.start({
    filters: ["suite", "device", "dtype", "env", "from", "to"],
    async render(main, st) {
      const ix = BB.index(), w = BB.pickWorkload(st);
      main.appendChild(BB.workloadPicker(st, w));
      if (!w) { main.appendChild(el("p", {}, "No workload matches these filters.")); return; }
      const data = await BB.load("history/w" + w.i);
      const benches = [...new Set(data.lines.map((l) => l.b))].filter((b) => BB.passBench(b, st));
      if (!benches.length) { main.appendChild(el("p", {}, "No point of this workload matches these filters.")); return; }
      let b = benches.find((k) => ix.benchmarks[k].id === st.bench);
      if (b === undefined) b = benches[0];
      main.appendChild(el("h1", {}, BB.benchLabel(b)));
      main.appendChild(benchPicker(benches, b, st));
      const lines = data.lines.filter((l) => l.b === b && BB.passEnv(l.e, st));
      // Commit mode: x is the position of the run among all shown runs, in time order.
      const shown = [...new Set(lines.flatMap((l) => l.r.filter((r) => BB.passTime(ix.runs[r].t, st))))].sort((p, q) => ix.runs[p].t - ix.runs[q].t);
      const ordinal = new Map(shown.map((r, k) => [r, k]));
      const byCommit = st.x === "commit";
      const X = (r) => (byCommit ? ordinal.get(r) : ix.runs[r].t);
      const series = [], vlines = [], fails = [], cps = [], counted = [];
      lines.forEach((l, k) => {
        const color = BB.COLORS[k % BB.COLORS.length];
        const at = l.r.map((r, j) => j).filter((j) => BB.passTime(ix.runs[l.r[j]].t, st));
        const label = BB.envName(l.e);
        series.push({
          label, color, x: at.map((j) => X(l.r[j])), y: at.map((j) => l.m[j]),
          band: { lo: at.map((j) => (l.s[j] === 0 ? l.lo[j] : null)), hi: at.map((j) => (l.s[j] === 0 ? l.hi[j] : null)) },
          tip: (i) => {
            const j = at[i], run = ix.runs[l.r[j]];
            return [label, "median: " + BB.seconds(l.m[j]), "CI: " + BB.seconds(l.lo[j]) + " – " + BB.seconds(l.hi[j]),
              "run: " + run.label, "commit: " + BB.short(run.sha), "date: " + BB.date(run.t)];
          },
        });
        if (l.ins) {
          counted.push({
            label, color, x: at.map((j) => X(l.r[j])), y: at.map((j) => l.ins[j]),
            tip: (i) => {
              const j = at[i], run = ix.runs[l.r[j]];
              return [label, "instructions per call: " + BB.count(l.ins[j]), "run: " + run.label,
                "commit: " + BB.short(run.sha), "date: " + BB.date(run.t)];
            },
          });
        }
        for (const j of at) if (l.s[j] !== 0) fails.push({ e: l.e, r: l.r[j], s: l.s[j], reason: l.reason[String(j)] });
        for (const j of l.cp) {
          if (!at.includes(j)) continue;
          vlines.push({ x: X(l.r[j]), label: "change", color: "#9467bd" });
          cps.push({ e: l.e, r: l.r[j], before: l.m[j - 1], after: l.m[j] });
        }
      });
      const alerts = ix.alerts.filter((a) => a.b === b && BB.passEnv(a.env, st) && a.bad >= 0 && (!byCommit || ordinal.has(a.bad)));
      for (const a of alerts) vlines.push({ x: X(a.bad), label: a.severity + " " + BB.pct(a.rel_change), color: "#d62728", dash: false });
      const notes = data.annotations.filter((n) => (n.b === -1 || n.b === b) && (n.e === -1 || BB.passEnv(n.e, st)) && n.t !== null);
      for (const n of notes) {
        const x = byCommit ? ordinal.get(shown.find((r) => ix.runs[r].t >= n.t)) : n.t;
        if (x !== undefined) vlines.push({ x, label: n.text, color: "#2ca02c" });
      }
      const xfmt = byCommit ? (v) => (Number.isInteger(v) && shown[v] !== undefined ? BB.short(ix.runs[shown[v]].sha) : "") : undefined;
      const xLabel = byCommit ? "commit (run order)" : "date";
      // Runs that only counted (--metric instructions) have no median: no empty time chart.
      if (!counted.length || lines.some((l) => l.m.some((v) => v !== null))) {
        BB.chart(main, {
          title: "Median time per run (lower is better), CI of the median shaded", time: !byCommit, series, vlines, height: 360,
          yfmt: BB.seconds, xfmt, xLabel,
        });
      }
      if (counted.length) {
        BB.chart(main, {
          title: "Instructions per call per run, under callgrind (lower is better)", time: !byCommit, series: counted, vlines,
          height: 280, yfmt: BB.count, xfmt, xLabel,
        });
      }
      if (cps.length) {
        main.appendChild(BB.section("Change points", BB.table(["environment", "from run", "commit", "median before", "after"],
          cps.map((c) => [BB.envName(c.e), ix.runs[c.r].label, BB.commit(ix.runs[c.r]), BB.seconds(c.before), BB.seconds(c.after)]))));
      }
      if (alerts.length) {
        // Both runs' points in this site: a link to compare them; else the CLI does it.
        const both = (a) => a.good >= 0 && ix.runs[a.good].data && ix.runs[a.bad].data;
        main.appendChild(BB.section("Alerts", BB.table(["severity", "status", "environment", "change", "last good → first bad", "compare"],
          alerts.map((a) => [a.severity, a.status, BB.envName(a.env), BB.pct(a.rel_change),
            el("span", {}, BB.commit(ix.runs[a.good]), " → ", BB.commit(ix.runs[a.bad])),
            both(a) ? el("a", { href: BB.link("compare.html", { a: ix.runs[a.good].id, b: ix.runs[a.bad].id }) }, "compare")
              : el("code", {}, "benchbench compare " + (a.good >= 0 ? ix.runs[a.good].id : "RUN") + " " + ix.runs[a.bad].id)]))));
      }
      if (notes.length) {
        main.appendChild(BB.section("Annotations", BB.table(["date", "environment", "note"],
          notes.map((n) => [BB.date(n.t), n.e === -1 ? "all" : BB.envName(n.e), n.text]))));
      }
      if (fails.length) {
        main.appendChild(BB.section("Runs where this point did not run (" + fails.length + ")", BB.table(["date", "environment", "run", "status", "reason"],
          fails.map((f) => [BB.date(ix.runs[f.r].t), BB.envName(f.e), ix.runs[f.r].label, f.s === 1 ? "skipped" : "error", f.reason || "no reason recorded"]))));
      }
      window.BB_READY = performance.now();
    },
  });
})();
