/* Breakdown: the captured calls of the latest run that holds any, per capture and
 * device, ranked by count × median with their shares, throughput and % of the
 * roofline ceiling, the coverage line (the sum beside the whole callable) and the
 * compiled whole, as `benchbench breakdown` prints them. */
"use strict";
(function () {
  const BB = window.BB, el = BB.el;

  function coverage(b) {
    const sum = "sum of " + b.calls.length + " timed calls × count = " + BB.seconds(b.sum_s);
    if (b.whole_s === null || b.coverage === null) return sum + "; the whole callable was not measured in this run";
    const rest = b.whole_s - b.sum_s;
    return sum + "; whole callable " + BB.seconds(b.whole_s) + "; coverage " + b.coverage.toFixed(2) +
      " (remainder " + BB.seconds(Math.abs(rest)) + (rest >= 0
        ? ": Python, dispatch and autograd around the ops, and the views left out)"
        : " over: the calls measured alone add up to more than the whole)");
  }

  // FLOP/s where the work model counts FLOPs (matmuls, convolutions), else bytes/s.
  function rate(c) {
    if (c.flop_per_s) return BB.si(c.flop_per_s, "FLOP/s");
    if (c.bytes_per_s) return BB.si(c.bytes_per_s, "B/s");
    return "–";
  }

  function compiled(b) {
    if (b.compiled_s === null || b.compiled_s === undefined) return null;
    let line = "torch.compile: whole " + BB.seconds(b.compiled_s);
    if (b.whole_s !== null && b.compiled_s > 0) line += ", " + (b.whole_s / b.compiled_s).toFixed(2) + "x the eager whole's speed";
    if (b.compile_s !== null) {
      line += "; compiling took " + BB.seconds(b.compile_s);
      if (b.compile_pays_after !== null) line += ", paid back after " + Math.round(b.compile_pays_after).toLocaleString("en-US") + " calls";
      else if (b.whole_s !== null) line += ", never paid back: the compiled callable is not faster";
    }
    return line;
  }

  BB.start({
    filters: ["suite", "device"],
    async render(main, st) {
      const data = await BB.load("breakdown");
      main.appendChild(el("h1", {}, "Breakdown"));
      if (data.run === null) {
        main.appendChild(el("p", { class: "muted" }, "No run holds captured calls. Run a captured suite first: ",
          el("code", {}, "benchbench capture ... -o my_ops.py && benchbench run my_ops.py"), " or ",
          el("code", {}, "benchbench run models"), "."));
        window.BB_READY = performance.now();
        return;
      }
      const run = BB.index().runs[data.run];
      main.appendChild(el("p", {}, "run " + run.label + " · " + BB.envName(run.env) + " · " + BB.date(run.t) + " · commit ", BB.commit(run)));
      const shown = data.breakdowns.filter((b) => (!st.suite || b.suite === st.suite) && (!st.device || b.device === st.device));
      if (!shown.length) main.appendChild(el("p", {}, "No capture matches these filters."));
      for (const b of shown) {
        const rows = b.calls.map((c, i) => [String(i + 1), c.workload, c.op, c.dtype, String(c.count),
          BB.seconds(c.median_s), BB.seconds(c.total_s), (100 * c.share).toFixed(1) + " %", rate(c),
          c.percent_of_peak === null ? "–" : c.percent_of_peak.toFixed(0) + " %"]);
        const parts = [BB.table(["#", "call", "op", "dtype", "count", "median", "count × median", "share",
          "throughput", "% of ceiling"], rows),
          el("p", { class: "coverage" }, coverage(b))];
        const line = compiled(b);
        if (line !== null) parts.push(el("p", { class: "compiled" }, line));
        if (b.not_measured.length) {
          parts.push(el("p", { class: "muted" }, "not measured (their time is missing from the sum): " +
            b.not_measured.map((x) => x[0] + " (" + x[1] + ")").join("; ")));
        }
        main.appendChild(BB.section(b.capture + " · " + b.suite + " · " + b.device, ...parts));
      }
      window.BB_READY = performance.now();
    },
  });
})();
