/* Workload: throughput versus size from the latest run per environment, one line
 * per variant / dtype / device / environment, Q1-Q3 bands, machine ceilings,
 * model fits and crossovers, and the points that failed. */
"use strict";
(function () {
  const BB = window.BB, el = BB.el;

  function seriesLabel(s) {
    const how = s.timing ? ", " + s.timing : "";
    return s.variant + " [" + s.dtype + ", " + s.device + how + "]" + (s.params ? " (" + s.params + ")" : "") + " @ " + BB.envName(s.e);
  }

  BB.start({
    filters: ["suite", "device", "dtype", "env"],
    async render(main, st) {
      const ix = BB.index(), w = BB.pickWorkload(st);
      main.appendChild(BB.workloadPicker(st, w));
      if (!w) { main.appendChild(el("p", {}, "No workload matches these filters.")); return; }
      const data = await BB.load("workload/w" + w.i);
      main.appendChild(el("h1", {}, w.workload, el("span", { class: "muted" }, " · " + w.suite)));
      main.appendChild(el("p", {}, el("a", { href: BB.link("history.html", { suite: w.suite, workload: w.workload }) }, "history of this workload")));
      const keep = data.series.map((s, i) => i).filter((i) => {
        const s = data.series[i];
        return (!st.device || s.device === st.device) && (!st.dtype || s.dtype === st.dtype) && BB.passEnv(s.e, st);
      });
      const units = [...new Set(keep.map((i) => data.series[i].unit))];
      // Environments differ by dash, fits are thin dots: colour stays the line's identity.
      const envDash = (e) => [undefined, [10, 4], [12, 3, 3, 3]][e % 3];
      for (const unit of units) {
        const idx = keep.filter((i) => data.series[i].unit === unit);
        const series = [];
        idx.forEach((i, k) => {
          const s = data.series[i], run = ix.runs[s.r], color = BB.COLORS[k % BB.COLORS.length];
          series.push({
            label: seriesLabel(s), color, x: s.x, y: s.y, band: { lo: s.q1, hi: s.q3 }, dash: envDash(s.e),
            tip: (j) => [seriesLabel(s), "n = " + s.x[j], "throughput: " + BB.si(s.y[j], unit),
              "CI: " + BB.si(s.lo[j], unit) + " – " + BB.si(s.hi[j], unit),
              "Q1–Q3: " + BB.si(s.q1[j], unit) + " – " + BB.si(s.q3[j], unit),
              "run: " + run.label, "commit: " + BB.short(run.sha), "date: " + BB.date(run.t)],
          });
          if (s.fit) {
            series.push({ label: "fit " + seriesLabel(s), color, x: s.x, y: s.fit.y, dash: [1, 4], points: false, width: 1,
              tip: (j) => ["fit " + seriesLabel(s), "n = " + s.x[j], "model: " + BB.si(s.fit.y[j], unit),
                "t0 = " + BB.seconds(s.fit.t0_s) + ", rate = " + BB.si(s.fit.rate, "items/s")] });
          }
        });
        const hlines = data.ceilings.filter((c) => c.kind === "peak" && c.unit === unit && BB.passEnv(c.e, st))
          .map((c) => ({ value: c.value, label: c.label + " · " + BB.envName(c.e) + " " + BB.si(c.value, unit), color: "#444" }));
        // One marker per cache size: environments with the same cache share it.
        const caches = new Map();
        for (const c of data.ceilings) {
          if (c.kind !== "cache" || c.unit !== unit || !BB.passEnv(c.e, st)) continue;
          const key = c.label + "@" + c.size.toPrecision(3);
          if (!caches.has(key)) caches.set(key, { x: c.size, label: c.label, envs: [] });
          caches.get(key).envs.push(BB.envName(c.e));
        }
        const vlines = [...caches.values()].map((c) => ({ x: c.x, label: c.label + " " + c.envs.join(", "), color: "#999" }));
        for (const c of data.crossovers) {
          if (keep.includes(c.a) && keep.includes(c.b) && data.series[c.a].unit === unit) {
            vlines.push({ x: c.size, label: "crossover", color: "#9467bd", dash: false });
          }
        }
        BB.chart(main, { title: "Throughput (" + unit + ") versus size", xlog: true, ylog: true, xLabel: "size (elements)",
          yfmt: (v) => BB.si(v, unit), xfmt: (v) => BB.si(v), series, hlines, vlines, height: 380 });
      }
      if (!units.length) main.appendChild(el("p", { class: "muted" }, "No timed point matches these filters."));
      const cross = data.crossovers.filter((c) => keep.includes(c.a) && keep.includes(c.b));
      if (cross.length) {
        main.appendChild(BB.section("Crossovers (from the fitted t = t0 + n / rate)", BB.table(["faster above n", "than", "n"],
          cross.map((c) => {
            const hi = data.series[c.faster_above], lo = data.series[c.faster_above === c.a ? c.b : c.a];
            return [seriesLabel(hi), seriesLabel(lo), BB.si(c.size)];
          }))));
      }
      const fits = keep.filter((i) => data.series[i].fit);
      if (fits.length) {
        main.appendChild(BB.section("Model fits", BB.table(["line", "t0 (fixed cost)", "asymptotic rate"],
          fits.map((i) => [seriesLabel(data.series[i]), BB.seconds(data.series[i].fit.t0_s), BB.si(data.series[i].fit.rate, "items/s")]))));
      }
      const fails = data.failures.filter((f) => BB.passBench(f.b, st) && BB.passEnv(ix.runs[f.r].env, st));
      if (fails.length) {
        main.appendChild(BB.section("Points that did not run (" + fails.length + ")", BB.table(["point", "environment", "run", "status", "reason"],
          fails.map((f) => ({ cls: f.status, cells: [BB.benchLabel(f.b), BB.envName(ix.runs[f.r].env), ix.runs[f.r].label, f.status, f.reason || "no reason recorded"] })))));
      }
      window.BB_READY = performance.now();
    },
  });
})();
