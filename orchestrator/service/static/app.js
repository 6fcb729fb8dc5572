// The page: the lineage tree live, each agent's context as a bar, the transcript door, cost over
// time. Plain script, no build step. The token comes from the URL fragment (#token=…, never sent
// to the server) or the form, and goes on every API call as a bearer header; events are read with
// fetch streaming so they carry it too. Tool calls waiting for a decision are listed with their
// input (editable) and approve / reject buttons (docs/policy.md).
"use strict";
const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("mnemon-token") || "";
const frag = new URLSearchParams(location.hash.slice(1));
if (frag.get("token")) { token = frag.get("token"); sessionStorage.setItem("mnemon-token", token); history.replaceState(null, "", location.pathname); }
let selected = null, agents = [], usage = [], lastId = null, refreshTimer = null, readOnly = true, shownApprovals = "";

async function api(path, opts = {}) {
  const r = await fetch(path, { ...opts, headers: { ...(opts.headers || {}), "Authorization": "Bearer " + token, "Content-Type": "application/json" } });
  if (r.status === 401) { $("tokenform").hidden = false; throw new Error("a bearer token is required"); }
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) { if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v); }
  for (const k of kids) e.append(k);
  return e;
}

async function loadRun() {
  const run = await api("/v1/run");
  $("run").textContent = `${run.run_root} · ${run.read_only ? "read-only" : (run.provider || "") + (run.model ? " / " + run.model : "")} · mnemon ${run.version}`;
  $("start").hidden = run.read_only;
  readOnly = run.read_only;
}

async function loadAgents() {
  const list = await api("/v1/agents");
  agents = list.agents;
  const byParent = {};
  for (const a of agents) (byParent[a.parent && agents.some((b) => b.id === a.parent) ? a.parent : ""] ||= []).push(a);
  const build = (pid) => (byParent[pid] || []).map((a) => el("li", { "data-agent": a.id },
    el("span", { class: "agent" + (a.id === selected ? " sel" : ""), onclick: () => select(a.id) },
      `${a.id} `, el("span", { class: "muted" }, a.kind + (a.role ? " · " + a.role + (a.model ? " on " + a.model : "") : "")), el("span", { class: "state " + a.state }, a.state + (a.reason && a.reason !== "done" ? ": " + a.reason : "")),
      el("span", { class: "muted" }, ` $${a.cost_usd.toFixed(4)}`)),
    el("ul", {}, ...build(a.id))));
  $("tree").replaceChildren(...build(""));
  const cost = agents.reduce((s, a) => s + a.cost_usd, 0);
  const inp = agents.reduce((s, a) => s + a.usage.input_tokens + a.usage.cache_read_tokens + a.usage.cache_write_tokens, 0);
  const read = agents.reduce((s, a) => s + a.usage.cache_read_tokens, 0);
  $("totals").textContent = `${agents.length} agents · $${cost.toFixed(4)} · cache-read share ${inp ? (100 * read / inp).toFixed(1) : "0"}%`;
  if (selected) showAgent(selected);
}

function scheduleRefresh() {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => { refreshTimer = null; loadAgents().catch(show); }, 250);
}

async function select(id) { selected = id; $("hits").replaceChildren(); $("turn").textContent = ""; await loadAgents(); }

