"""Every context strategy over every dev trajectory, at 32k, 64k, 128k and 200k windows.

    python bench/strategies.py [--windows 32000,64000,128000,200000] [--jobs 2] [--out bench/out/strategies]

Reports, per window: total cost per strategy relative to ``compact``, cache-read share (all and
steady requests), recoverability, verbatim kept, and the cost–verbatim curve traced by KEEP
(0.3, 0.5, 0.7, and ``auto``, the default plan) for ``evict``, with the per-trajectory spread of
evict ÷ compact. Also ``sweep`` against ``evict`` on the dev trajectories, and every window on
long sessions made by chaining four trajectories into one agent's work (``chainN``) and, so
that more than two sessions reach the server compactions' default trigger of 150 000 tokens on
a 200k window, eight (``longN``, the list taken round). Against the providers' server-side
compactions (issue 50): evict ÷ the cheapest compaction per session, and every session where
evict costs more than a server compaction. Prints markdown.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from _data import TRAJECTORIES as DEV, announce  # noqa: E402  (the repository's, or MNEMON_BENCH_CORPUS)


SERVER = ("anthropic-compaction", "openai-compaction")
COMPACTIONS = ("compact", "rollover", *SERVER)  # the summarisers "the cheapest compaction" spans


def _is_long(name: str) -> bool:
    return name.startswith(("chain", "long"))


def sessions(trajs: list[Path]) -> list[tuple[str, list[Path]]]:
    """The long sessions: four trajectories chained (``chainN``, as before), and eight
    (``longN``, the name-ordered list taken round), the lengths a 150 000-token trigger needs."""
    out = [(f"chain{n}", trajs[i:i + 4]) for n, i in enumerate(range(0, len(trajs), 4))]
    if len(trajs) >= 8:
        round_ = trajs * 2
        out += [(f"long{n}", round_[i:i + 8]) for n, i in enumerate(range(0, len(trajs), 8))]
    return out


def _chain(paths: list[Path]):
    from mnemon.orchestrator.importers import Trajectory, UserStep, load

    steps = []
    system = None
    for p in paths:
        t = load(p)
        system = system or t.system
        steps.append(UserStep(text=f"Next task ({p.stem}):"))
        steps += t.steps
    return Trajectory(system=system, steps=steps, source_format="neutral", name="chain")


def _one(job: tuple) -> dict:
    from mnemon.orchestrator import logs
    from mnemon.orchestrator.importers import load
    from mnemon.orchestrator.replay import replay

    logs.quiet()
    name, paths, strategy, window, keep, *rest = job
    floor = rest[0] if rest else None
    traj = load(paths[0]) if len(paths) == 1 else _chain([Path(p) for p in paths])
    with tempfile.TemporaryDirectory() as tmp:
        res = replay(traj, Path(tmp) / "run", strategy, window=window, keep=keep,
                     keep_floor_tokens=floor)
    s = res.summary()
    s.update(name=name, strategy=strategy, window=window, keep=keep, floor=floor)
    return s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--windows", default="32000,64000,128000,200000")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "strategies"))
    ap.add_argument("--limit", type=int, default=0, help="only the first N trajectories")
    ap.add_argument("--floors", default="4096,8192",
                    help="other verbatim floors to run keep auto with (the trade-off curve)")
    args = ap.parse_args()
    announce()
    windows = [int(w) for w in args.windows.split(",")]
    trajs = sorted(DEV.glob("*.jsonl"))
    if args.limit:
        trajs = trajs[:args.limit]
    jobs = []
    for w in windows:
        for p in trajs:
            for s in ("evict", "sweep", "compact", "rollover", "clear-tool-uses", *SERVER,
                      "none"):
                jobs.append((p.stem, [str(p)], s, w, "auto"))
            for k in (0.3, 0.5, 0.7):
                jobs.append((p.stem, [str(p)], "evict", w, k))
    chains = sessions(trajs)
    for w in windows:
        for name, c in chains:
            for s, k in (("evict", "auto"), ("evict", 0.3), ("evict", 0.5), ("sweep", "auto"),
                         ("compact", "auto"), ("rollover", "auto"), *((x, "auto") for x in SERVER)):
                jobs.append((name, [str(p) for p in c], s, w, k))
    floors = [int(f) for f in args.floors.split(",") if f.strip()]
    for w in windows:
        for f in floors:
            jobs += [(p.stem, [str(p)], "evict", w, "auto", f) for p in trajs]
            jobs += [(name, [str(p) for p in c], "evict", w, "auto", f) for name, c in chains]
    with ProcessPoolExecutor(args.jobs) as ex:
        rows = list(ex.map(_one, jobs, chunksize=4))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rows.json").write_text(json.dumps(rows, indent=1))
    print(report(rows, windows))


def _sum(rows, key):
    return sum(r[key] for r in rows)


def _agg(rows: list[dict]) -> dict:
    rows = [r for r in rows if not r.get("not_applicable")]
    tin = _sum(rows, "input_tokens") + _sum(rows, "cache_read_tokens") + _sum(rows, "cache_write_tokens")
    verb = [r["verbatim_kept"] for r in rows if r["verbatim_kept"] is not None]
    steady = [r["steady_cache_read_share"] for r in rows if r["steady_cache_read_share"] is not None]
    return {"cost": _sum(rows, "cost_usd"),
            "read_share": _sum(rows, "cache_read_tokens") / tin if tin else 0.0,
            "steady": sum(steady) / len(steady) if steady else None,
            "recover": (_sum(rows, "recoverable_bytes") / _sum(rows, "left_bytes")
                        if _sum(rows, "left_bytes") else 1.0),
            "verbatim": sum(verb) / len(verb) if verb else None, "edits": _sum(rows, "edits"),
            "overflow": _sum(rows, "overflow_requests")}


def _v(r: dict) -> str:
    return f"{r['verbatim_kept']:,}" if r["verbatim_kept"] is not None else "–"


def spread(at: list[dict], what: str) -> str:
    """min / median / max of evict (auto) ÷ compact over the runs in ``at``, and how many
    exceed 1.00 and 1.02."""
    comp = {r["name"]: r["cost_usd"] for r in at if r["strategy"] == "compact"}
    ratios = sorted(r["cost_usd"] / comp[r["name"]] for r in at
                    if r["strategy"] == "evict" and r["keep"] == "auto" and r["name"] in comp)
    if not ratios:
        return ""
    mid = ratios[len(ratios) // 2]
    return (f"{what}: min {ratios[0]:.3f}, median {mid:.3f}, max {ratios[-1]:.3f}; "
            f"above 1.00: {sum(x > 1.0 for x in ratios)} of {len(ratios)}, above 1.02: "
            f"{sum(x > 1.02 for x in ratios)}")


def tradeoff(rows: list[dict], windows: list[int]) -> list[str]:
    """The cost–verbatim curve: fixed KEEP against keep auto at each verbatim floor, per window,
    on the single trajectories and the long sessions: evict ÷ compact in total and at worst,
    mean verbatim kept, the smallest ratio of verbatim kept to compaction's, and the least
    cache-read share on steady requests (issue 20 asks ≥ 90 % of every long session)."""
    from mnemon.session.constants import KEEP_FLOOR_TOKENS

    lines = ["\n#### Cost against verbatim: fixed KEEP and keep auto at several floors\n",
             "| window | runs | plan | evict ÷ compact (total) | worst run | mean verbatim kept "
             "(tokens) | least verbatim ÷ compact's (runs where compact edited) | least steady "
             "share |",
             "|---:|---|---|---:|---:|---:|---:|---:|"]
    plans = sorted({(r["keep"], r.get("floor")) for r in rows if r["strategy"] == "evict"},
                   key=lambda kf: (kf[0] != "auto", kf[1] or KEEP_FLOOR_TOKENS, str(kf[0])))
    for w in windows:
        for group, chain in (("single", False), ("long sessions", True)):
            at = [r for r in rows if r["window"] == w and _is_long(r["name"]) == chain]
            comp = {r["name"]: r for r in at if r["strategy"] == "compact"}
            for keep, floor in plans:
                sel = [r for r in at if r["strategy"] == "evict" and r["keep"] == keep
                       and r.get("floor") == floor and r["name"] in comp]
                if not sel:
                    continue
                ratios = [r["cost_usd"] / comp[r["name"]]["cost_usd"] for r in sel]
                total = sum(r["cost_usd"] for r in sel) / sum(comp[r["name"]]["cost_usd"]
                                                              for r in sel)
                verb = [r["verbatim_kept"] for r in sel if r["verbatim_kept"] is not None]
                vr = [(r["verbatim_kept"] or 0) / comp[r["name"]]["verbatim_kept"] for r in sel
                      if comp[r["name"]]["verbatim_kept"]]
                name = (f"auto, floor {floor or KEEP_FLOOR_TOKENS:,}" if keep == "auto"
                        else f"KEEP {keep}")
                least = f"{min(vr):.2f}×" if vr else "–"
                steady = [r["steady_cache_read_share"] for r in sel
                          if r["steady_cache_read_share"] is not None]
                lines.append(f"| {w:,} | {group} | {name} | {total:.3f} | {max(ratios):.3f} | "
                             f"{sum(verb) / len(verb) if verb else 0:,.0f} | {least} | "
                             f"{min(steady):.2%} |")
    return lines


def report(rows: list[dict], windows: list[int]) -> str:
    curve = rows
    rows = [r for r in rows if r.get("floor") is None]
    lines = []
    singles = [r for r in rows if not _is_long(r["name"])]
    for w in windows:
        at = [r for r in singles if r["window"] == w]
        comp = _agg([r for r in at if r["strategy"] == "compact"])
        lines.append(f"\n#### Window {w:,} tokens ({len({r['name'] for r in at})} trajectories)\n")
        lines.append("| strategy | KEEP | total cost | vs compact | cache-read share | steady share "
                     "| recoverability | verbatim kept (tokens) | edits | overflow requests |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        order = [("evict", "auto"), ("evict", 0.3), ("evict", 0.5), ("evict", 0.7),
                 ("sweep", "auto"), ("compact", "auto"), ("rollover", "auto"),
                 ("clear-tool-uses", "auto"), *((x, "auto") for x in SERVER), ("none", "auto")]
        for s, k in order:
            sel = [r for r in at if r["strategy"] == s and r["keep"] == k]
            if not sel:
                continue
            if all(r.get("not_applicable") for r in sel):
                lines.append(f"| {s} | – | n/a: {sel[0]['not_applicable']} | | | | | | | |")
                continue
            a = _agg(sel)
            keep = f"{k}" if s in ("evict", "sweep") else "–"
            verb = f"{a['verbatim']:,.0f}" if a["verbatim"] is not None else "–"
            steady = f"{a['steady']:.1%}" if a["steady"] is not None else "–"
            lines.append(f"| {s} | {keep} | ${a['cost']:.2f} | {a['cost'] / comp['cost']:.3f} | "
                         f"{a['read_share']:.1%} | {steady} | {a['recover']:.0%} | {verb} | "
                         f"{a['edits']} | {a['overflow']} |")
        lines.append("\n" + spread(at, "evict ÷ compact per trajectory"))
        ev = {r["name"]: r for r in at if r["strategy"] == "evict" and r["keep"] == "auto"}
        sw = {r["name"]: r for r in at if r["strategy"] == "sweep"}
        ratios = [sw[n]["cost_usd"] / ev[n]["cost_usd"] for n in ev if n in sw]
        worse = [n for n in ev if n in sw and sw[n]["cost_usd"] > ev[n]["cost_usd"] * 1.005]
        lines.append(f"\nsweep vs evict per trajectory: max {max(ratios):.3f}×, "
                     f"min {min(ratios):.3f}×; costlier than evict (beyond 0.5 %): "
                     f"{len(worse)} of {len(ratios)}; harness evictions "
                     f"{sum(sw[n]['harness_evictions'] for n in sw)} with sweep (plus "
                     f"{sum(sw[n]['sweeps'] for n in sw)} sweeps) vs "
                     f"{sum(ev[n]['harness_evictions'] for n in ev)} with evict alone.")
    chains = [r for r in rows if _is_long(r["name"])]
    if chains:
        lines.append("\n#### Long sessions (four dev trajectories chained into one agent: chainN; "
                     "eight: longN)\n")
        lines.append("| window | session | evict (auto) | ÷ compact | evict KEEP 0.5 ÷ compact | "
                     "sweep ÷ compact | compact | anthropic-compaction ÷ compact | "
                     "openai-compaction ÷ compact | evict ÷ cheapest compaction | "
                     "verbatim kept: auto / compact | chosen keep "
                     "| steady share (auto) | recoverability (auto) |")
        lines.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for w in sorted({r["window"] for r in chains}):
            for name in sorted({r["name"] for r in chains}, key=_session_order):
                get = {(r["strategy"], r["keep"]): r for r in chains
                       if r["window"] == w and r["name"] == name and r.get("floor") is None}
                e, h, s, c = (get[("evict", "auto")], get[("evict", 0.5)],
                              get[("sweep", "auto")], get[("compact", "auto")])
                keeps = e["chosen_keep"]
                kk = f"{min(keeps):.2f}–{max(keeps):.2f}" if keeps else "–"
                sv = [_ratio(get.get((x, "auto")), c) for x in SERVER]
                lines.append(
                    f"| {w:,} | {name} | ${e['cost_usd']:.3f} | {e['cost_usd'] / c['cost_usd']:.3f}"
                    f" | {h['cost_usd'] / c['cost_usd']:.3f} | {s['cost_usd'] / c['cost_usd']:.3f}"
                    f" | ${c['cost_usd']:.3f} | {sv[0]} | {sv[1]} | {_vs_cheapest(e, get)} | "
                    f"{_v(e)} / {_v(c)} | {kk} | "
                    f"{e['steady_cache_read_share']:.1%} | {e['recoverability']:.0%} |")
        for w in sorted({r["window"] for r in chains}):
            at = [r for r in chains if r["window"] == w]
            a = _agg([r for r in at if r["strategy"] == "evict" and r["keep"] == "auto"])
            c = _agg([r for r in at if r["strategy"] == "compact"])
            lines.append(f"\n{w:,}: long sessions in total, evict ÷ compact {a['cost'] / c['cost']:.3f}"
                         f"; {spread(at, 'per session')}")
    lines += server(rows, windows)
    lines += tradeoff(curve, windows)
    return "\n".join(lines)


def _session_order(name: str) -> tuple[str, int]:
    """chain0 … chain4, then long0 … long2 (by number, not as text)."""
    stem = name.rstrip("0123456789")
    return stem, int(name[len(stem):] or 0)


def _ratio(r: dict | None, base: dict) -> str:
    if r is None:
        return "–"
    if r.get("not_applicable"):
        return "n/a"
    return f"{r['cost_usd'] / base['cost_usd']:.3f}"


def _cheapest(get: dict) -> dict | None:
    """The cheapest compaction that ran on one session at one window."""
    ran = [get[(x, "auto")] for x in COMPACTIONS
           if (x, "auto") in get and not get[(x, "auto")].get("not_applicable")]
    return min(ran, key=lambda r: r["cost_usd"]) if ran else None


def _vs_cheapest(e: dict, get: dict) -> str:
    c = _cheapest(get)
    return f"{e['cost_usd'] / c['cost_usd']:.3f} ({c['strategy']})" if c else "–"


def server(rows: list[dict], windows: list[int]) -> list[str]:
    """Issue 50: evict (keep auto) against the cheapest compaction per session and window —
    ``compact``, ``rollover`` and the two server-side compactions — the total and the worst,
    and one line for every session where evict costs more than a server compaction."""
    lines = ["\n#### Against the server-side compactions (issue 50)\n",
             "| window | runs | evict ÷ cheapest compaction, total | worst session | above 1.00 "
             "| above 1.02 | evict ÷ anthropic-compaction, total | evict ÷ openai-compaction, "
             "total |", "|---:|---|---:|---:|---:|---:|---:|---:|"]
    losses = []
    for w in windows:
        for group, long in (("single", False), ("long sessions", True)):
            at = [r for r in rows if r["window"] == w and _is_long(r["name"]) == long
                  and r.get("floor") is None]
            names = sorted({r["name"] for r in at})
            te = tc = 0.0
            server_tot = {x: [0.0, 0.0] for x in SERVER}
            ratios = []
            for n in names:
                get = {(r["strategy"], r["keep"]): r for r in at if r["name"] == n}
                e, c = get.get(("evict", "auto")), _cheapest(get)
                if e is None or c is None:
                    continue
                te += e["cost_usd"]
                tc += c["cost_usd"]
                ratios.append((e["cost_usd"] / c["cost_usd"], n, c["strategy"]))
                for x in SERVER:
                    r = get.get((x, "auto"))
                    if r is not None and not r.get("not_applicable"):
                        server_tot[x][0] += e["cost_usd"]
                        server_tot[x][1] += r["cost_usd"]
                        if e["cost_usd"] > r["cost_usd"] * 1.0005:
                            losses.append((w, n, x, e["cost_usd"] / r["cost_usd"], e, r))
            if not ratios:
                continue
            worst = max(ratios)
            sv = [f"{a / b:.3f}" if b else "n/a" for a, b in server_tot.values()]
            lines.append(f"| {w:,} | {group} | {te / tc:.3f} | {worst[0]:.3f} ({worst[1]}, vs "
                         f"{worst[2]}) | {sum(x > 1.0005 for x, _, _ in ratios)} of {len(ratios)} "
                         f"| {sum(x > 1.02 for x, _, _ in ratios)} | {sv[0]} | {sv[1]} |")
    if losses:
        lines.append("\nWhere evict costs more than a server compaction (evict ÷ it; evict's "
                     "edits and compaction's; requests):\n")
        seen = set()
        for w, n, x, ratio, e, r in losses:
            key = (w, n)
            also = " (the same for openai-compaction)" if x == SERVER[0] and any(
                l[:3] == (w, n, SERVER[1]) and abs(l[3] - ratio) < 5e-4 for l in losses) else ""
            if key in seen and x == SERVER[1] and any(
                    l[:3] == (w, n, SERVER[0]) and abs(l[3] - ratio) < 5e-4 for l in losses):
                continue
            seen.add(key)
            lines.append(f"- {w:,}: `{n}` — {ratio:.3f}× {x}{also}; evict {e['edits']} edits, "
                         f"{x} {r['edits']}; {e['requests']} requests")
    return lines


if __name__ == "__main__":
    main()
