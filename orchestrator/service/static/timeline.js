// The run as a timeline: a lane per agent (children under their parents), each turn a bar in
// time, forks drawn from the parent's lane to the child's, synods, evictions and approvals as
// marks; a click on a bar opens that agent at that turn. Only the lanes in view are drawn, so a
// run of thousands of agents scrolls as lightly as one of three.
"use strict";

const Timeline = (() => {
  const ROW = 22, LABEL = 150, AXIS = 26, BUFFER = 10;
  let box = null, open = null, frame = 0;
  const s = Axis.s;

  function mount(el, onOpen) {
    box = el; open = onOpen;
    box.addEventListener("scroll", () => draw());
    window.addEventListener("resize", () => draw());
  }

  // redraws are coalesced to one per frame however many events arrive
  function draw() {
    if (!box || frame) return;
    frame = requestAnimationFrame(() => { frame = 0; paint(); });
  }

  function paint() {
    if (box.offsetParent === null) return;  // hidden: drawn when shown
    const lanes = Model.lanes(), span = Model.span();
    const W = Math.max(box.clientWidth - 2, 400);
    let axis = box.querySelector("svg.axis"), body = box.querySelector(".lanes");
    if (!axis) {
      axis = s("svg", { class: "axis" }); body = document.createElement("div"); body.className = "lanes";
      box.append(axis, body);
    }
    if (!lanes.length || !span) { axis.replaceChildren(s("text", { x: 8, y: 16, class: "muted" }, "no agent yet")); body.replaceChildren(); return; }
    const now = Date.now();
    const running = lanes.some(({ a }) => a.end === null && a.start !== null);
    const t0 = span[0], t1 = running ? Math.max(span[1], Math.min(now, span[1] + 3600000)) : span[1];
    const x = (t) => LABEL + (W - LABEL - 12) * (t - t0) / Math.max(t1 - t0, 1);
    // the axis: time since the run's first record, in a unit that suits it
    const { unit, div } = Axis.timeUnit(t1 - t0);
    axis.setAttribute("width", W); axis.setAttribute("height", AXIS);
    const ax = [s("line", { x1: LABEL, x2: W - 12, y1: AXIS - 6, y2: AXIS - 6, class: "axisline" }),
                s("text", { x: 4, y: AXIS - 10, class: "axislabel" }, `time (${unit})`)];
    for (const v of Axis.ticks(0, (t1 - t0) / div, Math.max(2, Math.floor((W - LABEL) / 90)))) {
      const xx = x(t0 + v * div);
      ax.push(s("line", { x1: xx, x2: xx, y1: AXIS - 10, y2: AXIS - 6, class: "axisline" }), s("text", { x: xx, y: AXIS - 12, class: "tick", "text-anchor": "middle" }, Axis.fmt(v)));
    }
    axis.replaceChildren(...ax);
    // the lanes in view (and a few either side)
    body.style.height = lanes.length * ROW + "px";
    const first = Math.max(0, Math.floor(box.scrollTop / ROW) - BUFFER);
    const last = Math.min(lanes.length, Math.ceil((box.scrollTop + box.clientHeight) / ROW) + BUFFER);
    const index = new Map(lanes.map((l, i) => [l.a.id, i]));
    const svg = s("svg", { class: "lanesvg", width: W, height: (last - first) * ROW });
    svg.style.top = first * ROW + "px";
    const y = (i) => (i - first) * ROW;
    const synodAt = new Map();
    for (const g of Model.synods()) synodAt.set(g[0].parent + "@" + g[0].forkTurn, g);
    for (let i = first; i < last; i++) {
      const { a, depth } = lanes[i];
      const g = s("g", { class: "lane", "data-agent": a.id });
      const yy = y(i);
      if (i % 2) g.append(s("rect", { x: 0, y: yy, width: W, height: ROW, class: "stripe" }));
      const label = s("text", { x: 4 + 10 * Math.min(depth, 8), y: yy + 15, class: "lanelabel" + (a.end === null ? " running" : "") }, a.id);
      label.addEventListener("click", () => open(a.id, null));
      g.append(label);
      const start = a.start ?? a.last ?? t0, end = a.end ?? (a.last !== null && !running ? a.last : now);
      g.append(s("line", { x1: x(start), x2: x(Math.max(end, start)), y1: yy + 11, y2: yy + 11, class: "life" }));
      for (const t of a.turns) {
        const tEnd = t.t1 ?? end;
        const r = s("rect", { x: x(t.t0), y: yy + 4, width: Math.max(x(tEnd) - x(t.t0) - 1, 2), height: ROW - 8,
                              class: "turnbar", "data-agent": a.id, "data-turn": t.turn });
        r.append(s("title", {}, `${a.id} · turn ${t.turn} · ${((tEnd - t.t0) / 1000).toFixed(2)} s`));
        r.addEventListener("click", () => open(a.id, t.turn));
        g.append(r);
      }
      for (const e of a.evictions) {
        const xx = x(e.t ?? end);
        const m = s("path", { d: `M${xx - 5},${yy + 1} L${xx + 5},${yy + 1} L${xx},${yy + 9} Z`, class: "mark evict", "data-agent": a.id, "data-span": e.span.join("-") });
        m.append(s("title", {}, `evicted turns ${e.span[0]}–${e.span[1]} by ${e.by}${e.note ? ": " + e.note : ""}`));
        m.addEventListener("click", () => open(a.id, e.span[0]));
        g.append(m);
      }
      for (const p of a.approvals) {
        const m = s("circle", { cx: x(p.t ?? end), cy: yy + ROW - 4, r: 3.5, class: "mark approval " + (p.type === "approval_requested" ? "asked" : p.decision), "data-agent": a.id });
        m.append(s("title", {}, p.type === "approval_requested" ? `approval asked: ${p.tool} (${p.call_id})` : `${p.decision === "approve" ? "approved" : "rejected"} ${p.call_id}`));
        m.addEventListener("click", () => open(a.id, p.turn));
        g.append(m);
      }
      // a fork: from the parent's lane down to this one, at the child's start
      if (a.parent && index.has(a.parent) && a.start !== null) {
        const py = y(index.get(a.parent)) + 11, xx = x(a.start);
        const synod = synodAt.get(a.parent + "@" + a.forkTurn);
        g.append(s("line", { x1: xx, x2: xx, y1: py, y2: yy + 11, class: "fork" + (synod ? " synod" : "") }));
        if (synod && synod[0] === a) {
          const d = s("path", { d: `M${xx},${py - 6} L${xx + 6},${py} L${xx},${py + 6} L${xx - 6},${py} Z`, class: "mark synod", "data-agent": a.parent });
          d.append(s("title", {}, `synod: ${synod.length} children forked at turn ${a.forkTurn} of ${a.parent} (${synod.map((c) => c.id).join(", ")})`));
          g.append(d);
        }
      }
      svg.append(g);
    }
    body.replaceChildren(svg);
    if (!window.__timelinePaint && lanes.length) window.__timelinePaint = performance.now();  // for the scale test
  }

  return { mount, draw };
})();
