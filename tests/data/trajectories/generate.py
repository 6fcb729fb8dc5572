"""Write the generated trajectories of this folder (``gen-native__*.jsonl``) and the README's table.

Why generated: the suite needs sessions in the *native tool-call* shape (OpenAI-style
``tool_calls`` with their own ids, assistant text mostly empty, some very large tool outputs —
one of 85 KB late in a short session, one of 128 KB — and a few messages that call two tools at once), and the real
recordings of that shape we know of carry no licence. So these are composed, deterministically,
from the texts of the MIT-licensed real trajectories beside this file (``mini-gemini3pro__*``):
their tasks, their commands and their tool outputs, rearranged into the native shape. Nothing
here is invented text; only the arrangement, the ids and the short assistant notes are ours.

    python tests/data/trajectories/generate.py          # rewrites the gen-native files and README table

The output is a pure function of the source files and the seeds below: run twice, same bytes.
"""

from __future__ import annotations

import json
import random
import re
import string
from pathlib import Path

HERE = Path(__file__).resolve().parent
SYSTEM = ("You are a software engineer working in a checked-out repository. Use the bash tool to "
          "inspect files, run tests and edit code. Run one command at a time unless the commands "
          "are independent, in which case you may call the tool several times in one message. "
          "Keep tool output short where you can (head, grep -n, sed -n); long output costs "
          "context. When the fix is done and the tests pass, submit the diff with "
          "`git diff` as your last command and stop.")
NOTES = ["", "", "", "", "Checking the failing path first.", "Let me look at the test — it "
         "should tell us the expected behaviour.", "The résumé of the trace: the error comes "
         "from the parser, not the lexer.", "Über-long output; narrowing it down.",
         "Now run the tests again."]
HEADER = ("| file | source path | turns | assistant | tool calls | bytes | tool-output bytes "
          "| largest tool output |\n|---|---|---:|---:|---:|---:|---:|---:|")
NUDGE = "No tool call in the last reply. Every reply must call a tool."
#: (name, seed, rounds, outputs of a planned size in bytes by round, messages calling two tools,
#: rounds after which the harness nudged a reply that called none)
PLAN = [
    ("gen-native__long-output-late", 13877, 10, {2: 11_000, 8: 85_500}, 0, (3, 8, 8)),
    ("gen-native__huge-listing", 13590, 24, {15: 128_300}, 2, (4,)),
    ("gen-native__many-small", 3069, 45, {}, 4, ()),
    ("gen-native__mid-session", 23413, 32, {20: 11_500}, 3, (10, 25)),
    ("gen-native__short-fix", 8459, 15, {6: 27_400}, 1, ()),
]


def _sources() -> list[list[dict]]:
    return [[json.loads(line) for line in p.read_text(encoding="utf-8").splitlines()]
            for p in sorted(HERE.glob("mini-gemini3pro__*.jsonl"))]


def _pool(sources: list[list[dict]]) -> tuple[list[str], list[tuple[str, str]]]:
    """The tasks, and (command, output) pairs as the real agents ran them."""
    tasks, pairs = [], []
    for lines in sources:
        tasks.append(lines[1]["text"])
        calls = {}
        for d in lines:
            for c in d.get("tool_calls") or []:
                if isinstance(c.get("arguments"), dict) and "command" in c["arguments"]:
                    calls[c["id"]] = c["arguments"]["command"]
            if d["role"] == "tool" and d.get("tool_call_id") in calls:
                pairs.append((calls[d["tool_call_id"]], d["text"]))
    return tasks, pairs


def _call_id(rng: random.Random) -> str:
    return "call_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(24))


def _big(rng: random.Random, pairs: list[tuple[str, str]], size: int) -> tuple[str, str]:
    """A command whose output is about ``size`` bytes: real outputs joined in order, as a
    ``cat`` of several files would print them."""
    parts, total = [], 0
    while total < size:
        cmd, out = rng.choice(pairs)
        parts.append(out)
        total += len(out.encode()) + 1
    text = "\n".join(parts).encode()[:size].decode("utf-8", "ignore")
    return "cat " + " ".join(f"part{i}.txt" for i in range(len(parts))), text


def build(name: str, seed: int, rounds: int, big: dict[int, int], parallel: int,
          nudges: tuple[int, ...], tasks: list[str], pairs: list[tuple[str, str]]) -> list[dict]:
    rng = random.Random(seed)
    lines = [{"role": "system", "text": SYSTEM}, {"role": "user", "text": rng.choice(tasks)}]
    doubles = set(rng.sample(range(1, rounds - 1), parallel)) if parallel else set()
    for r in range(rounds):
        n = 2 if r in doubles else 1
        chosen = [_big(rng, pairs, big[r]) if r in big and i == 0 else rng.choice(pairs)
                  for i in range(n)]
        if r == rounds - 1:
            chosen = [("git diff", chosen[0][1])]
        calls = [{"id": _call_id(rng), "name": "bash", "arguments": {"command": cmd}}
                 for cmd, _ in chosen]
        lines.append({"role": "assistant", "text": rng.choice(NOTES), "tool_calls": calls})
        lines += [{"role": "tool", "text": out, "tool_call_id": c["id"]}
                  for c, (_, out) in zip(calls, chosen)]
        lines += [{"role": "user", "text": NUDGE}] * nudges.count(r)
    return lines


def row(path: Path, source: str) -> str:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    outs = [len(d["text"].encode()) for d in lines if d["role"] == "tool"]
    return (f"| {path.name} | `{source}` | {len(lines)} | "
            f"{sum(d['role'] == 'assistant' for d in lines)} | "
            f"{sum(len(d.get('tool_calls') or []) for d in lines)} | {path.stat().st_size} | "
            f"{sum(outs)} | {max(outs)} |")


def main() -> None:
    sources = _sources()
    tasks, pairs = _pool(sources)
    for name, seed, rounds, big, parallel, nudges in PLAN:
        out = HERE / f"{name}.jsonl"
        with out.open("w", encoding="utf-8", newline="\n") as f:
            for d in build(name, seed, rounds, big, parallel, nudges, tasks, pairs):
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
    readme = HERE / "README.md"
    text = readme.read_text(encoding="utf-8")
    rows = []
    for p in sorted(HERE.glob("*.jsonl")):
        if p.name.startswith("gen-native__"):
            rows.append(row(p, "generated: generate.py"))
        else:
            instance = p.stem.split("__", 1)[1]
            rows.append(row(p, "swebench_results/20251118_gemini-3-pro-74pct/trajs/"
                               f"{instance}/{instance}.traj.json"))
    table = "\n".join([HEADER, *rows])
    text = re.sub(r"(<!-- table -->\n).*?(<!-- /table -->)",
                  lambda m: m.group(1) + table + "\n" + m.group(2),
                  text, flags=re.S)
    readme.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
