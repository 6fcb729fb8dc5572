// The page: the lineage tree live; the selected agent's conversation (conv.js, from its log
// records, live); the run as a timeline (timeline.js); charts with axes (charts.js); the jobs
// (jobs.js); an agent's files at a turn (files.js); each agent's context as a bar and the door;
// the sandbox its shell runs under, a shell with none (kind "none") a warning wherever it shows;
// a capped agent's caps beside its tree's spend, the messages sent to it (by its parent or a
// person) and, while it runs, a box to send it one (POST /v1/agents/{id}/steer). Plain scripts, no build step, no
// third-party code. The token comes from the URL fragment (#token=…, never sent to the server) or
// the form, and goes on every API call as a bearer header; events are read with fetch streaming
// so they carry it too. Tool calls waiting for a decision are listed with their input (editable)
// and approve / reject buttons (docs/policy.md). Model text is only ever put in as text.
"use strict";
const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("mnemon-token") || "";
const frag = new URLSearchParams(location.hash.slice(1));
if (frag.get("token")) { token = frag.get("token"); sessionStorage.setItem("mnemon-token", token); history.replaceState(null, "", location.pathname); }
let selected = null, agents = [], lastId = null, refreshTimer = null, readOnly = true, shownApprovals = "";
let view = null, convAgent = null, convNext = 0, convBusy = false, convAgain = false, pendingTurn = null;
let messages = [];  // the open agent's messages: its Steering records by its parent or a person