async function showAgent(id) {
  const a = agents.find((x) => x.id === id);
  if (!a) return;
  $("agent-title").textContent = `Agent ${id}`;
  $("agent-meta").textContent = `${a.kind}${a.role ? ", role " + a.role : ""}${a.model ? ", model " + a.model : ""}, ${a.state}${a.reason ? " (" + a.reason + ")" : ""} · parent ${a.parent || "—"} · children ${a.children.join(", ") || "—"} · in ${a.usage.input_tokens} / cache read ${a.usage.cache_read_tokens} / out ${a.usage.output_tokens} tokens · $${a.cost_usd.toFixed(4)}`;
  const out = $("agent-output");  // a typed agent's accepted answer
  out.hidden = a.output === null || a.output === undefined;
  out.textContent = out.hidden ? "" : "output " + JSON.stringify(a.output, null, 2);
  const s = await api(`/v1/agents/${id}/context`);
  const marked = new Set(s.marks.map((m) => m.block.split(".")[0]));
  const total = s.frontier.reduce((t, f) => t + f.bytes, 0) || 1;
  $("bar").replaceChildren(...s.frontier.map((f) => el("div", {
    class: (f.kind === "residue" ? "residue" : f.role) + (f.kind === "turn" && marked.has(String(f.id)) ? " marked" : ""),
    style: `flex: ${Math.max(f.bytes / total, 0.004)}`,
    title: f.kind === "residue" ? `residue ${f.span[0]}–${f.span[1]} by ${f.by}${f.note ? ": " + f.note : ""} (${f.bytes} B)` : `turn ${f.id} ${f.role} ${f.label || ""} (${f.bytes} B)`,
  })));
}

async function grep(ev) {
  ev.preventDefault();
  if (!selected) return show(new Error("select an agent first"));
  const q = new URLSearchParams({ pattern: $("pattern").value });
  try {
    const out = await api(`/v1/agents/${selected}/grep?${q}`);
    $("hits").replaceChildren(...out.hits.map((h) => el("li", { onclick: () => read(String(h.turn)) }, `turn ${h.turn}: ${h.line}`)));
    if (!out.hits.length) $("hits").replaceChildren(el("li", { class: "muted" }, "no hit"));
  } catch (e) { show(e); }
}

async function read(turns) {
  try {
    const out = await api(`/v1/agents/${selected}/read?${new URLSearchParams({ turns })}`);
    $("turn").textContent = JSON.stringify(out.rows, null, 2);
  } catch (e) { show(e); }
}

function show(e) { $("turn").textContent = "error: " + e.message; }

function drawChart() {
  // provider calls from every agent, in time order (the run stream delivers them agent by agent)
  const svg = $("chart");
  if (!usage.length) return svg.replaceChildren();
  const calls = [...usage].sort((a, b) => a.t - b.t);
  let cost = 0, inTok = 0, readTok = 0;
  const pts = calls.map((u) => { cost += u.cost; inTok += u.input; readTok += u.read; return { t: u.t, cost, share: inTok ? readTok / inTok : 0 }; });
  const t0 = pts[0].t, t1 = pts[pts.length - 1].t, c1 = pts[pts.length - 1].cost || 1e-9;
  const x = (t) => 4 + 312 * (t - t0) / Math.max(t1 - t0, 1), y = (v, max) => 136 - 128 * v / (max || 1);
  const costLine = pts.map((u) => `${x(u.t).toFixed(1)},${y(u.cost, c1).toFixed(1)}`).join(" ");
  const shareLine = pts.map((u) => `${x(u.t).toFixed(1)},${y(u.share, 1).toFixed(1)}`).join(" ");
  const ns = "http://www.w3.org/2000/svg";
  const line = (p, color) => { const e = document.createElementNS(ns, "polyline"); e.setAttribute("points", p); e.setAttribute("fill", "none"); e.setAttribute("stroke", color); e.setAttribute("stroke-width", "1.5"); e.setAttribute("vector-effect", "non-scaling-stroke"); return e; };
  const label = (txt, yy, color) => { const e = document.createElementNS(ns, "text"); e.setAttribute("x", "8"); e.setAttribute("y", yy); e.setAttribute("fill", color); e.setAttribute("font-size", "10"); e.textContent = txt; return e; };
  svg.replaceChildren(line(costLine, "#4c78a8"), line(shareLine, "#e45756"), label(`cost $${c1.toFixed(4)}`, "14", "#4c78a8"), label(`cache-read share ${(100 * pts[pts.length - 1].share).toFixed(1)}%`, "26", "#e45756"));
}

async function loadApprovals() {
  if (readOnly) return;
  const out = await api("/v1/approvals");
  const key = out.approvals.map((a) => (a.job || "") + "/" + a.agent + "/" + a.call_id).join(",");
  if (key === shownApprovals) return; // the same requests: keep what the person is typing
  shownApprovals = key;
  $("approvals").replaceChildren(...(out.approvals.length ? out.approvals.map(approvalItem)
    : [el("li", { class: "muted" }, "none waiting")]));
}

