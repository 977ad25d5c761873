/* Compare: two runs (or the latest runs of two environments) point by point.
 * ratio = median(B) / median(A): above 1 B is slower. The marks are the CLI's
 * (analysis/verdict.py; its minimum effect m comes with the index): "slower" when the
 * difference is significant and ratio >= 1 + m, "faster" when significant and
 * ratio <= 1 / (1 + m), "same" when significant but smaller, "not significant"
 * otherwise. The page holds each run's median CI, not its samples, so significance
 * here is the conservative one: the interval from the two medians' CIs
 * (lo(B) / hi(A) to hi(B) / lo(A)) excludes 1. `benchbench compare` has the exact test.
 * With one run only, the page lists every point of it with its status and reason. */
"use strict";
(function () {
  const BB = window.BB, el = BB.el;
  const ORDER = { failing: 0, slower: 1, gone: 2, new: 3, faster: 4, same: 5, "not significant": 6, skipped: 7 };

  function runPicker(name, current, st) {
    const ix = BB.index();
    const sel = el("select", { name, on: { change: (ev) => BB.setState({ [name]: ev.target.value }) } }, el("option", { value: "" }, "—"));
    const runs = ix.runs.filter((r) => (BB.passEnv(r.env, st) || r.id === current) && (BB.passTime(r.t, st) || r.id === current)).slice(-400).reverse();
    for (const r of runs) {
      sel.appendChild(el("option", { value: r.id, selected: r.id === current ? "selected" : null }, BB.date(r.t) + " · " + BB.envName(r.env) + " · " + r.label));
    }
    return el("label", { class: "picker" }, name === "a" ? "run A (base) " : "run B ", sel);
  }
  function envPicker(st) {
    const ix = BB.index();
    const pick = (name) => {
      const sel = el("select", { name: "env-" + name, on: { change: (ev) => {
        const e = Number(ev.target.value), runs = ix.runs.filter((r) => r.env === e);
        if (runs.length) BB.setState({ [name]: runs[runs.length - 1].id });
      } } }, el("option", { value: "" }, "—"));
      ix.envs.forEach((env, e) => sel.appendChild(el("option", { value: e }, env.machine)));
      return sel;
    };
    return el("div", { class: "pickers" }, "or the latest runs of two environments: ", pick("a"), " vs ", pick("b"));
  }
  const rows = (doc) => { const m = new Map(); doc.b.forEach((b, k) => m.set(b, k)); return m; };
  const status = (s) => ["ok", "skipped", "error"][s] || "error";

  function single(main, run, doc, st) {
    const list = doc.b.map((b, k) => k).filter((k) => BB.passBench(doc.b[k], st));
    main.appendChild(BB.section("Run " + run.label + " · " + BB.envName(run.env) + " · " + BB.date(run.t),
      el("p", {}, "commit ", BB.commit(run), " · ", run.ok + " ok, " + run.skipped + " skipped, " + run.error + " failed"),
      BB.table(["point", "status", "median", "CI", "throughput", "reason / warnings"], list.map((k) => ({
        cls: status(doc.s[k]), cells: [BB.benchLabel(doc.b[k]), status(doc.s[k]), BB.seconds(doc.m[k]),
          BB.seconds(doc.lo[k]) + " – " + BB.seconds(doc.hi[k]), BB.si(doc.thr[k], doc.unit[k]),
          [doc.reason[String(k)], ...(doc.warn[String(k)] || [])].filter(Boolean).join("; ")] })))));
  }

  BB.start({
    filters: ["suite", "workload", "device", "dtype", "env", "from", "to"],
    async render(main, st) {
      const ix = BB.index();
      let a = BB.findRun(st.a), b = BB.findRun(st.b);
      if (!a && !b) {
        const runs = ix.runs.filter((r) => BB.passEnv(r.env, st));
        const env = runs.length ? runs[runs.length - 1].env : 0, same = runs.filter((r) => r.env === env);
        a = same[same.length - 2]; b = same[same.length - 1];
      }
      main.appendChild(el("div", { class: "pickers" }, runPicker("a", a && a.id, st), runPicker("b", b && b.id, st)));
      main.appendChild(envPicker(st));
      if (!a || !b || a === b) {
        const run = a || b;
        if (run) single(main, run, await BB.load("runs/r" + run.i), st);
        else main.appendChild(el("p", {}, "Pick two runs to compare."));
        window.BB_READY = performance.now();
        return;
      }
      const [da, db] = await Promise.all([BB.load("runs/r" + a.i), BB.load("runs/r" + b.i)]);
      const ra = rows(da), rb = rows(db);
      const benches = [...new Set([...da.b, ...db.b])].filter((k) => BB.passBench(k, st));
      const out = [];
      let logSum = 0, n = 0;
      for (const k of benches) {
        const i = ra.get(k), j = rb.get(k);
        const okA = i !== undefined && da.s[i] === 0 && da.m[i], okB = j !== undefined && db.s[j] === 0 && db.m[j];
        let mark, ratio = null, lo = null, hi = null;
        if (j !== undefined && db.s[j] === 2) mark = "failing";
        else if (j === undefined) mark = "gone";
        else if (db.s[j] === 1) mark = "skipped";
        else if (!okA) mark = "new";
        else {
          ratio = db.m[j] / da.m[i];
          lo = db.lo[j] !== null && da.hi[i] ? db.lo[j] / da.hi[i] : null;
          hi = db.hi[j] !== null && da.lo[i] ? db.hi[j] / da.lo[i] : null;
          const m = ix.verdict.min_effect, significant = (lo !== null && lo > 1) || (hi !== null && hi < 1);
          mark = !significant ? "not significant" : ratio >= 1 + m ? "slower" : ratio <= 1 / (1 + m) ? "faster" : "same";
          logSum += Math.log(ratio); n++;
        }
        const why = j !== undefined ? [db.reason[String(j)], ...(db.warn[String(j)] || [])].filter(Boolean).join("; ") : "";
        out.push({ k, mark, ratio, lo, hi, ma: i !== undefined ? da.m[i] : null, mb: j !== undefined ? db.m[j] : null, why });
      }
      out.sort((p, q) => ORDER[p.mark] - ORDER[q.mark] || (q.ratio || 0) - (p.ratio || 0));
      const count = (m) => out.filter((o) => o.mark === m).length;
      main.appendChild(BB.section("B versus A",
        el("p", { class: "summary" }, "geometric mean of time ratios B/A over " + n + " points: ",
          el("strong", { class: "geomean" }, n ? (Math.exp(logSum / n)).toFixed(3) : "–"),
          " · " + count("slower") + " slower, " + count("faster") + " faster, " + count("same") + " same, " +
          count("not significant") + " not significant, " + count("failing") + " failing, " + count("new") + " new, " +
          count("gone") + " gone"),
        el("div", { class: "side" },
          el("div", {}, el("strong", {}, "A: "), a.label, " · ", BB.envName(a.env), " · ", BB.date(a.t), " · ", BB.commit(a)),
          el("div", {}, el("strong", {}, "B: "), b.label, " · ", BB.envName(b.env), " · ", BB.date(b.t), " · ", BB.commit(b))),
        BB.table(["point", "A median", "B median", "B/A", "CI of B/A", "verdict", "reason / warnings"], out.map((o) => ({
          cls: o.mark.replace(" ", "-"), cells: [BB.benchLabel(o.k), BB.seconds(o.ma), BB.seconds(o.mb), o.ratio === null ? "–" : o.ratio.toFixed(3),
            o.lo === null || o.hi === null ? "–" : o.lo.toFixed(3) + " – " + o.hi.toFixed(3), o.mark, o.why] })), "compare")));
      window.BB_READY = performance.now();
    },
  });
})();
