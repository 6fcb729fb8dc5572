// What the run's event stream says, folded per agent for the timeline and the charts: when each
// agent started and ended, its turns in time, its evictions, approvals and provider calls (the
// context it sent, the price, the cache reads). Events that carry no time (`evicted`, `marked`,
// …) take the last time their agent's log gave. Plus the axis helpers both drawings use.
"use strict";

const Model = (() => {
  const agents = new Map();  // id → the agent's folded figures, in the order first seen

  function get(id) {
    let a = agents.get(id);
    if (!a) {
      a = { id, parent: null, kind: null, start: null, end: null, reason: null, last: null, turn: 0,
            turns: [], evictions: [], approvals: [], calls: [], marks: [], forkTurn: null, resumed: [] };
      agents.set(id, a);
    }
    return a;
  }

  function add(ev) {
    if (!ev.agent) return;
    const a = get(ev.agent);
    const t = ev.at ? Date.parse(ev.at) : a.last;
    if (ev.at) a.last = Math.max(a.last || 0, t);
    switch (ev.type) {
      case "started":
        a.parent = ev.parent; a.kind = ev.kind; a.start = t;
        break;
      case "turn_started": {
        const prev = a.turns[a.turns.length - 1];
        if (prev && prev.t1 === null) prev.t1 = t;
        a.turns.push({ turn: ev.turn, t0: t, t1: null }); a.turn = ev.turn;
        break;
      }
      case "evicted": a.evictions.push({ t, span: ev.span, note: ev.note, by: ev.by, turn: a.turn }); break;
      case "marked": case "swept": a.marks.push({ t, type: ev.type, turn: a.turn }); break;
      case "approval_requested": case "approval_decided":
        a.approvals.push({ t, type: ev.type, call_id: ev.call_id, tool: ev.tool, decision: ev.decision, turn: a.turn }); break;
      case "usage":
        if (ev.usage) {
          const u = ev.usage;
          a.calls.push({ t, turn: a.turn, context: u.input_tokens + u.cache_read_tokens + u.cache_write_tokens,
                         read: u.cache_read_tokens, cost: ev.cost_usd || 0 });
        }
        break;
      case "ended": {
        a.end = t; a.reason = ev.reason;
        const prev = a.turns[a.turns.length - 1];
        if (prev && prev.t1 === null) prev.t1 = t;
        break;
      }
      case "resumed": a.end = null; a.reason = null; a.resumed.push(t); break;
    }
  }

  const collator = new Intl.Collator(undefined, { numeric: true });
  const natural = (a, b) => collator.compare(a, b);  // t2 before t10

  // lanes: parents before their children, children in the order they started
  function lanes() {
    const kids = new Map(), roots = [];
    for (const a of agents.values()) {
      if (a.parent && agents.has(a.parent)) { if (!kids.has(a.parent)) kids.set(a.parent, []); kids.get(a.parent).push(a); }
      else roots.push(a);
    }
    // in the order they started (an agent not started yet last), ids in natural order on a tie
    const when = (a) => (a.start ?? a.last ?? Infinity);
    const order = (x, y) => when(x) - when(y) || natural(x.id, y.id);
    roots.sort(order);
    for (const ks of kids.values()) ks.sort(order);
    const out = [], seen = new Set();
    const visit = (root) => {  // iterative: a deep lineage never overflows the stack
      const todo = [[root, 0]];
      while (todo.length) {
        const [a, depth] = todo.pop();
        if (seen.has(a.id)) continue;
        seen.add(a.id); out.push({ a, depth });
        const ks = kids.get(a.id) || [];
        for (let i = ks.length - 1; i >= 0; i--) todo.push([ks[i], depth + 1]);
      }
    };
    for (const r of roots) visit(r);
    return out;
  }

  // the turn ``a`` was in at time ``t`` (the history arrives agent by agent, so a child's fork
  // turn is found by time, not by what its parent's stream had said when the child's came)
  function turnAt(a, t) {
    let lo = 0, hi = a.turns.length - 1, found = null;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (a.turns[mid].t0 <= t) { found = a.turns[mid].turn; lo = mid + 1; } else hi = mid - 1;
    }
    return found;
  }

  // synods: two or more children of one parent forked at the same turn of it
  function synods() {
    const groups = new Map();
    for (const a of agents.values()) {
      const p = a.parent && agents.get(a.parent);
      a.forkTurn = p && a.start !== null ? turnAt(p, a.start) : null;
      if (!p || a.kind !== "mnemon" || a.forkTurn === null) continue;
      const key = a.parent + "@" + a.forkTurn;
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(a);
    }
    return [...groups.values()].filter((g) => g.length >= 2);
  }

  function span() {
    let t0 = Infinity, t1 = -Infinity;
    for (const a of agents.values()) {
      for (const t of [a.start, a.end, a.last]) if (t !== null && t !== undefined) { t0 = Math.min(t0, t); t1 = Math.max(t1, t); }
    }
    return t0 === Infinity ? null : [t0, Math.max(t1, t0 + 1)];
  }

  return { agents, add, get, lanes, synods, span, natural, clear: () => agents.clear() };
})();

const Axis = (() => {
  // round tick values over [lo, hi]: 1, 2 or 5 times a power of ten
  function ticks(lo, hi, n = 5) {
    if (!(hi > lo)) hi = lo + 1;
    const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => raw <= s) || 10 * mag;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toFixed(12));
    return out;
  }
  // a duration axis in the unit that suits its length: ms, s, min or h
  function timeUnit(ms) {
    if (ms < 2000) return { unit: "ms", div: 1 };
    if (ms < 120000) return { unit: "s", div: 1000 };
    if (ms < 7200000) return { unit: "min", div: 60000 };
    return { unit: "h", div: 3600000 };
  }
  const fmt = (v) => (Math.abs(v) >= 1000 ? (v / 1000).toFixed(v % 1000 ? 1 : 0) + "k" : String(+v.toPrecision(4)));
  const NS = "http://www.w3.org/2000/svg";
  function s(tag, attrs = {}, text) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  return { ticks, timeUnit, fmt, s };
})();
