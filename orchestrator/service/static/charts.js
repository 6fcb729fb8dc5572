// Charts a person can read: axes with units. The context each agent sent per turn (tokens), where
// the evictions drop it; the run's cost over time (USD); the share of input tokens read from the
// provider's cache over time (%). All from the provider calls on the event stream (Model).
"use strict";

const Charts = (() => {
  const s = Axis.s, H = 190, M = { l: 58, r: 14, t: 12, b: 38 };
  const PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#eeca3b", "#9d755d", "#ff9da6", "#bab0ac"];
  const MAX_SERIES = 10;
  let frame = 0, selected = null;

  // one chart: axes with ticks and their units, lines, and marks with titles
  function plot(svg, { xs, ys, xLabel, yLabel, series, marks = [], yFmt = Axis.fmt, legend = true }) {
    const W = Math.max(svg.parentElement.clientWidth - 2, 320);
    svg.setAttribute("width", W); svg.setAttribute("height", H); svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    const [x0, x1] = xs, [y0, y1] = ys;
    const X = (v) => M.l + (W - M.l - M.r) * (v - x0) / Math.max(x1 - x0, 1e-12);
    const Y = (v) => H - M.b - (H - M.t - M.b) * (v - y0) / Math.max(y1 - y0, 1e-12);
    const out = [s("line", { x1: M.l, x2: W - M.r, y1: H - M.b, y2: H - M.b, class: "axisline" }),
                 s("line", { x1: M.l, x2: M.l, y1: M.t, y2: H - M.b, class: "axisline" }),
                 s("text", { x: (M.l + W - M.r) / 2, y: H - 4, class: "axislabel", "text-anchor": "middle" }, xLabel),
                 s("text", { x: 12, y: (H - M.b + M.t) / 2, class: "axislabel", "text-anchor": "middle", transform: `rotate(-90 12 ${(H - M.b + M.t) / 2})` }, yLabel)];
    for (const v of Axis.ticks(x0, x1, Math.max(2, Math.floor((W - M.l) / 80)))) {
      out.push(s("line", { x1: X(v), x2: X(v), y1: H - M.b, y2: H - M.b + 4, class: "axisline" }),
               s("text", { x: X(v), y: H - M.b + 15, class: "tick", "text-anchor": "middle" }, Axis.fmt(v)));
    }
    for (const v of Axis.ticks(y0, y1, 4)) {
      out.push(s("line", { x1: M.l, x2: W - M.r, y1: Y(v), y2: Y(v), class: "grid" }),
               s("text", { x: M.l - 5, y: Y(v) + 4, class: "tick", "text-anchor": "end" }, yFmt(v)));
    }
    series.forEach((se, i) => {
      const pts = se.points.map(([a, b]) => `${X(a).toFixed(1)},${Y(b).toFixed(1)}`).join(" ");
      const line = s("polyline", { points: pts, class: "series" + (se.strong ? " strong" : ""), stroke: se.color, "data-series": se.name });
      line.append(s("title", {}, se.name));
      out.push(line);
      if (se.points.length === 1) out.push(s("circle", { cx: X(se.points[0][0]), cy: Y(se.points[0][1]), r: 2.5, fill: se.color }));
      if (legend && series.length > 1) out.push(s("text", { x: W - M.r - 4, y: M.t + 10 + 12 * i, class: "legend", fill: se.color, "text-anchor": "end" }, se.name));
    });
    for (const m of marks) {
      const e = s("path", { d: `M${X(m.x) - 4},${Y(m.y) - 9} L${X(m.x) + 4},${Y(m.y) - 9} L${X(m.x)},${Y(m.y) - 2} Z`, class: "mark evict", "data-agent": m.agent });
      e.append(s("title", {}, m.title));
      out.push(e);
    }
    svg.replaceChildren(...out);
  }

  function context(svg) {
    const all = [...Model.agents.values()].filter((a) => a.calls.length);
    if (!all.length) return svg.replaceChildren(s("text", { x: 8, y: 16, class: "muted" }, "no provider call yet"));
    all.sort((a, b) => (b.id === selected) - (a.id === selected) || b.calls.length - a.calls.length);
    const shown = all.slice(0, MAX_SERIES);
    let xMax = 1, yMax = 1;
    const series = shown.map((a, i) => {
      const pts = a.calls.map((c) => [c.turn, c.context / 1000]);
      for (const [xx, yy] of pts) { xMax = Math.max(xMax, xx); yMax = Math.max(yMax, yy); }
      return { name: a.id + (all.length > MAX_SERIES && i === shown.length - 1 ? ` (+${all.length - MAX_SERIES} more)` : ""), color: PALETTE[i % PALETTE.length], points: pts, strong: a.id === selected };
    });
    const marks = [];
    for (const a of shown) {
      for (const e of a.evictions) {
        const before = [...a.calls].reverse().find((c) => c.turn <= e.turn);
        marks.push({ x: e.turn, y: before ? before.context / 1000 : 0, agent: a.id,
                     title: `${a.id}: turns ${e.span[0]}–${e.span[1]} evicted by ${e.by} after turn ${e.turn}${e.note ? ": " + e.note : ""}` });
      }
    }
    plot(svg, { xs: [0, xMax], ys: [0, yMax * 1.1], xLabel: "turn", yLabel: "context sent (k tokens)", series, marks });
  }

  function calls() {
    const out = [];
    for (const a of Model.agents.values()) for (const c of a.calls) if (c.t !== null && c.t !== undefined) out.push(c);
    return out.sort((a, b) => a.t - b.t);
  }

  function overTime(svg, what) {
    const cs = calls();
    if (!cs.length) return svg.replaceChildren(s("text", { x: 8, y: 16, class: "muted" }, "no provider call yet"));
    const t0 = cs[0].t, span = Math.max(cs[cs.length - 1].t - t0, 1);
    const { unit, div } = Axis.timeUnit(span);
    let cost = 0, inp = 0, read = 0;
    const pts = cs.map((c) => { cost += c.cost; inp += c.context; read += c.read;
      return [(c.t - t0) / div, what === "cost" ? cost : inp ? 100 * read / inp : 0]; });
    const last = pts[pts.length - 1][1];
    if (what === "cost") {
      plot(svg, { xs: [0, span / div], ys: [0, Math.max(last * 1.1, 1e-6)], xLabel: `time since the first call (${unit})`, yLabel: "cost (USD)",
                  yFmt: (v) => "$" + (v >= 1 ? v.toFixed(2) : +v.toPrecision(2)), series: [{ name: `$${last.toFixed(4)}`, color: "#4c78a8", points: pts }] });
    } else {
      plot(svg, { xs: [0, span / div], ys: [0, 100], xLabel: `time since the first call (${unit})`, yLabel: "cache-read share (%)",
                  yFmt: (v) => v + "%", series: [{ name: `${last.toFixed(1)}%`, color: "#e45756", points: pts }] });
    }
    return last;
  }

  function paint() {
    const box = document.getElementById("charts");
    if (!box || box.offsetParent === null) return;
    context(document.getElementById("chart-context"));
    overTime(document.getElementById("chart-cost"), "cost");
    overTime(document.getElementById("chart-cache"), "cache");
  }

  function draw(sel) {
    if (sel !== undefined) selected = sel;
    if (frame) return;
    frame = requestAnimationFrame(() => { frame = 0; paint(); });
  }

  return { draw };
})();
