/* Charts: uPlot (canvas, ~50 KB, MIT) for the zoomable line charts, plain SVG for
 * sparklines. uPlot gives drag-to-zoom, double-click reset and legend toggles; the
 * Q1-Q3 bands, ceilings and markers are drawn here in its hooks, and the tooltip
 * is ours so that it shows run, commit and date with text nodes only.
 */
"use strict";
(function () {
  const BB = window.BB;
  BB.COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
    "#17becf", "#7f7f7f", "#bcbd22", "#393b79", "#ad494a"];
  BB.charts = [];

  function alpha(hex, a) {
    const n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + a + ")";
  }

  /* spec: {title, height, xlog, ylog, time, xfmt, yfmt, series: [{label, color, x, y, band: {lo, hi},
   *        dash, tip(i) -> [lines]}], hlines: [{value, label, color}], vlines: [{x, label, color, dash}]} */
  BB.chart = function (container, spec) {
    const box = BB.el("div", { class: "chart" });
    container.appendChild(box);
    const series = spec.series.filter((s) => s.x.length);
    if (!series.length) {
      box.appendChild(BB.el("p", { class: "muted" }, "Nothing to plot for this selection."));
      return null;
    }
    const joined = uPlot.join(series.map((s) => [s.x, s.y.map((v) => (v === null ? null : v))]));
    const pos = series.map((s) => { const m = new Map(); s.x.forEach((x, i) => m.set(x, i)); return m; });
    const xfmt = spec.xfmt || ((v) => String(v));
    const yfmt = spec.yfmt || ((v) => BB.si(v));
    const width = Math.max(320, Math.min(container.clientWidth || 900, 1200) - 24);

    function drawBands(u) {
      const ctx = u.ctx, b = u.bbox;
      ctx.save();
      ctx.beginPath(); ctx.rect(b.left, b.top, b.width, b.height); ctx.clip();
      series.forEach((s, k) => {
        if (!s.band || !u.series[k + 1].show) return;
        const pts = [];
        s.x.forEach((x, i) => { if (s.band.lo[i] !== null && s.band.hi[i] !== null) pts.push(i); });
        if (!pts.length) return;
        ctx.beginPath();
        pts.forEach((i, n) => {
          const X = u.valToPos(s.x[i], "x", true), Y = u.valToPos(s.band.hi[i], "y", true);
          n ? ctx.lineTo(X, Y) : ctx.moveTo(X, Y);
        });
        for (let n = pts.length - 1; n >= 0; n--) {
          const i = pts[n];
          ctx.lineTo(u.valToPos(s.x[i], "x", true), u.valToPos(s.band.lo[i], "y", true));
        }
        ctx.closePath();
        ctx.fillStyle = alpha(s.color, 0.18);
        ctx.fill();
      });
      ctx.restore();
    }
    function drawMarks(u) {
      const ctx = u.ctx, b = u.bbox, px = devicePixelRatio || 1;
      ctx.save();
      ctx.font = 11 * px + "px sans-serif";
      ctx.textAlign = "left";
      ctx.textBaseline = "alphabetic";
      ctx.lineWidth = px;
      for (const h of spec.hlines || []) {
        const Y = u.valToPos(h.value, "y", true);
        if (!(Y >= b.top && Y <= b.top + b.height)) continue;
        ctx.strokeStyle = ctx.fillStyle = h.color || "#555";
        ctx.setLineDash([6 * px, 4 * px]);
        ctx.beginPath(); ctx.moveTo(b.left, Y); ctx.lineTo(b.left + b.width, Y); ctx.stroke();
        ctx.fillText(h.label, b.left + 4 * px, Y - 3 * px);
      }
      const placed = [];
      for (const v of spec.vlines || []) {
        const X = u.valToPos(v.x, "x", true);
        if (!(X >= b.left && X <= b.left + b.width)) continue;
        ctx.strokeStyle = ctx.fillStyle = v.color || "#888";
        ctx.setLineDash(v.dash === false ? [] : [3 * px, 3 * px]);
        ctx.beginPath(); ctx.moveTo(X, b.top); ctx.lineTo(X, b.top + b.height); ctx.stroke();
        if (!v.label) continue;
        // Labels of nearby markers would overprint: step each one down until it is clear.
        if (placed.some((p) => p.text === v.label && Math.abs(p.x - X) < 10 * px)) continue;
        const w = ctx.measureText(v.label).width;
        // Near the right edge the label goes on the left of its line so it is not cut.
        const x0 = X + w + 6 * px > b.left + b.width ? X - w - 6 * px : X;
        let row = 0;
        while (placed.some((p) => p.row === row && x0 < p.x1 && x0 + w + 6 * px > p.x0)) row++;
        placed.push({ row, x: X, x0, x1: x0 + w + 6 * px, text: v.label });
        ctx.fillText(v.label, x0 + 3 * px, b.top + (12 + 13 * row) * px);
      }
      ctx.restore();
      box.dataset.drawn = String(Number(box.dataset.drawn || 0) + 1);
    }
    function onCursor(u) {
      const idx = u.cursor.idx;
      if (idx === null || idx === undefined || u.cursor.left < 0) { BB.hideTip(); return; }
      let best = -1, dist = Infinity;
      for (let k = 1; k < u.series.length; k++) {
        const v = u.data[k][idx];
        if (!u.series[k].show || v === null || v === undefined) continue;
        // A model line lying on its data must not hide the measured point: 4 px handicap.
        const d = Math.abs(u.valToPos(v, "y") - u.cursor.top) + (series[k - 1].points === false ? 4 : 0);
        if (d < dist) { dist = d; best = k; }
      }
      if (best < 0) { BB.hideTip(); return; }
      const s = series[best - 1], i = pos[best - 1].get(u.data[0][idx]);
      const r = u.over.getBoundingClientRect();
      BB.showTip(r.left + u.cursor.left, r.top + u.cursor.top, s.tip ? s.tip(i) : [s.label, yfmt(s.y[i])]);
    }

    // The ceilings are part of the story (how far below peak is this line?): keep them in view.
    const hv = (spec.hlines || []).map((h) => h.value).filter((v) => v > 0);
    // Bands (Q1-Q3, CI) must fit too, or a noisy point's band runs off the plot.
    let bandLo = Infinity, bandHi = -Infinity;
    for (const s of series) {
      if (!s.band) continue;
      for (const v of s.band.lo) if (v !== null && (!spec.ylog || v > 0) && v < bandLo) bandLo = v;
      for (const v of s.band.hi) if (v !== null && v > bandHi) bandHi = v;
    }
    function yRange(u, min, max) {
      if (min === null || max === null) return [min, max];
      const lo = Math.min(min, bandLo, ...hv), hi = Math.max(max, bandHi, ...hv);
      if (spec.ylog) return uPlot.rangeLog(lo, hi, 10, true);
      const pad = (hi - lo) * 0.05 || Math.abs(hi) * 0.05 || 1;
      return [lo - pad, hi + pad];
    }
    const opts = {
      title: spec.title,
      width: width,
      height: spec.height || 320,
      ms: 1,
      scales: {
        x: { time: !!spec.time, distr: spec.xlog ? 3 : 1 },
        y: { distr: spec.ylog ? 3 : 1, range: yRange },
      },
      axes: [
        { values: (u, splits) => splits.map((v) => (v === null ? "" : xfmt(v))), label: spec.xLabel },
        { values: (u, splits) => splits.map((v) => (v === null ? "" : yfmt(v))), size: 92, label: spec.yLabel },
      ],
      legend: { live: false },
      cursor: { drag: { x: true, y: false }, points: { size: 7 } },
      series: [{}].concat(series.map((s) => ({
        label: s.label, stroke: s.color, width: s.width || 1.5, spanGaps: true, dash: s.dash,
        // Markers on a 365-run line would merge into a thick band; the cursor still marks points.
        points: { show: s.points !== false && s.x.length <= 120, size: 4, fill: s.color },
      }))),
      hooks: { drawAxes: [drawBands], draw: [drawMarks], setCursor: [onCursor] },
    };
    if (spec.time) delete opts.axes[0].values;
    const plot = new uPlot(opts, joined, box);
    plot.over.addEventListener("mouseleave", BB.hideTip);
    box.appendChild(BB.el("p", { class: "hint" }, "Drag to zoom, double-click to reset, click a legend entry to hide it."));
    BB.charts.push(plot);
    return plot;
  };

  /* Inline SVG sparkline: values over time, hover shows the nearest point. */
  BB.sparkline = function (xs, ys, tip, opts) {
    const NS = "http://www.w3.org/2000/svg", W = (opts && opts.width) || 180, H = 40, P = 3;
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.setAttribute("width", W); svg.setAttribute("height", H);
    svg.setAttribute("class", "spark");
    const vals = ys.filter((v) => v !== null);
    if (!vals.length) return svg;
    const x0 = Math.min(...xs), x1 = Math.max(...xs);
    const lo = Math.min(-0.05, ...vals), hi = Math.max(0.05, ...vals);
    const X = (x) => P + ((x - x0) / (x1 - x0 || 1)) * (W - 2 * P);
    const Y = (y) => H - P - ((y - lo) / (hi - lo)) * (H - 2 * P);
    const zero = document.createElementNS(NS, "line");
    for (const [k, v] of [["x1", P], ["x2", W - P], ["y1", Y(0)], ["y2", Y(0)], ["class", "zero"]]) zero.setAttribute(k, v);
    svg.appendChild(zero);
    const line = document.createElementNS(NS, "polyline");
    line.setAttribute("points", xs.map((x, i) => (ys[i] === null ? "" : X(x).toFixed(1) + "," + Y(ys[i]).toFixed(1))).filter(Boolean).join(" "));
    const last = vals[vals.length - 1];
    line.setAttribute("class", last < -0.05 ? "down" : last > 0.05 ? "up" : "flat");
    svg.appendChild(line);
    const dot = document.createElementNS(NS, "circle");
    dot.setAttribute("r", 2.5);
    dot.setAttribute("cx", X(xs[xs.length - 1])); dot.setAttribute("cy", Y(ys[ys.length - 1] || 0));
    svg.appendChild(dot);
    svg.addEventListener("mousemove", (ev) => {
      const r = svg.getBoundingClientRect(), fx = ((ev.clientX - r.left) / r.width) * W;
      let best = 0;
      xs.forEach((x, i) => { if (Math.abs(X(x) - fx) < Math.abs(X(xs[best]) - fx)) best = i; });
      dot.setAttribute("cx", X(xs[best])); dot.setAttribute("cy", Y(ys[best] || 0));
      BB.showTip(ev.clientX, ev.clientY, tip(best));
    });
    svg.addEventListener("mouseleave", BB.hideTip);
    return svg;
  };
})();