async function api(path, opts = {}) {
  const r = await fetch(path, { ...opts, headers: { ...(opts.headers || {}), "Authorization": "Bearer " + token, "Content-Type": "application/json" } });
  if (r.status === 401) { $("tokenform").hidden = false; throw new Error("a bearer token is required"); }
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

// an answer that is not JSON (a file's bytes, a diff): the Response itself
async function apiRaw(path) {
  const r = await fetch(path, { headers: { "Authorization": "Bearer " + token } });
  if (r.status === 401) { $("tokenform").hidden = false; throw new Error("a bearer token is required"); }
  if (!r.ok) { let msg = r.statusText; try { msg = (await r.json()).error || msg; } catch (e) { /* not JSON */ } throw new Error(msg); }
  return r;
}

const el = Conv.h;

async function loadRun() {
  const run = await api("/v1/run");
  $("run").textContent = `${run.run_root} · ${run.read_only ? "read-only" : (run.provider || "") + (run.model ? " / " + run.model : "")} · mnemon ${run.version}`;
  $("start").hidden = run.read_only;
  $("jobform").hidden = run.read_only;
  readOnly = run.read_only;
  const loose = Boolean(run.sandbox && run.sandbox.kind === "none");
  $("run-sandbox").hidden = !loose;
  $("run-sandbox").textContent = loose ? `${UNSANDBOXED}: new agents' commands run on the machine (serve --sandbox none)` : "";
}

// how the page names a shell without a sandbox (as `mnemon tree` does), and a sandbox in brief
const UNSANDBOXED = "⚠ unsandboxed shell";
const unsandboxed = (a) => Boolean(a.sandbox && a.sandbox.kind === "none");
function sandboxLine(sb) {
  if (sb.kind === "none") return `${UNSANDBOXED} (sandbox kind = "none"): this agent's commands run directly on the machine, as mnemon's user, with its files, network and processes in reach (docs/sandbox.md)`;
  const mib = (n) => (n >= 1024 && n % 1024 === 0 ? `${n / 1024} GiB` : `${n} MiB`);
  const parts = [`shell: ${sb.kind}`, sb.network ? "network on" : "no network", `${sb.timeout_s} s a command (at most ${sb.max_timeout_s} s)`,
    `${mib(sb.memory_mb)}`, `${sb.processes} processes`, `${Math.round(sb.output_bytes / 1024)} KiB of output kept`];
  if (sb.read_only && sb.read_only.length) parts.push(`read-only: ${sb.read_only.join(", ")}`);
  if (sb.env && sb.env.length) parts.push(`env: ${sb.env.join(", ")}`);
  return parts.join(" · ");
}

async function loadAgents() {
  const list = await api("/v1/agents");
  agents = list.agents;
  const ids = new Set(agents.map((a) => a.id));
  const byParent = {};
  for (const a of agents) (byParent[a.parent && ids.has(a.parent) ? a.parent : ""] ||= []).push(a);
  for (const list of Object.values(byParent)) list.sort((x, y) => Model.natural(x.id, y.id));  // t2 before t10
  treeRows = [];  // parents before their children, each with its depth (iteratively: no deep recursion)
  const todo = (byParent[""] || []).map((a) => [a, 0]).reverse();
  while (todo.length) {
    const [a, depth] = todo.pop();
    treeRows.push([a, depth]);
    for (const k of (byParent[a.id] || []).slice().reverse()) todo.push([k, depth + 1]);
  }
  drawTree();
  $("tree-count").textContent = `(${agents.length})`;
  const cost = agents.reduce((s, a) => s + a.cost_usd, 0);
  const inp = agents.reduce((s, a) => s + a.usage.input_tokens + a.usage.cache_read_tokens + a.usage.cache_write_tokens, 0);
  const read = agents.reduce((s, a) => s + a.usage.cache_read_tokens, 0);
  $("totals").textContent = `${agents.length} agents · $${cost.toFixed(4)} · cache-read share ${inp ? (100 * read / inp).toFixed(1) : "0"}%`;
  if (selected) showAgent(selected);
}

// the lineage as rows, only those in view drawn: a run of thousands of agents stays light
const TREE_ROW = 22;
let treeRows = [];
function drawTree() {
  const box = $("treebox"), ul = $("tree");
  const first = Math.max(0, Math.floor(box.scrollTop / TREE_ROW) - 20);
  const last = Math.min(treeRows.length, first + Math.ceil((box.clientHeight || 600) / TREE_ROW) + 40);
  ul.style.height = treeRows.length * TREE_ROW + "px";
  ul.style.paddingTop = first * TREE_ROW + "px";
  ul.replaceChildren(...treeRows.slice(first, last).map(([a, depth]) => el("li", { "data-agent": a.id, "data-depth": depth, style: `padding-left: ${Math.min(depth, 12) * 0.9}em` },
    el("span", { class: "agent" + (a.id === selected ? " sel" : ""), onclick: () => select(a.id) },
      `${a.id} `, el("span", { class: "muted" }, a.kind + (a.role ? " · " + a.role + (a.model ? " on " + a.model : "") : "")), el("span", { class: "state " + a.state }, a.state + (a.reason && a.reason !== "done" ? ": " + a.reason : "")),
      el("span", { class: "muted" }, ` $${a.cost_usd.toFixed(4)}`),
      a.budget ? el("span", { class: "cap" + (capShare(a.budget) >= 1 ? " over" : ""), title: budgetLine(a.budget) }, ` ${Math.round(100 * capShare(a.budget))}% of cap`) : null,
      unsandboxed(a) ? el("span", { class: "warn unsandboxed", title: 'sandbox kind = "none": its commands run on the machine' }, UNSANDBOXED) : null))));
  if (!window.__treePaint && treeRows.length) window.__treePaint = performance.now();  // first paint, for the scale test
}

// a capped agent's caps beside what its tree spent (the view's `budget`), and the largest share
function budgetLine(b) {
  const parts = [];
  if (b.usd !== undefined) parts.push(`$${b.spent_usd.toFixed(4)} of $${b.usd.toFixed(4)}`);
  if (b.tokens !== undefined) parts.push(`${b.spent_tokens} of ${b.tokens} tokens`);
  if (b.max_turns !== undefined) parts.push(b.turns !== undefined ? `turn ${b.turns} of ${b.max_turns}` : `at most ${b.max_turns} turns`);
  return "cap: " + parts.join(" · ") + " (spent by it and its children)";
}
function capShare(b) {
  return Math.max(b.usd ? b.spent_usd / b.usd : 0, b.tokens ? b.spent_tokens / b.tokens : 0);
}

function drawMessages() {
  $("agent-messages").hidden = !messages.length;
  $("messages").replaceChildren(...messages.map((m) => el("li", { class: "message " + m.by },
    el("span", { class: "muted" }, m.by === "parent" ? "from its parent: " : "from a person: "), m.text.replace(/^\[message from [^\]]{0,80}\] /, ""))));
}

