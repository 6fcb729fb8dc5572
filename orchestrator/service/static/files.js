// An agent's files (docs/workspace.md): the diff view the conversation shows after each turn
// whose tools changed them (GET /v1/agents/{id}/workspace/diff between the two snapshots), and
// the Files tab — the files at a turn (GET /v1/agents/{id}/workspace?turn=), a click showing one
// file's content at that turn (…/workspace/files/{path}?turn=). A model wrote every byte here:
// paths, lines and contents go in as text, never as HTML.
"use strict";

const Files = (() => {
  const h = (...a) => Conv.h(...a);
  const OPEN_LINES = 40;      // a file's diff longer than this is shown collapsed
  const SHOW_LINES = 2000;    // lines of one file's diff drawn at most (the rest: the route)
  const SHOW_CHARS = 500000;  // characters of one file's content drawn at most
  let api = null, raw = null, agent = null, turn = null, box = null;

  // the unified diff as one section per file: {path, lines, added, removed, binary}
  function parse(text) {
    const files = [];
    let cur = null;
    for (const line of String(text || "").split("\n")) {
      if (line.startsWith("diff --git ")) {
        const i = line.lastIndexOf(" b/");
        cur = { path: i > 0 ? line.slice(i + 3) : line.slice(11), lines: [], added: 0, removed: 0, binary: false };
        files.push(cur);
        continue;
      }
      if (!cur) continue;
      if (line.startsWith("GIT binary patch") || line.startsWith("Binary files ")) cur.binary = true;
      if (cur.binary) continue;  // base85 data: nothing a person reads
      if (line.startsWith("+") && !line.startsWith("+++ ")) cur.added++;
      else if (line.startsWith("-") && !line.startsWith("--- ")) cur.removed++;
      cur.lines.push(line);
    }
    for (const f of files) while (f.lines.length && f.lines[f.lines.length - 1] === "") f.lines.pop();
    return files;
  }

  function lineClass(line) {
    if (line.startsWith("+++ ") || line.startsWith("--- ")) return "meta";
    if (line.startsWith("+")) return "add";
    if (line.startsWith("-")) return "del";
    if (line.startsWith("@@")) return "hunk";
    if (line.startsWith(" ") || line === "") return "ctx";
    return "meta";  // index, mode, new file, rename lines
  }

  // per changed file: its path and counts as the summary, its lines styled; long ones collapsed
  function diffView(text) {
    const files = parse(text);
    const box = h("div", { class: "diff" });
    if (!files.length) { box.append(h("div", { class: "muted" }, "no file changed")); return box; }
    for (const f of files) {
      const pre = h("pre", { class: "difflines" });
      if (f.binary) pre.append(h("span", { class: "meta" }, "binary file changed\n"));
      for (const line of f.lines.slice(0, SHOW_LINES)) pre.append(h("span", { class: lineClass(line) }, line + "\n"));
      if (f.lines.length > SHOW_LINES) pre.append(h("span", { class: "meta" }, `… ${f.lines.length - SHOW_LINES} more lines (the whole diff: GET …/workspace/diff)\n`));
      const details = h("details", { class: "wsfile" + (f.binary ? " binary" : ""), "data-path": f.path },
        h("summary", {}, h("span", { class: "path" }, f.path), " ",
          h("span", { class: "added" }, `+${f.added}`), " ", h("span", { class: "removed" }, `−${f.removed}`),
          f.lines.length > OPEN_LINES ? h("span", { class: "muted" }, ` · ${f.lines.length} lines, folded`) : null),
        pre);
      details.open = f.lines.length <= OPEN_LINES;
      box.append(details);
    }
    return box;
  }

  // ---------------------------------------------------------------- the Files tab

  function mount(apiFn, rawFn, el) { api = apiFn; raw = rawFn; box = el; }

  const path = (a) => `/v1/agents/${encodeURIComponent(a)}/workspace`;
  const q = (t) => (t === null || t === undefined ? "" : `?turn=${encodeURIComponent(t)}`);

  // the files of agent ``a`` at turn ``t`` (null: the latest)
  async function show(a, t = null) {
    if (!box || !a) return;
    agent = a; turn = t;
    let ws;
    try { ws = await api(path(a) + q(t)); } catch (e) {
      if (a === agent) box.replaceChildren(h("p", { class: "muted nows" }, e.message));
      return;
    }
    if (a !== agent || t !== turn) return;  // another agent or turn was asked meanwhile
    const pick = h("select", { id: "files-turn", onchange: (ev) => show(a, ev.target.value === "" ? null : Number(ev.target.value)) },
      h("option", { value: "" }, "latest"));
    const seen = new Set();
    for (const r of ws.turns) {
      const at = r.why === "start" ? 0 : r.turn;
      if (at === null || at === undefined || seen.has(at)) continue;
      seen.add(at);
      pick.append(h("option", { value: String(at) }, at === 0 ? "at the start" : `after turn ${at}`));
    }
    pick.value = t === null ? "" : String(t);
    const view = h("div", { id: "file-view", class: "fileview" }, h("p", { class: "muted" }, "click a file to read it"));
    const list = h("ul", { id: "files-list", class: "fileslist" }, ...ws.files.map((f) => h("li", { "data-path": f.path, "data-kind": f.kind },
      h("a", { href: "#", onclick: (ev) => { ev.preventDefault(); open(a, t, f, view); } }, f.path),
      h("span", { class: "muted" }, ` ${f.kind === "file" ? size(f.size) : f.kind}`))));
    if (!ws.files.length) list.append(h("li", { class: "muted" }, "no file"));
    box.replaceChildren(h("div", { class: "fileshead" }, h("b", {}, `Files of ${a}`), " ", pick,
      h("span", { class: "muted" }, ` · ${ws.files.length} files · snapshot ${ws.snapshot.slice(0, 12)}`)),
      h("div", { class: "filesbody" }, list, view));
  }

  const size = (n) => (n === null || n === undefined ? "" : n >= 1 << 20 ? (n / (1 << 20)).toFixed(1) + " MiB" : n >= 1024 ? (n / 1024).toFixed(1) + " KiB" : n + " B");

  async function open(a, t, f, view) {
    const parts = f.path.split("/").map(encodeURIComponent).join("/");
    view.replaceChildren(h("p", { class: "muted" }, `reading ${f.path}…`));
    try {
      const r = await raw(`${path(a)}/files/${parts}${q(t)}`);
      const head = h("div", { class: "filetitle" }, h("b", {}, f.path), h("span", { class: "muted" }, ` · ${t === null ? "latest" : t === 0 ? "at the start" : "after turn " + t}`));
      if (!(r.headers.get("content-type") || "").startsWith("text/")) {
        const n = (await r.arrayBuffer()).byteLength;
        view.replaceChildren(head, h("p", { class: "muted binary" }, `binary, ${size(n)}`));
        return;
      }
      const text = await r.text();
      const pre = h("pre", { class: "filecontent" }, text.length > SHOW_CHARS ? text.slice(0, SHOW_CHARS) : text);
      view.replaceChildren(head, pre, text.length > SHOW_CHARS ? h("p", { class: "muted" }, `… ${text.length - SHOW_CHARS} more characters`) : "");
    } catch (e) { view.replaceChildren(h("div", { class: "event error" }, e.message)); }
  }

  return { diffView, parse, mount, show };
})();
