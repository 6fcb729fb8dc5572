"""docs/cli.md documents every flag of every command, under that command's own heading, in a
table row that says what it does.

The flags are read from what a user reads — ``mnemon --help`` for the commands and each
``mnemon COMMAND --help`` for its usage line — so a flag added to a command fails here until
the page says what it does. A command's section may hand its shared flags to a section it links
to (``[provider and run options](#options-of-the-commands-that-run-agents)``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
SUBCOMMANDS = {"transcript": ("index", "read", "grep"),
               "workspace": ("ls", "show", "diff", "export", "patch", "log")}


#: ``python -m mnemon WORDS --help`` for each WORDS, in one process (the help of each command
#: imports only that command's module; one interpreter for all of them keeps this test cheap)
HELPS = """
import contextlib, io, json, runpy, sys
out = {}
for words in json.loads(sys.argv[1]):
    sys.argv = ["mnemon", *words, "--help"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            runpy.run_module("mnemon", run_name="__main__", alter_sys=True)
        except SystemExit:
            pass
    out[" ".join(words)] = buf.getvalue()
print(json.dumps(out))
"""


def _helps(jobs: list[tuple[str, ...]]) -> dict[tuple[str, ...], str]:
    done = subprocess.run([sys.executable, "-c", HELPS, json.dumps(jobs)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "COLUMNS": "100"})
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)
    return {words: got[" ".join(words)] for words in jobs}


def _commands(top: str) -> list[str]:
    """The commands ``mnemon --help`` lists under COMMAND."""
    block = top.split("COMMAND\n", 2)[-1].split("\n\n")[0]
    return re.findall(r"^ {4}([a-z][a-z-]*)(?:\s|$)", block, re.M)


def _usage_flags(text: str) -> set[str]:
    usage = text.split("\n\n")[0]
    return set(FLAG.findall(usage)) - {"--help"}


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _sections(page: str) -> tuple[str, dict[str, str]]:
    """The page before its first ``##`` heading, and each ``##`` section by its anchor."""
    parts = re.split(r"^## (.+)$", page, flags=re.M)
    head, rest = parts[0], parts[1:]
    return head, {_slug(rest[i]): rest[i + 1] for i in range(0, len(rest), 2)}


def _documented(text: str, flag: str) -> bool:
    """``flag`` has a row of a table saying what it does (a synopsis naming it is not enough)."""
    rows = "\n".join(line for line in text.splitlines() if line.startswith("| "))
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", rows) is not None


def test_every_flag_of_every_command_is_on_the_page():
    top = _helps([()])[()]
    commands = _commands(top)
    assert len(commands) >= 14 and "demo" in commands and "chat" in commands, top
    page = PAGE.read_text(encoding="utf-8")
    head, sections = _sections(page)
    problems = [f"the top of docs/cli.md does not document mnemon's own {flag}"
                for flag in sorted(_usage_flags(top)) if not _documented(head, flag)]
    jobs = [(c,) for c in commands] + [(c, s) for c, subs in SUBCOMMANDS.items() for s in subs]
    helps = _helps(jobs)
    for words, text in helps.items():
        command = words[0]
        section = sections.get(_slug(f"`mnemon {command}`"))
        if section is None:
            problems.append(f"docs/cli.md has no section for mnemon {command}: add a heading "
                            f"'## `mnemon {command}`' and its flags")
            continue
        linked = [sections.get(anchor, "") for anchor in re.findall(r"\]\(#([\w-]+)\)", section)]
        where = "\n".join([section, *linked])
        for flag in sorted(_usage_flags(text)):
            if not _documented(where, flag):
                problems.append(f"mnemon {' '.join(words)} {flag} is not documented in docs/cli.md "
                                f"under '## `mnemon {command}`' (nor a section it links to)")
    assert not problems, "\n".join(problems)


def test_the_pages_own_links_land():
    page = PAGE.read_text(encoding="utf-8")
    _, sections = _sections(page)
    anchors = set(sections) | {_slug(h) for h in re.findall(r"^#{3,} (.+)$", page, re.M)}
    missing = sorted(set(re.findall(r"\]\(#([\w-]+)\)", page)) - anchors)
    assert not missing, f"links to no heading of docs/cli.md: {missing}"


def test_the_command_list_is_read_from_the_help():
    top = "usage: mnemon\n\npositional arguments:\n  COMMAND\n    demo         offline\n" \
          "    transcript   the door: index,\n                 read\n\noptions:\n  -h, --help\n"
    assert _commands(top) == ["demo", "transcript"]
    assert _usage_flags("usage: mnemon x [-h] [--json | --endpoint URL]\n           [--a-b]\n"
                        "\nmore --not-this\n") == {"--json", "--endpoint", "--a-b"}
