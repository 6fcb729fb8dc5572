// A small Markdown renderer that cannot inject HTML: it builds DOM nodes and puts every piece of
// model text in with text nodes (never innerHTML), so `<script>` or `<img onerror>` in a turn is
// shown as the characters it is. Links become anchors only for http(s) and mailto addresses;
// anything else (javascript:, data:) stays text. What it knows: paragraphs (single newlines kept
// as line breaks), # headings, ``` fences, > quotes, - * + and 1. lists, --- rules, | tables |,
// and inline `code`, **bold**, *italic*, _italic_, ~~struck~~ and [text](url).
"use strict";

const MD = (() => {
  const h = (tag, cls) => { const e = document.createElement(tag); if (cls) e.className = cls; return e; };
  const SAFE_URL = /^(https?:\/\/|mailto:)[^\s]*$/i;
  // the earliest inline construct wins; each names how it is built
  const INLINE = [
    { re: /`([^`\n]+)`/, make: (m) => { const c = h("code"); c.textContent = m[1]; return c; } },
    { re: /\*\*([^*\n](?:[^\n]*?[^*\n])?)\*\*/, make: (m) => wrap("strong", m[1]) },
    { re: /__([^_\n](?:[^\n]*?[^_\n])?)__/, make: (m) => wrap("strong", m[1]) },
    { re: /~~([^~\n]+)~~/, make: (m) => wrap("del", m[1]) },
    { re: /\*([^*\s](?:[^*\n]*?[^*\s])?)\*/, make: (m) => wrap("em", m[1]) },
    { re: /(?<![A-Za-z0-9])_([^_\s](?:[^_\n]*?[^_\s])?)_(?![A-Za-z0-9])/, make: (m) => wrap("em", m[1]) },
    { re: /\[([^\]\n]+)\]\(([^)\s]+)\)/, make: (m) => {
      if (!SAFE_URL.test(m[2])) return document.createTextNode(m[0]);
      const a = h("a"); a.setAttribute("href", m[2]); a.setAttribute("rel", "noopener noreferrer nofollow");
      a.setAttribute("target", "_blank"); a.append(inline(m[1])); return a; } },
  ];
  function wrap(tag, text) { const e = h(tag); e.append(inline(text)); return e; }

  function inline(text) {
    const frag = document.createDocumentFragment();
    let rest = text;
    while (rest) {
      let best = null;
      for (const rule of INLINE) {
        const m = rule.re.exec(rest);
        if (m && (best === null || m.index < best.m.index)) best = { m, rule };
      }
      if (!best) { frag.append(document.createTextNode(rest)); break; }
      if (best.m.index) frag.append(document.createTextNode(rest.slice(0, best.m.index)));
      frag.append(best.rule.make(best.m));
      rest = rest.slice(best.m.index + best.m[0].length);
    }
    return frag;
  }

  function lines(parent, ls) {  // a paragraph: its lines joined by line breaks
    ls.forEach((l, i) => { if (i) parent.append(h("br")); parent.append(inline(l)); });
    return parent;
  }

  const cells = (row) => row.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());

  function render(text) {
    const out = document.createDocumentFragment();
    const src = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
    let i = 0;
    while (i < src.length) {
      const line = src[i];
      if (!line.trim()) { i++; continue; }
      const fence = /^\s*(```|~~~)\s*([\w+-]*)\s*$/.exec(line);
      if (fence) {
        const body = [];
        for (i++; i < src.length && !src[i].trim().startsWith(fence[1]); i++) body.push(src[i]);
        i++;
        const pre = h("pre", "code"), code = h("code");
        if (fence[2]) code.setAttribute("data-lang", fence[2]);
        code.textContent = body.join("\n");
        pre.append(code); out.append(pre); continue;
      }
      const head = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
      if (head) { const e = h("h" + Math.min(head[1].length + 2, 6), "md-h"); e.append(inline(head[2])); out.append(e); i++; continue; }
      if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { out.append(h("hr")); i++; continue; }
      if (/^\s*>/.test(line)) {
        const body = [];
        for (; i < src.length && /^\s*>/.test(src[i]); i++) body.push(src[i].replace(/^\s*>\s?/, ""));
        const q = h("blockquote"); q.append(render(body.join("\n"))); out.append(q); continue;
      }
      const item = /^\s*([-*+]|\d{1,9}[.)])\s+/;
      if (item.test(line)) {
        const ordered = /\d/.test(item.exec(line)[1]);
        const list = h(ordered ? "ol" : "ul");
        const start = ordered ? parseInt(item.exec(line)[1], 10) : 1;
        if (ordered && start !== 1) list.setAttribute("start", String(start));
        while (i < src.length && item.test(src[i]) && /\d/.test(item.exec(src[i])[1]) === ordered) {
          const body = [src[i].replace(item, "")];
          for (i++; i < src.length && src[i].trim() && !item.test(src[i]) && /^\s{2,}/.test(src[i]); i++) body.push(src[i].trim());
          list.append(lines(h("li"), body));
        }
        out.append(list); continue;
      }
      if (line.includes("|") && i + 1 < src.length && /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/.test(src[i + 1])) {
        const table = h("table", "md-table"), thead = h("thead"), tbody = h("tbody"), tr = h("tr");
        for (const c of cells(line)) { const th = h("th"); th.append(inline(c)); tr.append(th); }
        thead.append(tr);
        for (i += 2; i < src.length && src[i].includes("|") && src[i].trim(); i++) {
          const row = h("tr");
          for (const c of cells(src[i])) { const td = h("td"); td.append(inline(c)); row.append(td); }
          tbody.append(row);
        }
        table.append(thead, tbody); out.append(table); continue;
      }
      const para = [line];  // the first line always: a line no rule above took is text
      for (i++; i < src.length && src[i].trim() && !/^\s*(```|~~~|#{1,6}\s|>)/.test(src[i]) && !(para.length && item.test(src[i])); i++) para.push(src[i]);
      out.append(lines(h("p"), para));
    }
    return out;
  }

  return { render, inline };
})();
