"""Coverage-guided fuzzing of the fold (and the door on what folds) with atheris. A script, not
a test; ``tests/reliability/test_fuzz.py`` runs the same property under hypothesis in CI.

    pip install atheris
    python bench/fuzz_fold.py -max_total_time=300 -timeout=5 [-rss_limit_mb=1024] [CORPUS_DIR]

Each input is split into lines and written as a log after a valid ``SessionStarted``; the fold
may refuse it only with ``LogRefused`` naming a line, and whatever folds must index, read and
grep through the door with nothing but named refusals. libFuzzer's ``-timeout`` is the time bound
per input (a hang is a finding), ``-rss_limit_mb`` the memory bound. Findings are written by
libFuzzer as ``crash-*`` / ``timeout-*`` files to replay with the same command and the file.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports():
    import msgspec  # noqa: F401

    from mnemon.session.door import Door
    from mnemon.session.errors import LogRefused, Refusal
    from mnemon.session.resume import fold_file

HEAD = b'{"t":"SessionStarted","agent":"a1"}\n'
DIR = Path(tempfile.mkdtemp(prefix="mnemon-fuzz-fold-"))
(DIR / "agents" / "a1").mkdir(parents=True)
LOG = DIR / "agents" / "a1" / "record.jsonl"
SEEDS = [
    b'{"t":"UserPrompt","turn":1,"text":"hello codeword"}',
    b'{"t":"AssistantMessage","turn":2,"blocks":[{"type":"tool_use","id":"c1","name":"x",'
    b'"input":{}}],"stop_reason":"tool_use","model":null,"usage":null}',
    b'{"t":"ToolResults","results":[{"tool_use_id":"c1","content":"ok"}]}',
    b'{"t":"Evicted","residue":{"span":[1,2],"note":"n","by":"model"}}',
]


def one(data: bytes) -> None:
    LOG.write_bytes(HEAD + data)
    try:
        ctx, _torn = fold_file(LOG, "agents/a1/record.jsonl")
    except LogRefused as e:
        assert e.line >= 1
        return
    door = Door(DIR, ctx)
    try:
        door.index()
        door.grep("code|ok", timeout_s=1.0)
        if ctx.turns:
            door.read(str(ctx.turns[0].id))
    except Refusal:
        pass


def main() -> None:
    corpus = [a for a in sys.argv[1:] if not a.startswith("-")]
    if corpus and not os.listdir(corpus[0]):
        for i, s in enumerate(SEEDS):
            Path(corpus[0], f"seed-{i}").write_bytes(s + b"\n")
    atheris.Setup(sys.argv, one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
