// The conversation of an agent as a person reads it, from its log records in order
// (GET /v1/agents/{id}/transcript, and the door's read for evicted or inherited turns): user and
// assistant turns (assistant text as Markdown, through md.js: never HTML), tool calls with their
// arguments and results (long ones folded), thinking folded, each eviction's residue in place
// with its note, span and a button that reads the evicted turns back, inherited turns marked
// with the ancestor they come from, marks, sweeps, approvals and a typed output where they
// happen; after each turn whose tools changed the agent's files, the change as a diff view
// (files.js), a click away from the files at that turn. Everything model-made goes in as text.
"use strict";

const Conv = (() => {
  const FOLD_CHARS = 600, FOLD_LINES = 12;

  function h(tag, attrs = {}, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
    }
    for (const k of kids) if (k !== null && k !== undefined) e.append(k);
    return e;
  }
  const json = (v) => {  // short values on one line, longer ones indented
    if (typeof v === "string") return v;
    const flat = JSON.stringify(v);
    return flat !== undefined && flat.length <= 100 ? flat : JSON.stringify(v, null, 2);
  };
  const time = (at) => (at ? new Date(at).toLocaleTimeString([], { hour12: false }) : "");
  const bytes = (n) => (n >= 1 << 20 ? (n / (1 << 20)).toFixed(1) + " MiB" : n >= 1024 ? (n / 1024).toFixed(1) + " KiB" : n + " B");
  const spanText = (s) => (s[0] === s[1] ? `turn ${s[0]}` : `turns ${s[0]}–${s[1]}`);

  // a long text folded: its first line as the summary, the whole in a <pre> when opened
  function folded(text, label, cls) {
    const s = String(text ?? "");
    const long = s.length > FOLD_CHARS || s.split("\n").length > FOLD_LINES;
    const pre = h("pre", { class: "body" }, s);
    if (!long) return h("div", { class: cls }, label ? h("span", { class: "label" }, label) : null, pre);
    const first = s.split("\n", 1)[0].slice(0, 120);
    return h("details", { class: cls + " folded" },
      h("summary", {}, h("span", { class: "label" }, label || ""), ` ${bytes(new TextEncoder().encode(s).length)} · `, h("span", { class: "muted" }, first + "…")), pre);
  }

  class View {
    // ``ctx``: {agent, read(turns) → rows, open(agent)}; ``root``: the element to fill
    constructor(root, ctx) { this.root = root; this.ctx = ctx; this.reset(); }

    reset() {
      this.root.replaceChildren();
      this.calls = new Map();  // tool call id → its card (the result goes in it)
      this.turn = null; this.at = null; this.call = null; this.last = null;
      this.preview = null;
      this.files = null;  // the last workspace snapshot shown: the next change's diff starts there
    }

    // the streamed text of an answer not yet recorded (a `text` event): shown, then replaced
    streamText(text) {
      if (!this.preview) {
        this.preview = h("div", { class: "msg assistant preview" }, h("div", { class: "who" }, "assistant · writing…"), h("pre", { class: "body" }));
        this.root.append(this.preview);
      }
      this.preview.querySelector("pre").textContent += text;
    }

    append(entries, clippedTurns = true) {
      if (this.preview) { this.preview.remove(); this.preview = null; }
      for (const e of entries) {
        const node = this.record(e.record, e);
        if (node) {
          if (e.offset !== undefined) node.setAttribute("data-offset", String(e.offset));
          this.root.append(node);
        }
      }
    }

    clippedNote(entry) {
      if (!entry || !entry.clipped || this.turn === null) return null;
      const turn = this.turn;
      return h("button", { class: "link clipped", onclick: (ev) => this.readBack(ev.target, String(turn)) }, `clipped here: read turn ${turn} in full`);
    }

    record(r, entry) {
      switch (r.t) {
        case "SessionStarted": return this.started(r);
        case "Inherited": return this.inherited(r);
        case "UserPrompt": this.turn = r.turn; return this.message("user", r.turn, null, MD.render(r.text), entry);
        case "TurnStarted": this.turn = r.turn; this.at = r.at; return null;
        case "ProviderCall": return this.providerCall(r);
        case "AssistantMessage": return this.assistant(r, entry);
        case "ToolResults": return this.results(r, entry);
        case "Steering": return h("div", { class: "event steering", "data-turn": this.turn }, folded(r.text, `steering${r.by ? " · " + r.by : ""}`, "steer"));
        case "Evicted": return this.evicted(r);
        case "Marked": return h("div", { class: "event marked", "data-block": `${r.block[0]}.${r.block[1]}` },
          h("b", {}, `marked turn ${r.block[0]}, block ${r.block[1]}`), " — its replacement:", folded(r.replacement, "", "replacement"));
        case "Swept": return h("div", { class: "event swept" }, h("b", {}, "swept "), (r.blocks || []).map((b) => `turn ${b[0]} block ${b[1]}`).join(", "),
          h("span", { class: "muted" }, " — the marked blocks now read as their replacements"));
        case "Cleared": return h("div", { class: "event cleared" }, h("b", {}, "cleared"), " — every turn withdrawn from the context");
        case "Rewound": return h("div", { class: "event rewound" }, h("b", {}, `rewound to turn ${r.to}`), " — later turns withdrawn");
        case "ApprovalRequested": return h("div", { class: "event approval asked", "data-call": r.call_id },
          h("b", {}, `approval asked: ${r.tool}`), h("span", { class: "muted" }, ` · ${r.rule || ""}${r.reason ? " · " + r.reason : ""} · ${time(r.at)}`), folded(json(r.input), "input", "args"));
        case "ApprovalDecided": return h("div", { class: "event approval " + (r.decision === "approve" ? "approved" : "rejected"), "data-call": r.call_id },
          h("b", {}, r.decision === "approve" ? "approved" : "rejected"), ` ${r.call_id}${r.by ? " by " + r.by : ""}${r.reason ? ": " + r.reason : ""}${r.input ? " (input edited)" : ""}`,
          h("span", { class: "muted" }, ` · ${time(r.at)}`), r.input ? folded(json(r.input), "edited input", "args") : null);
        case "SessionEnded": return this.ended(r);
        case "WorkspaceSnapshot": return this.workspace(r);
        case "SessionResumed": return h("div", { class: "event resumed" }, h("b", {}, "resumed"), h("span", { class: "muted" }, ` · ${time(r.at)}`));
        case "Unreadable": return h("div", { class: "event unreadable" }, `a line that is not a record (${r.bytes} bytes): mnemon verify names it`);
        default: return null;
      }
    }

    started(r) {
      const parent = r.parent ? h("a", { href: "#", class: "agentlink", onclick: (ev) => { ev.preventDefault(); this.ctx.open(r.parent); } }, r.parent) : null;
      return h("div", { class: "event started" },
        h("b", {}, `${r.agent} started`), parent ? " · forked from " : "", parent, ` · ${r.kind || "root"}${r.model ? " · " + r.model : ""} · ${time(r.at)}`,
        r.system ? folded(r.system, "system prompt", "system") : null,
        r.tools && r.tools.length ? h("div", { class: "muted tools" }, "tools: " + r.tools.join(", ")) : null,
        r.output_type ? folded(json(r.output_type), "output type", "args") : null);
    }

    inherited(r) {
      const by = new Map();
      for (const t of r.turns) { if (!by.has(t.from)) by.set(t.from, []); by.get(t.from).push(t); }
      const box = h("div", { class: "event inherited" }, h("b", {}, `inherited ${r.turns.length} turns`),
        r.residues && r.residues.length ? ` and ${r.residues.length} residues` : "");
      for (const [from, turns] of by) {
        const ids = turns.map((t) => t.id);
        const group = h("details", { class: "from", "data-from": from || "" },
          h("summary", {}, `${turns.length} from `, from ? h("a", { href: "#", class: "agentlink", onclick: (ev) => { ev.preventDefault(); this.ctx.open(from); } }, from) : "an earlier log",
            ` (turns ${ids[0]}–${ids[ids.length - 1]})`));
        for (const t of turns) {
          group.append(h("div", { class: "row inherited-turn", "data-turn": t.id, "data-from": from || "" },
            h("span", { class: "role " + t.role }, `${t.id} ${t.role}`), " ", h("span", {}, t.label || ""),
            h("span", { class: "muted" }, ` · ${bytes(t.bytes)} · ${t.held} · from ${from}`)));
        }
        const slot = h("div", { class: "readback" });
        group.append(h("button", { class: "link", onclick: (ev) => this.readBack(ev.target, `${ids[0]}-${ids[ids.length - 1]}`, slot) }, `read these turns`), slot);
        box.append(group);
      }
      for (const res of r.residues || []) box.append(this.residue(res, "inherited residue"));
      return box;
    }

    providerCall(r) {
      this.call = r;
      if (!r.error) return null;
      return h("div", { class: "event error" }, `provider call failed (attempt ${r.attempt}): ${r.error}`);
    }

    message(role, turn, at, body, entry) {
      const m = h("div", { class: "msg " + role, "data-turn": turn },
        h("div", { class: "who" }, `${role} · turn ${turn}${at ? " · " + time(at) : ""}`), h("div", { class: "body md" }, body));
      const note = this.clippedNote(entry);
      if (note) m.append(note);
      return m;
    }

    assistant(r, entry) {
      this.turn = r.turn;
      const u = r.usage, call = this.call;
      const figures = u ? ` · ${u.input_tokens + u.cache_read_tokens + u.cache_write_tokens} in (${u.cache_read_tokens} cache read) / ${u.output_tokens} out tokens` : "";
      const m = h("div", { class: "msg assistant", "data-turn": r.turn },
        h("div", { class: "who" }, `assistant · turn ${r.turn}${this.at ? " · " + time(this.at) : ""}`, h("span", { class: "muted" }, figures + (call && call.latency_s ? ` · ${call.latency_s.toFixed(2)} s` : ""))));
      this.call = null;
      for (const b of r.blocks || []) {
        if (b.type === "text") m.append(h("div", { class: "body md" }, MD.render(b.text)));
        else if (b.type === "thinking") m.append(h("details", { class: "thinking" }, h("summary", {}, `thinking · ${b.text.length} characters`), h("pre", { class: "body" }, b.text)));
        else if (b.type === "tool_use") {
          const card = h("div", { class: "tool", "data-call": b.id }, h("div", { class: "call" }, h("b", {}, b.name), h("span", { class: "muted" }, ` ${b.id}`)),
            folded(json(b.input), "arguments", "args"));
          this.calls.set(b.id, card);
          m.append(card);
        } else m.append(h("div", { class: "muted" }, `(${b.provider || "provider"} block kept for the provider)`));
      }
      const note = this.clippedNote(entry);
      if (note) m.append(note);
      return m;
    }

    results(r, entry) {
      const loose = [];
      for (const res of r.results || []) {
        const content = typeof res.content === "string" ? res.content : json(res.content);
        const node = folded(content, res.is_error ? "error" : "result", "result" + (res.is_error ? " err" : ""));
        const card = this.calls.get(res.tool_use_id);
        if (card) card.append(node); else loose.push(h("div", { class: "tool", "data-call": res.tool_use_id }, h("span", { class: "muted" }, `result of ${res.tool_use_id}`), node));
      }
      const note = this.clippedNote(entry);
      if (note) { const card = this.calls.get((r.results || [])[0]?.tool_use_id); (card || this.root.lastElementChild || this.root).append(note); }
      return loose.length ? h("div", { class: "msg tools" }, ...loose) : null;
    }

    residue(res, what = "evicted") {
      const span = res.span;
      const slot = h("div", { class: "readback" });
      return h("div", { class: "event residue", "data-span": `${span[0]}-${span[1]}` },
        h("b", {}, `${spanText(span)} ${what}`), ` by ${res.by || "harness"}`,
        res.note ? h("div", { class: "note" }, "note: ", res.note) : h("div", { class: "note muted" }, "no note"),
        h("button", { class: "link readback-btn", onclick: (ev) => this.readBack(ev.target, `${span[0]}-${span[1]}`, slot) }, `read ${spanText(span)} back`), slot);
    }

    evicted(r) {
      const node = this.residue(r.residue);
      const p = r.plan;
      if (p) node.insertBefore(h("div", { class: "muted plan" },
        `kept ${p.keep !== undefined ? (100 * p.keep).toFixed(0) + "% of the history" : ""}${p.kept_tokens ? ", " + p.kept_tokens + " tokens" : ""}${p.requests ? ", about " + p.requests + " requests to the next eviction" : ""}`), node.querySelector("button"));
      return node;
    }

    // a workspace record: where the files came from, or what a turn (a rewind, a resume, a
    // merge) changed in them — the diff fetched between this snapshot and the one before
    workspace(r) {
      const prev = this.files;
      this.files = r.snapshot;
      const filesAt = (turn, label) => (this.ctx.files ? h("button", { class: "link files-btn", onclick: () => this.ctx.files(turn) }, label) : null);
      if (r.why === "start") {
        return h("div", { class: "event workspace start" }, h("b", {}, "workspace"), ` · ${r.dir ? r.dir + " (in place)" : r.source || "empty"}`,
          h("span", { class: "muted" }, ` · ${time(r.at)} `), filesAt(0, "the files"));
      }
      if (prev === r.snapshot) return null;
      const what = { rewind: `files rewound to turn ${r.turn}`, resume: "files restored on resume", merge: "a child's files merged" }[r.why] || `files changed by turn ${r.turn}'s tools`;
      const slot = h("div", { class: "diffslot" }, h("span", { class: "muted" }, "reading the diff…"));
      const node = h("div", { class: "event workspace change", "data-turn": r.turn, "data-why": r.why || "tools" },
        h("b", {}, what), h("span", { class: "muted" }, ` · ${time(r.at)} `), r.why ? null : filesAt(r.turn, `the files after turn ${r.turn}`),
        r.aside ? h("div", { class: "muted" }, `the directory's other changes kept aside as ${r.aside.slice(0, 12)}`) : null, slot);
      if (prev && this.ctx.diff) {
        this.ctx.diff(prev, r.snapshot).then((text) => slot.replaceChildren(Files.diffView(text)),
          (e) => slot.replaceChildren(h("div", { class: "event error" }, e.message)));
      } else slot.replaceChildren();
      return node;
    }

    ended(r) {
      const box = h("div", { class: "event ended " + (r.reason === "done" ? "done" : "other") }, h("b", {}, `ended: ${r.reason}`), h("span", { class: "muted" }, ` · ${time(r.at)}`));
      if (r.output !== undefined && r.output !== null) box.append(h("div", { class: "output" }, h("span", { class: "label" }, "typed output"), h("pre", { class: "body" }, json(r.output))));
      return box;
    }

    // the door's read of ``turns``, rendered the same way in ``slot`` (a second click folds it)
    async readBack(button, turns, slot) {
      slot = slot || button.parentElement.appendChild(h("div", { class: "readback" }));
      if (slot.childElementCount) { slot.replaceChildren(); return; }
      try {
        const rows = await this.ctx.read(turns);
        const sub = new View(slot, this.ctx);
        renderRows(rows, sub);
      } catch (e) { slot.replaceChildren(h("div", { class: "event error" }, e.message)); }
    }
  }

  // the door's rows ({turn, source, records}) into a view, each turn saying where it was read
  function renderRows(rows, view) {
    for (const row of rows) {
      const m = /agents\/([^/]+)\/record\.jsonl$/.exec(row.source || "");
      view.root.append(h("div", { class: "source muted" }, `turn ${row.turn} · ${m ? "from " + m[1] : row.source}`));
      view.append(row.records.map((record) => ({ record })));
    }
  }

  return { View, renderRows, h };
})();
