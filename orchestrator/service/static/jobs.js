// The jobs this service runs (GET /v1/jobs): each one's progress, its scores' summary (GET
// /v1/jobs/{id}/scores), its results as a table — the typed output's fields as columns, then
// each scorer's value — and the tasks that failed with their reasons. A job's
// agents live in its own run root, so its progress is polled while it runs, not streamed.
"use strict";

const Jobs = (() => {
  const h = Conv.h;
  let api = null, timer = null, shown = null;

  function mount(apiFn) { api = apiFn; }

  const cell = (v) => (v === null || v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : typeof v === "number" && !Number.isInteger(v) ? String(+v.toPrecision(4)) : String(v));

  function table(res) {
    if (!res.rows.length) return h("p", { class: "muted" }, "no task has ended yet");
    return h("div", { class: "tablebox" }, h("table", { class: "results" },
      h("thead", {}, h("tr", {}, ...res.columns.map((c) => h("th", {}, c)))),
      h("tbody", {}, ...res.rows.map((r) => h("tr", { class: "status-" + r.status, "data-task": r.task },
        ...res.columns.map((c) => h("td", {}, cell(r[c]))))))));
  }

  function failed(res) {
    if (!res.failed.length) return null;
    return h("div", { class: "failed" }, h("h3", {}, `${res.failed.length} task${res.failed.length > 1 ? "s" : ""} not done`),
      h("ul", {}, ...res.failed.map((f) => h("li", { "data-task": f.task }, h("b", {}, f.task), ` · ${f.status} · `, h("span", { class: "reason" }, f.reason || "—"), f.agent ? h("span", { class: "muted" }, ` · agent ${f.agent}`) : null))));
  }

  const num = (x, d = 3) => (x === null || x === undefined ? "—" : x.toFixed(d));

  function scores(sc) {
    if (!sc.summary.length) return null;
    const cols = ["scorer", "n", "mean", "se", "95% CI", "failures", "cost", "cost/correct", "judge"];
    const row = (s) => [s.scorer, String(s.n), num(s.mean), num(s.se), s.lo === null ? "—" : `[${num(s.lo)}, ${num(s.hi)}]`,
      String(s.failures), "$" + num(s.cost_usd, 4), s.cost_per_correct === null ? "—" : "$" + num(s.cost_per_correct, 4), "$" + num(s.judge_usd, 4)];
    return h("div", { class: "tablebox scores" }, h("h3", {}, "scores"), h("table", { class: "results summary" },
      h("thead", {}, h("tr", {}, ...cols.map((c) => h("th", {}, c)))),
      h("tbody", {}, ...sc.summary.map((s) => h("tr", { "data-scorer": s.scorer }, ...row(s).map((v) => h("td", {}, v)))))),
      h("p", { class: "muted" }, "95% CI: Wilson score interval for scores of 0 or 1, Student t otherwise; cost per correct answer = the tasks' cost / the sum of the scores"));
  }

  async function job(j) {
    const ended = j.done + j.failed + j.budget + j.cancelled;
    const total = Math.max(j.total, 1);
    const pct = (n) => (100 * n / total).toFixed(2) + "%";
    const bar = h("div", { class: "progress", title: `${ended} of ${j.total} tasks ended` },
      h("div", { class: "done", style: `width:${pct(j.done)}` }), h("div", { class: "failed", style: `width:${pct(j.failed)}` }),
      h("div", { class: "other", style: `width:${pct(j.budget + j.cancelled)}` }), h("div", { class: "running", style: `width:${pct(j.running)}` }));
    const res = await api(`/v1/jobs/${encodeURIComponent(j.id)}/results`);
    const sc = await api(`/v1/jobs/${encodeURIComponent(j.id)}/scores`);
    return h("section", { class: "job", "data-job": j.id },
      h("h3", {}, `${j.id} · ${j.path}`), h("span", { class: "state " + j.state }, j.state),
      bar,
      h("p", { class: "figures" }, `${ended} of ${j.total} ended · ${j.done} done · ${j.failed} failed · ${j.running} running · ${j.budget} budget · ${j.cancelled} cancelled · ${j.skipped} skipped · $${j.cost_usd.toFixed(4)}${j.eta_s !== null && j.state === "running" ? ` · about ${Math.round(j.eta_s)} s to go` : ""}`),
      j.error ? h("p", { class: "event error" }, j.error) : null,
      h("p", { class: "muted" }, `run root ${j.run_root} · results ${j.output} · its agents' conversations: `, h("code", {}, `mnemon serve ${j.run_root}`)),
      scores(sc), failed(res), table(res));
  }

  async function refresh() {
    const box = document.getElementById("jobs");
    if (!box || box.offsetParent === null) { stop(); return; }
    try {
      const list = (await api("/v1/jobs")).jobs;
      const parts = await Promise.all(list.map(job));
      const key = JSON.stringify(list);
      if (key !== shown || list.some((j) => j.state === "running")) {
        shown = key;
        document.getElementById("joblist").replaceChildren(...(parts.length ? parts : [h("p", { class: "muted" }, "no job run by this service")]));
      }
      if (list.some((j) => j.state === "running")) { timer = setTimeout(refresh, 1000); return; }
    } catch (e) { document.getElementById("joblist").replaceChildren(h("p", { class: "event error" }, e.message)); }
    timer = null;
  }

  function stop() { if (timer) { clearTimeout(timer); timer = null; } }
  function show() { stop(); shown = null; refresh(); }

  async function start(path) {
    await api("/v1/jobs", { method: "POST", body: JSON.stringify({ path }) });
    show();
  }

  return { mount, show, start };
})();