async function steer(ev) {
  ev.preventDefault();
  const text = $("steer-text").value;
  if (!selected || !text.trim()) return;
  try {
    await api(`/v1/agents/${encodeURIComponent(selected)}/steer`, { method: "POST", body: JSON.stringify({ text }) });
    $("steer-text").value = "";
  } catch (e) { show(e); }
  await loadTranscript();
  await loadAgents().catch(show);
}

function scheduleRefresh() {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => { refreshTimer = null; loadAgents().catch(show); }, 250);
}

// open an agent (at a turn: the conversation scrolls to it)
async function select(id, turn = null) {
  const changed = id !== selected;
  selected = id; pendingTurn = turn;
  if (changed) { $("hits").replaceChildren(); $("turn").replaceChildren(); $("files").replaceChildren(); }
  if (changed && !$("files").hidden) Files.show(id);
  Charts.draw(id);
  if (turn !== null) showTab("conversation");
  if (changed || convAgent !== id) { convAgent = id; convNext = 0; view.reset(); messages = []; drawMessages(); }
  await loadTranscript();
  await loadAgents();
}

// the selected agent's records after the last one shown; called again while it runs
async function loadTranscript() {
  if (convBusy) { convAgain = true; return; }
  convBusy = true;
  try {
    do {
      convAgain = false;
      const aid = convAgent;
      for (;;) {
        const out = await api(`/v1/agents/${encodeURIComponent(aid)}/transcript?after=${convNext}`);
        if (aid !== convAgent) break;  // another agent was opened meanwhile
        view.append(out.entries);
        const sent = out.entries.map((e) => e.record).filter((r) => r.t === "Steering" && (r.by === "parent" || r.by === "user"));
        if (sent.length) { messages.push(...sent); drawMessages(); }
        convNext = out.next;
        if (!out.more) break;
      }
    } while (convAgain);
  } catch (e) { show(e); }
  finally { convBusy = false; }
  if (pendingTurn !== null) focusTurn(pendingTurn);
}

function focusTurn(turn) {
  const target = $("conv").querySelector(`[data-turn="${turn}"]`) || $("conv").querySelector(`[data-span^="${turn}-"]`);
  if (!target) return;
  pendingTurn = null;
  for (const old of $("conv").querySelectorAll(".focus")) old.classList.remove("focus");
  target.classList.add("focus");
  if (target.closest("details")) target.closest("details").open = true;
  target.scrollIntoView({ block: "center" });
}