function approvalItem(a) {
  const original = JSON.stringify(a.input);
  const input = el("textarea", { class: "edit", rows: "2", title: "the input the tool receives (edit to change it)" });
  input.value = original;
  const why = el("input", { class: "why", placeholder: "reason, for a rejection (the model reads it)" });
  return el("li", { "data-agent": a.agent, "data-call": a.call_id },
    el("div", {}, el("b", {}, a.tool), el("span", { class: "muted" }, ` · ${a.job ? "job " + a.job + " " : ""}${a.agent} · ${a.reason || a.rule || ""}`)),
    input, why,
    el("button", { class: "approve", onclick: () => decide(a, { decision: "approve" }, original, input) }, "approve"),
    el("button", { class: "reject", onclick: () => decide(a, { decision: "reject", reason: why.value || undefined }) }, "reject"));
}

async function decide(a, body, original, input) {
  try {
    if (input && input.value !== original) body.input = JSON.parse(input.value);
    const path = a.job ? `/v1/jobs/${encodeURIComponent(a.job)}/approvals/${encodeURIComponent(a.agent)}/${encodeURIComponent(a.call_id)}`
      : `/v1/agents/${encodeURIComponent(a.agent)}/approvals/${encodeURIComponent(a.call_id)}`;
    await api(path, { method: "POST", body: JSON.stringify(body) });
  } catch (e) { show(e); }
  shownApprovals = null;
  await loadApprovals().catch(show);
}

function onEvent(ev) {
  if (ev.type === "approval_requested" || ev.type === "approval_decided") loadApprovals().catch(show);
  if (ev.type === "usage" && ev.usage) {
    const u = ev.usage;
    usage.push({ t: ev.at ? Date.parse(ev.at) : Date.now(), cost: ev.cost_usd || 0, input: u.input_tokens + u.cache_read_tokens + u.cache_write_tokens, read: u.cache_read_tokens });
    drawChart();
  }
  scheduleRefresh();
}

async function follow() {
  for (;;) {
    try {
      const headers = { "Authorization": "Bearer " + token };
      if (lastId) headers["Last-Event-ID"] = lastId;
      const r = await fetch("/v1/events", { headers });
      if (r.status === 401) { $("tokenform").hidden = false; return; }
      $("live").textContent = "live"; $("live").classList.add("on");
      const reader = r.body.getReader(), dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const chunk = buf.slice(0, i); buf = buf.slice(i + 2);
          let data = null, id = null;
          for (const line of chunk.split("\n")) {
            if (line.startsWith("data: ")) data = line.slice(6);
            else if (line.startsWith("id: ")) id = line.slice(4);
          }
          if (id) lastId = id;
          if (data) onEvent(JSON.parse(data));
        }
      }
    } catch (e) { /* reconnect below */ }
    $("live").textContent = "reconnecting"; $("live").classList.remove("on");
    await new Promise((res) => setTimeout(res, 1000));
  }
}

async function start(ev) {
  ev.preventDefault();
  try {
    const a = await api("/v1/agents", { method: "POST", body: JSON.stringify({ prompt: $("prompt").value }) });
    $("prompt").value = ""; await select(a.id);
  } catch (e) { show(e); }
}

$("grep").addEventListener("submit", grep);
$("read").addEventListener("submit", (ev) => { ev.preventDefault(); if (selected) read($("turns").value); });
$("start").addEventListener("submit", start);
$("tokenform").addEventListener("submit", (ev) => { ev.preventDefault(); token = $("token").value; sessionStorage.setItem("mnemon-token", token); $("tokenform").hidden = true; boot(); });

async function boot() {
  try { await loadRun(); await loadAgents(); await loadApprovals(); if (!selected && agents.length) await select(agents[0].id); follow(); }
  catch (e) { $("run").textContent = e.message; }
}
boot();
