/* Compare: two runs (or the latest runs of two environments) point by point.
 * ratio = median(B) / median(A): above 1 B is slower. The marks are the CLI's
 * (analysis/verdict.py; its minimum effect m comes with the index): "slower" when the
 * difference is significant and ratio >= 1 + m, "faster" when significant and
 * ratio <= 1 / (1 + m), "same" when significant but smaller, "not significant"
 * otherwise. Significance is compare's test: where both runs measured a point in two
 * processes or more, Welch's t on the log process medians (the headline m is their
 * geometric mean; lv: s^2/k of a run's point, pk: k), its p-values adjusted over the
 * points tested (Benjamini-Hochberg) and significant when q < alpha (ix.verdict.alpha).
 * A point of one process a side (the CLI bootstraps its samples, which the page does
 * not hold) is significant when the interval from the two medians' CIs
 * (lo(B) / hi(A) to hi(B) / lo(A)) excludes 1, and its row says "(CI overlap)".
 * Where both runs counted a point's instructions (run --metric instructions), the row
 * also has both counts, their ratio head/base and the CLI's instruction mark
 * (analysis/verdict.py mark_counts, its minimum effect m' with the index): "not
 * significant" when either side's counts moved by more than m' / 2 (ins_noise), else
 * "slower" at ratio >= 1 + m', "faster" at ratio <= 1 / (1 + m'), "same" between. A
 * point both runs counted and neither timed has the time mark "untimed", as in the CLI.
 * MDE: the smallest slowdown the CLI's verdict marks "slower" with probability
 * ix.verdict.mde.power, significance and the minimum effect together
 * (analysis/detectable.py verdict_effect): exp(x * se) - 1, se and df Welch's, x the
 * factor Python computed on a grid of df and log(1 + m) / se (ix.verdict.mde),
 * interpolated here. The summary gives the median and, when no point could see the minimum
 * effect, says so, as `benchbench compare` does.
 * The run-to-run term (analysis/rerun.py) is compare's too, for each environment's
 * newest run and each open alert's first bad run against the run before it (the page's
 * first pair, an alert's link; the run file's rr, read by dashboard/run_to_run.py):
 * every point's se multiplied by its run-to-run factor (its own, rr.run_to_run.own, where
 * its earlier pairs gave one) and, once the shared shift is
 * judged against the earlier shifts (rr.after_shift), every point judged beyond it
 * (head/base ÷ shift), the shift on its own line. Any other pair is judged within its
 * two runs only, and the page says so with the command that adds the term.
 * With one run only, the page lists every point of it with its status and reason.
 * A site built from a store holds the points of some runs only (the newest per
 * environment, those open alerts name: index runs with `data`); the pickers offer
 * those, and a run without them is named with the command that compares it. */