async function showAgent(id) {
  const a = agents.find((x) => x.id === id);
  if (!a) return;
  $("agent-title").textContent = `Agent ${id}`;
  $("agent-meta").textContent = `${a.kind}${a.role ? ", role " + a.role : ""}${a.model ? ", model " + a.model : ""}, ${a.state}${a.reason ? " (" + a.reason + ")" : ""} · parent ${a.parent || "—"} · children ${a.children.join(", ") || "—"} · in ${a.usage.input_tokens} / cache read ${a.usage.cache_read_tokens} / out ${a.usage.output_tokens} tokens · $${a.cost_usd.toFixed(4)}`;
  const sb = $("agent-sandbox");  // an agent with a workspace: what its shell runs under
  sb.hidden = !a.sandbox;
  sb.className = unsandboxed(a) ? "warn" : "shell";
  sb.textContent = a.sandbox ? sandboxLine(a.sandbox) : "";
  const bud = $("agent-budget");  // a capped agent: its caps beside its tree's spend
  bud.hidden = !a.budget;
  bud.className = a.budget && capShare(a.budget) >= 1 ? "cap over" : "cap";
  bud.textContent = a.budget ? budgetLine(a.budget) : "";
  if (a.messages || a.in_tools.length) $("agent-meta").textContent += `${a.messages ? ` · ${a.messages} message${a.messages === 1 ? "" : "s"} received` : ""}${a.in_tools.length ? " · in " + a.in_tools.join(", ") : ""}`;
  $("steer").hidden = readOnly || a.state !== "running";
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
    onclick: () => select(id, f.kind === "residue" ? f.span[0] : f.id),
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

const wsDiff = async (from, to) => (await apiRaw(`/v1/agents/${encodeURIComponent(convAgent)}/workspace/diff?${new URLSearchParams({ from, to })}`)).text();
const wsFiles = (turn) => { showTab("files"); Files.show(convAgent, turn); };
const readTurns = async (turns) => (await api(`/v1/agents/${encodeURIComponent(convAgent)}/read?${new URLSearchParams({ turns })}`)).rows;

// the door's read, as a conversation (the raw records one click away)
async function read(turns) {
  try {
    const out = await api(`/v1/agents/${selected}/read?${new URLSearchParams({ turns })}`);
    const box = $("turn");
    box.replaceChildren();
    Conv.renderRows(out.rows, new Conv.View(box, { read: readTurns, open: (a) => select(a) }));
    box.append(el("details", { class: "raw" }, el("summary", {}, "the records as JSON"), el("pre", {}, JSON.stringify(out.rows, null, 2))));
  } catch (e) { show(e); }
}

function show(e) { $("turn").replaceChildren(el("div", { class: "event error" }, "error: " + e.message)); }

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
  if (ev.type === "text") {  // a preview of an answer being written: not in the log yet
    if (ev.agent === convAgent) view.streamText(ev.text);
    return;
  }
  Model.add(ev);
  if (ev.type === "approval_requested" || ev.type === "approval_decided") loadApprovals().catch(show);
  if (ev.agent === convAgent) loadTranscript();
  Timeline.draw();
  Charts.draw();
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

function showTab(name) {
  for (const b of $("tabs").querySelectorAll("button")) b.classList.toggle("on", b.dataset.tab === name);
  $("conversation").hidden = name !== "conversation";
  $("timeline-tab").hidden = name !== "timeline";
  $("charts").hidden = name !== "charts";
  $("jobs").hidden = name !== "jobs";
  $("door").hidden = name !== "door";
  $("files").hidden = name !== "files";
  if (name === "timeline") Timeline.draw();
  if (name === "charts") Charts.draw();
  if (name === "jobs") Jobs.show();
  if (name === "files" && selected && !$("files").childElementCount) Files.show(selected);
}

view = new Conv.View($("conv"), { read: readTurns, open: (a) => select(a), diff: wsDiff, files: wsFiles });
Files.mount(api, apiRaw, $("files"));
$("treebox").addEventListener("scroll", () => requestAnimationFrame(drawTree));
Timeline.mount($("timeline"), (aid, turn) => select(aid, turn));
Jobs.mount(api);
for (const b of $("tabs").querySelectorAll("button")) b.addEventListener("click", () => showTab(b.dataset.tab));
$("grep").addEventListener("submit", grep);
$("read").addEventListener("submit", (ev) => { ev.preventDefault(); if (selected) read($("turns").value); });
$("start").addEventListener("submit", start);
$("steer").addEventListener("submit", steer);
$("jobform").addEventListener("submit", (ev) => { ev.preventDefault(); Jobs.start($("jobpath").value).catch(show); });
$("tokenform").addEventListener("submit", (ev) => { ev.preventDefault(); token = $("token").value; sessionStorage.setItem("mnemon-token", token); $("tokenform").hidden = true; boot(); });

async function boot() {
  try { await loadRun(); await loadAgents(); await loadApprovals(); if (!selected && agents.length) await select(agents[0].id); follow(); }
  catch (e) { $("run").textContent = e.message; }
}
boot();