"use strict";
(function () {
  const BB = window.BB, el = BB.el;
  const ORDER = { failing: 0, slower: 1, gone: 2, new: 3, faster: 4, same: 5, "not significant": 6, untimed: 7, skipped: 8 };
  /* Instructions per call of row k of a run document, or null (not counted, or 0). */
  const ins = (doc, k) => (doc.ins && doc.ins[k] > 0 ? doc.ins[k] : null);
  /* The instruction mark of a point both runs counted (mark_counts), or null. */
  function countMark(da, i, db, j, m) {
    const a = ins(da, i), b = ins(db, j);
    if (a === null || b === null) return null;
    const na = da.ins_noise[i], nb = db.ins_noise[j];
    if (na === null || nb === null) return null;
    const ratio = b / a;
    const mark = 2 * Math.max(na, nb) > m ? "not significant" : ratio >= 1 + m ? "slower" : ratio <= 1 / (1 + m) ? "faster" : "same";
    return { ratio, mark };
  }

  /* Linear interpolation of ys at x on the grid xs (held at the ends). */
  function lerp(xs, ys, x) {
    if (x <= xs[0]) return ys[0];
    for (let k = 1; k < xs.length; k++) {
      if (x <= xs[k]) return ys[k - 1] + (ys[k] - ys[k - 1]) * (x - xs[k - 1]) / (xs[k] - xs[k - 1]);
    }
    return ys[ys.length - 1];
  }
  /* The verdict's factor at df and floor = log(1 + m) / se (analysis/detectable.py
   * factor_table): linear in the floor within each df row, then linear in df; beyond the
   * last floor the factor's excess over the floor holds. */
  function factorAt(t, df, floor) {
    const fs = t.floor, last = fs[fs.length - 1];
    const row = (ys) => (floor > last ? ys[ys.length - 1] - last + floor : lerp(fs, ys, floor));
    return lerp(t.df, t.factor.map(row), df);
  }
  /* Welch's se and df of row i of A against row j of B, or null (one process a side). */
  function welch(da, i, db, j) {
    if (!da.lv || !db.lv) return null;
    const va = da.lv[i], vb = db.lv[j], ka = da.pk[i], kb = db.pk[j];
    if (va === null || vb === null || !(ka > 1) || !(kb > 1)) return null;
    const den = (va * va) / (ka - 1) + (vb * vb) / (kb - 1);
    return { se: Math.sqrt(va + vb), df: den > 0 ? (va + vb) ** 2 / den : ka + kb - 2 };
  }
  /* The MDE of a point of Welch se and df (a fraction), or null. */
  function detectable(t, w) {
    if (!t || !w) return null;
    const m = t.min_effect;
    if (w.se === 0) return m;
    return Math.expm1(factorAt(t, w.df, Math.log1p(m) / w.se) * w.se);
  }
  /* log Gamma (Lanczos) and the regularized incomplete beta (continued fraction, Lentz):
   * Student's t two-sided p = I_{df / (df + t^2)}(df / 2, 1 / 2). */
  function lgamma(x) {
    const g = [676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
      12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7];
    if (x < 0.5) return Math.log(Math.PI / Math.abs(Math.sin(Math.PI * x))) - lgamma(1 - x);
    x -= 1;
    let a = 0.99999999999980993;
    const t = x + 7.5;
    for (let k = 0; k < 8; k++) a += g[k] / (x + k + 1);
    return 0.5 * Math.log(2 * Math.PI) + (x + 0.5) * Math.log(t) - t + Math.log(a);
  }
  function betacf(a, b, x) {
    let c = 1, d = 1 - ((a + b) * x) / (a + 1);
    d = 1 / (Math.abs(d) < 1e-300 ? 1e-300 : d);
    let h = d;
    for (let m = 1; m <= 300; m++) {
      for (const num of [(m * (b - m) * x) / ((a + 2 * m - 1) * (a + 2 * m)), (-(a + m) * (a + b + m) * x) / ((a + 2 * m) * (a + 2 * m + 1))]) {
        d = 1 + num * d; d = 1 / (Math.abs(d) < 1e-300 ? 1e-300 : d);
        c = 1 + num / c; if (Math.abs(c) < 1e-300) c = 1e-300;
        h *= d * c;
      }
      if (Math.abs(d * c - 1) < 1e-12) break;
    }
    return h;
  }
  function ibeta(a, b, x) {
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    const front = Math.exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * Math.log(x) + b * Math.log(1 - x));
    return x < (a + 1) / (a + b + 2) ? (front * betacf(a, b, x)) / a : 1 - (front * betacf(b, a, 1 - x)) / b;
  }
  const tTwoSided = (t, df) => (t === 0 ? 1 : ibeta(df / 2, 0.5, df / (df + t * t)));
  /* t(df, 1 - alpha / 2), by bisection on the two-sided p. */
  function tCritical(df, alpha) {
    let lo = 0, hi = 1e4;
    for (let k = 0; k < 100; k++) {
      const mid = (lo + hi) / 2;
      if (tTwoSided(mid, df) > alpha) lo = mid; else hi = mid;
    }
    return (lo + hi) / 2;
  }
  /* Benjamini-Hochberg q-values of p-values, in order (scipy's false_discovery_control). */
  function adjusted(ps) {
    const n = ps.length, order = ps.map((p, k) => k).sort((x, y) => ps[x] - ps[y]), q = new Array(n);
    let running = 1;
    for (let r = n - 1; r >= 0; r--) {
      running = Math.min(running, (ps[order[r]] * n) / (r + 1));
      q[order[r]] = Math.min(1, running);
    }
    return q;
  }
  // As benchbench.analysis.detectable.format_effect: above 10 (1000 %) the digits say nothing.
  const effect = (e, m) => (e === null ? "–" : e <= m ? "< " + (100 * m).toFixed(0) + " %" : e > 10 ? "> 1000 %" : e < 0.1 ? (100 * e).toFixed(1) + " %" : (100 * e).toFixed(0) + " %");

  function runPicker(name, current, st) {
    const ix = BB.index();
    const sel = el("select", { name, on: { change: (ev) => BB.setState({ [name]: ev.target.value }) } }, el("option", { value: "" }, "—"));
    const runs = ix.runs.filter((r) => r.id === current || (r.data && BB.passEnv(r.env, st) && BB.passTime(r.t, st))).slice(-400).reverse();
    for (const r of runs) {
      sel.appendChild(el("option", { value: r.id, selected: r.id === current ? "selected" : null }, BB.date(r.t) + " · " + BB.envName(r.env) + " · " + r.label));
    }
    return el("label", { class: "picker" }, name === "a" ? "base " : "head ", sel);
  }
  function envPicker(st) {
    const ix = BB.index();
    const pick = (name) => {
      const sel = el("select", { name: "env-" + name, on: { change: (ev) => {
        const e = Number(ev.target.value), runs = ix.runs.filter((r) => r.env === e && r.data);
        if (runs.length) BB.setState({ [name]: runs[runs.length - 1].id });
      } } }, el("option", { value: "" }, "—"));
      ix.envs.forEach((env, e) => sel.appendChild(el("option", { value: e }, env.machine)));
      return sel;
    };
    return el("div", { class: "pickers" }, "or the latest runs of two environments: ", pick("a"), " vs ", pick("b"));
  }
  /* Which runs the pickers offer, and where the others are. */
  function held() {
    const ix = BB.index(), n = ix.runs.filter((r) => r.data).length;
    if (n === ix.runs.length) return null;
    const which = ix.newest_runs ? "the newest " + ix.newest_runs + " runs of each environment and runs open regressions name" : "some runs";
    return el("p", { class: "muted held" }, "The pickers list the " + n + " of " + ix.runs.length + " runs whose points this site holds (" + which +
      "); older runs are in the store: ", el("code", {}, "benchbench compare RUN_A RUN_B"), ".");
  }
  /* A run this site holds no points of: the command that shows them instead. */
  function notHeld(main, runs) {
    const ids = runs.map((r) => r.id);
    const command = ids.length === 2 ? "benchbench compare " + ids.join(" ") : "benchbench show " + ids[0];
    main.appendChild(BB.section("Not in this site", el("p", { class: "not-held" },
      runs.filter((r) => !r.data).map((r) => r.label + " (" + BB.envName(r.env) + ", " + BB.date(r.t) + ")").join(", ") +
      ": this site holds the points of recent runs only; the store has them all: ", el("code", {}, command), ".")));
    window.BB_READY = performance.now();
  }
  const rows = (doc) => { const m = new Map(); doc.b.forEach((b, k) => m.set(b, k)); return m; };
  const status = (s) => ["ok", "skipped", "error"][s] || "error";

  function single(main, run, doc, st) {
    const list = doc.b.map((b, k) => k).filter((k) => BB.passBench(doc.b[k], st));
    // The instr/call column after the CI, as in `benchbench show`, when any point has a count.
    const counted = list.some((k) => ins(doc, k) !== null);
    const headers = ["point", "status", "median", "CI", ...(counted ? ["instr/call"] : []), "throughput", "reason / warnings"];
    main.appendChild(BB.section("Run " + run.label + " · " + BB.envName(run.env) + " · " + BB.date(run.t),
      el("p", {}, "commit ", BB.commit(run), " · ", run.ok + " ok, " + run.skipped + " skipped, " + run.error + " failed"),
      BB.table(headers, list.map((k) => ({
        cls: status(doc.s[k]), cells: [BB.benchLabel(doc.b[k]), status(doc.s[k]), BB.seconds(doc.m[k]),
          doc.m[k] === null ? "–" : BB.seconds(doc.lo[k]) + " – " + BB.seconds(doc.hi[k]),
          ...(counted ? [BB.count(ins(doc, k))] : []), BB.si(doc.thr[k], doc.unit[k]),
          [doc.reason[String(k)], ...(doc.warn[String(k)] || [])].filter(Boolean).join("; ")] })), "single")));
  }

  BB.start({
    filters: ["suite", "workload", "device", "dtype", "env", "from", "to"],
    async render(main, st) {
      const ix = BB.index();
      let a = BB.findRun(st.a), b = BB.findRun(st.b);
      if (!a && !b) {
        const runs = ix.runs.filter((r) => r.data && BB.passEnv(r.env, st));
        const env = runs.length ? runs[runs.length - 1].env : 0, same = runs.filter((r) => r.env === env);
        a = same[same.length - 2]; b = same[same.length - 1];
      }
      main.appendChild(el("div", { class: "pickers" }, runPicker("a", a && a.id, st), runPicker("b", b && b.id, st)));
      main.appendChild(envPicker(st));
      const note = held();
      if (note) main.appendChild(note);
      const chosen = [a, b].filter((r, k, all) => r && all.indexOf(r) === k);
      if (chosen.some((r) => !r.data)) { notHeld(main, chosen); return; }
      if (!a || !b || a === b) {
        const run = a || b;
        if (run) single(main, run, await BB.load("runs/r" + run.i), st);
        else main.appendChild(el("p", {}, "Pick two runs to compare."));
        window.BB_READY = performance.now();
        return;
      }
      const [da, db] = await Promise.all([BB.load("runs/r" + a.i), BB.load("runs/r" + b.i)]);
      const ra = rows(da), rb = rows(db);
      // compare's run-to-run term and shared shift, where the page holds them for this pair.
      const rr = db.rr && db.rr.base === a.id ? db.rr : null;
      const factor = rr && rr.run_to_run ? rr.run_to_run.factor : 1;
      const shift = rr && rr.after_shift ? rr.shift.ratio : 1;
      // Beyond a judged shift compare states the MDE for a change at a third of the points.
      const mdeTable = rr && rr.after_shift ? ix.verdict.mde_beyond_shift : ix.verdict.mde;
      const benches = [...new Set([...da.b, ...db.b])].filter((k) => BB.passBench(k, st));
      const out = [];
      let logSum = 0, n = 0, insLogSum = 0, insN = 0;
      const mi = ix.verdict.instructions_min_effect, alpha = ix.verdict.alpha || 0.05;
      for (const k of benches) {
        const i = ra.get(k), j = rb.get(k);
        const okA = i !== undefined && da.s[i] === 0, okB = j !== undefined && db.s[j] === 0;
        // Both runs counted it: the instruction mark, whatever the time says.
        const counts = okA && okB ? countMark(da, i, db, j, mi) : null;
        if (counts) { insLogSum += Math.log(counts.ratio); insN++; }
        let mark, ratio = null, lo = null, hi = null, mde = null, p = null;
        if (j !== undefined && db.s[j] === 2) mark = "failing";
        else if (j === undefined) mark = "gone";
        else if (db.s[j] === 1) mark = "skipped";
        else if (!okA) mark = "new";
        else if (!da.m[i] || !db.m[j]) mark = counts ? "untimed" : "new";
        else {
          logSum += Math.log(db.m[j] / da.m[i]); n++;  // the geometric mean: the points' own ratios
          ratio = db.m[j] / da.m[i] / shift;
          // The point's own run-to-run factor where its earlier pairs gave one (rerun.py _own).
          const f = rr && rr.run_to_run && rr.run_to_run.own && k in rr.run_to_run.own ? rr.run_to_run.own[k] : factor;
          const own = welch(da, i, db, j), w = own && { se: own.se * f, df: own.df };
          if (w && w.se > 0) {
            // compare's interval: ratio * exp(± t(df, 1 - alpha / 2) * se), from the p-value's t.
            p = tTwoSided(Math.abs(Math.log(ratio)) / w.se, w.df);
            const half = tCritical(w.df, alpha) * w.se;
            lo = ratio * Math.exp(-half); hi = ratio * Math.exp(half);
          } else if (w) {
            p = ratio === 1 ? 1 : 0; lo = hi = ratio;
          } else {
            lo = db.lo[j] !== null && da.hi[i] ? db.lo[j] / da.hi[i] / shift : null;
            hi = db.hi[j] !== null && da.lo[i] ? db.hi[j] / da.lo[i] / shift : null;
          }
          mde = detectable(mdeTable, w);
        }
        const why = j !== undefined ? [db.reason[String(j)], ...(db.warn[String(j)] || [])].filter(Boolean).join("; ") : "";
        out.push({ k, mark, ratio, lo, hi, mde, p, ma: i !== undefined ? da.m[i] : null, mb: j !== undefined ? db.m[j] : null, why,
          ia: i !== undefined ? ins(da, i) : null, ib: j !== undefined ? ins(db, j) : null,
          iratio: counts ? counts.ratio : null, imark: counts ? counts.mark : null });
      }
      // The time marks, as compare gives them: the t-tested points as one family (q < alpha),
      // the others by their intervals (CI overlap).
      const timed = out.filter((o) => o.ratio !== null && !o.mark);
      const tested = timed.filter((o) => o.p !== null), qs = adjusted(tested.map((o) => o.p));
      tested.forEach((o, r) => { o.q = qs[r]; });
      const me = ix.verdict.min_effect;
      for (const o of timed) {
        const significant = o.p !== null ? o.q < alpha : (o.lo !== null && o.lo > 1) || (o.hi !== null && o.hi < 1);
        o.mark = !significant ? "not significant" : o.ratio >= 1 + me ? "slower" : o.ratio <= 1 / (1 + me) ? "faster" : "same";
        o.overlap = o.p === null;
      }
      // A point slower in instructions is a regression as in the CLI: it ranks with the slower ones.
      const rank = (o) => Math.min(ORDER[o.mark], o.imark ? ORDER[o.imark] : Infinity);
      out.sort((p, q) => rank(p) - rank(q) || (q.ratio || q.iratio || 0) - (p.ratio || p.iratio || 0));
      const tally = (m) => out.filter((o) => o.mark === m).length;
      const itally = (m) => out.filter((o) => o.imark === m).length;
      const summary = [el("p", { class: "summary" }, "geometric mean of time ratios head/base over " + n + " points: ",
        el("strong", { class: "geomean" }, n ? (Math.exp(logSum / n)).toFixed(3) : "–"),
        " · " + tally("slower") + " slower, " + tally("faster") + " faster, " + tally("same") + " same, " +
        tally("not significant") + " not significant, " + tally("failing") + " failing, " + tally("new") + " new, " +
        tally("gone") + " gone" + (tally("untimed") ? ", " + tally("untimed") + " untimed (counted only)" : ""))];
      summary.push(el("p", { class: "run-to-run" }, rr
        ? "intervals and tests " + rr.scope + (rr.after_shift ? "; head/base ÷ shift: each point's ratio over the shared shift (x" + shift.toFixed(3) + "), as its interval, MDE and mark are; the geometric mean is of the points' own ratios" : "")
        : "intervals and tests within these runs only; ", rr ? "" : el("code", {}, "benchbench compare " + a.id + " " + b.id), rr ? "" : " adds the run-to-run term and the shared shift the store's earlier runs give (this page holds them for each environment's newest run and each open alert's first bad run, against the run before it)"));
      if (rr && rr.shift) summary.push(el("p", { class: "shift" + (rr.shift.mark === "slower" ? " slower" : "") }, rr.shift.line));
      const m = ix.verdict.min_effect;
      const mdes = out.map((o) => o.mde).filter((e) => e !== null).sort((x, y) => x - y);
      if (mdes.length) {
        const median = mdes[Math.floor((mdes.length - 1) / 2)] / 2 + mdes[Math.ceil((mdes.length - 1) / 2)] / 2;
        const how = " (power " + (100 * mdeTable.power).toFixed(0) + " %, alpha " + String(+mdeTable.alpha_point.toPrecision(2)) + " a point: " + mdeTable.words + ")";
        summary.push(el("p", { class: "detectable" + (mdes[0] > m ? " blind" : "") }, mdes[0] > m
          ? "this comparison could not have seen a change below " + effect(Math.min(mdes[0], 10)) + how + "; median " + effect(median) + "; use `ab` or `--metric instructions`"
          : "smallest detectable change: median " + effect(median) + " over " + mdes.length + " points, " + mdes.filter((e) => e <= m).length +
            " could see the " + (100 * m).toFixed(0) + " % minimum effect" + how));
      }
      if (insN) {
        summary.push(el("p", { class: "summary instructions" }, "geometric mean of instruction count ratios head/base over " + insN + " points: ",
          el("strong", { class: "geomean-instructions" }, (Math.exp(insLogSum / insN)).toFixed(4)),
          " · " + itally("slower") + " slower, " + itally("faster") + " faster, " + itally("same") + " same, " +
          itally("not significant") + " not significant (minimum effect " + (100 * mi).toFixed(1) + " %)"));
      }
      const headers = ["point", "base median", "head median", shift !== 1 ? "head/base ÷ shift" : "head/base", "CI of head/base", "MDE", "verdict",
        ...(insN ? ["base instr/call", "head instr/call", "instr head/base", "instr verdict"] : []), "reason / warnings"];
      main.appendChild(BB.section("head versus base", ...summary,
        el("div", { class: "side" },
          el("div", {}, el("strong", {}, "base: "), a.label, " · ", BB.envName(a.env), " · ", BB.date(a.t), " · ", BB.commit(a)),
          el("div", {}, el("strong", {}, "head: "), b.label, " · ", BB.envName(b.env), " · ", BB.date(b.t), " · ", BB.commit(b))),
        BB.table(headers, out.map((o) => ({
          cls: (o.imark === "slower" && o.mark !== "failing" ? "slower" : o.mark).replace(" ", "-"),
          cells: [BB.benchLabel(o.k), BB.seconds(o.ma), BB.seconds(o.mb), o.ratio === null ? "–" : o.ratio.toFixed(3),
            o.lo === null || o.hi === null ? "–" : o.lo.toFixed(3) + " – " + o.hi.toFixed(3), effect(o.mde, ix.verdict.min_effect), o.mark + (o.overlap ? " (CI overlap)" : ""),
            ...(insN ? [BB.count(o.ia), BB.count(o.ib), o.iratio === null ? "–" : o.iratio.toFixed(4), o.imark || "–"] : []), o.why] })), "compare")));
      window.BB_READY = performance.now();
    },
  });
})();
