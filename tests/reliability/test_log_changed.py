"""A log is never written past damage it has not seen: the writer checks, before each append,
that the file is still the one it wrote (its size against the writer's own offset, its last
bytes against the record written last) and refuses by name when it is not. A log cut back under
a running agent (log rotation with copytruncate, a careless ``> file``) is not written on, and
``mnemon verify`` flags what such a cut leaves (a mnemon child with no ``Inherited`` link, an
assistant turn with no user turn before it)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import blake3
import pytest
import trio

from mnemon.lineage.runroot import agent_source
from mnemon.orchestrator.cli import main
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.session.errors import LogChanged, LogWriteFailed
from mnemon.session import log as log_module
from mnemon.session.chain import resume_state
from mnemon.session.log import RecordLog, Running
from mnemon.session.records import SessionStarted, Steering, UserPrompt

from ..orchestrator.conftest import call, fetch_tool, provider, say, settings


WRITERS = ["unchained", "chained", "native"]
"""The writer's three paths: an unchained log; a chained one hashed by the ``blake3`` package
(check, seal and write from Python); a chained one through the native append, which checks,
seals and writes in one call (decision 0473) — each must refuse the same changes by name."""


def _writer(path: Path, how: str) -> RecordLog:
    if how == "native" and log_module._Chain is log_module._NoChain:
        pytest.skip("the native extension is not built")
    log = RecordLog(path, new=True, chain=how != "unchained")
    if how == "chained":
        log.go_on(Running(blake3.blake3()))  # the package's state: the Python path
    return log


def _log(tmp_path: Path, how: str = "unchained") -> tuple[RecordLog, Path]:
    path = tmp_path / "agents" / "a1" / "record.jsonl"
    log = _writer(path, how)
    log.append(SessionStarted(agent="a1", at="2026-01-01T00:00:00Z"))
    log.append(UserPrompt(turn=1, text="hello"))
    return log, path


def _refused(log: RecordLog, path: Path, what: str) -> None:
    before = path.read_bytes()
    with pytest.raises(LogChanged) as e:
        log.append(Steering(text="after the damage"))
    assert str(path) in str(e.value) and what in str(e.value)
    assert path.read_bytes() == before, "nothing appended past the damage"
    with pytest.raises(LogWriteFailed, match="changed under its writer"):  # nor anything later
        log.append(Steering(text="again"))
    assert path.read_bytes() == before


@pytest.mark.parametrize("how", WRITERS)
def test_a_log_that_shrank_under_its_writer_is_refused_by_name(tmp_path, how):
    log, path = _log(tmp_path, how)
    size = path.stat().st_size
    first = path.read_bytes().split(b"\n")[0] + b"\n"
    with open(path, "r+b") as f:  # copytruncate's cut, back to the opening record
        f.truncate(len(first))
    _refused(log, path, f"shrank from {size} to {len(first)} bytes")
    log.close()


@pytest.mark.parametrize("how", WRITERS)
def test_each_change_is_named(tmp_path, how):
    # shrank: to nothing (a '> file')
    log, path = _log(tmp_path / "a", how)
    size = path.stat().st_size
    with open(path, "wb"):
        pass
    _refused(log, path, f"shrank from {size} to 0 bytes")
    log.close()
    # grew: bytes this writer did not write
    log, path = _log(tmp_path / "b", how)
    with open(path, "ab") as f:
        f.write(b'{"t":"Steering","text":"someone else"}\n')
    _refused(log, path, "grew from")
    log.close()
    # the same size, the last record not the one written (an edit in place)
    log, path = _log(tmp_path / "c", how)
    data = bytearray(path.read_bytes())
    data[-4] ^= 0x01
    with open(path, "r+b") as f:
        f.write(data)
    _refused(log, path, "its last record")
    log.close()
    # replaced: the name now belongs to another file (an editor's save, a rename over it)
    log, path = _log(tmp_path / "d", how)
    other = path.with_name("new")
    other.write_bytes(path.read_bytes())
    os.replace(other, path)
    before = path.read_bytes()
    with pytest.raises(LogChanged, match="deleted or replaced"):
        log.append(Steering(text="into the unlinked file"))
    assert path.read_bytes() == before
    log.close()


@pytest.mark.parametrize("how", ["unchained", "native"])
def test_a_reopened_log_checks_the_tail_it_found(tmp_path, how):
    log, path = _log(tmp_path, how)
    log.close()
    log = RecordLog(path)  # the resume's writer: knows the file only from its tail
    if how == "native":
        log.go_on(resume_state(path, "agents/a1/record.jsonl"))  # as AgentLog.resume does
        assert type(log._chain.h) is log_module._Chain
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01
    path.write_bytes(bytes(data))  # same size
    with pytest.raises(LogChanged, match="its last record"):
        log.append(Steering(text="x"))
    log.close()


@pytest.mark.parametrize("how", WRITERS)
def test_a_log_untouched_takes_appends_as_before(tmp_path, how):
    log, path = _log(tmp_path, how)
    for i in range(50):
        log.append(Steering(text="n" * (i * 200)))  # lines shorter and longer than the tail
    assert len(path.read_bytes().splitlines()) == 52
    log.close()


# ---------------------------------------------------------------- under a running agent


async def test_a_child_cut_back_while_it_waits_on_its_provider_fails_and_appends_nothing(
        tmp_path):
    """The seen case: a mnemon child with an inherited link and turns of its own, its log cut
    back to its SessionStarted while its provider call is in flight. It must not append its
    answer (which would leave a log that folds with one turn and verifies "ok"): it fails with
    the refusal naming the file, and ``mnemon verify`` flags the log that is left."""
    asked = trio.Event()  # the child's provider call has begun
    go = trio.Event()  # the test has cut the log: let the call answer

    async def policy(request, state):
        state["k"] = state.get("k", 0) + 1
        k = state["k"]
        if request.meta["depth"] == 0:
            if k <= 3:
                return call(state, "fetch", i=k)
            if k == 4:
                return call(state, "agents_start", task="read page 3 again", kind="mnemon")
            if k == 5:
                child = json.loads(request.messages[-1]["content"][0]["content"])["agent"]
                return call(state, "agents_wait", agents=[child])
            return say("parent done: " + request.messages[-1]["content"][0]["content"])
        if k <= 2:
            return call(state, "fetch", i=3)
        asked.set()
        await go.wait()  # the provider call is in flight here
        return say("the answer the cut log must not get")

    root = tmp_path / "run"
    async with open_supervisor(root, provider(policy), settings(),
                               user_tools=[fetch_tool()]) as sup:
        top = sup.new_root("read pages")
        sup.start(top)
        with trio.fail_after(10):
            await asked.wait()
        child = next(a for a in sup.agents.values() if a is not top)
        path = root / agent_source(child.id)
        lines = path.read_bytes().split(b"\n")
        kinds = [json.loads(x)["t"] for x in lines if x]
        assert kinds[:3] == ["SessionStarted", "Inherited", "UserPrompt"]
        assert kinds.count("AssistantMessage") == 2
        cut = len(lines[0]) + 1
        with open(path, "r+b") as f:  # copytruncate to its opening record
            f.truncate(cut)
        go.set()
        with trio.fail_after(10):
            await top.done.wait()
    assert child.state == "failed", child.reason
    assert "LogChanged" in child.reason and agent_source(child.id) in child.reason
    assert "shrank" in child.reason and f"to {cut} bytes" in child.reason
    assert path.stat().st_size == cut, "neither the answer nor SessionEnded was appended"
    # the parent was told the child failed; it went on
    assert top.reason == "done" and '"failed"' in (top.answer or "")
    # what the cut left does not verify
    assert main(["verify", str(root), "--json"]) == 1


def test_verify_flags_what_the_cut_leaves(tmp_path, capsys):
    """The file the seen case produced before the fix: a mnemon child's opening, then its
    answer — one turn, no link. Both rules name path and line."""
    from mnemon.lineage.runroot import create_run_root

    root = create_run_root(tmp_path / "run", "tests")
    a1 = root / "agents" / "a1" / "record.jsonl"
    a2 = root / "agents" / "a2" / "record.jsonl"
    a1.parent.mkdir(parents=True)
    a2.parent.mkdir(parents=True)
    a1.write_text('{"t":"SessionStarted","agent":"a1","at":"2026-01-01T00:00:00Z"}\n'
                  '{"t":"UserPrompt","turn":1,"text":"go"}\n'
                  '{"t":"AssistantMessage","turn":2,"blocks":[{"type":"text","text":"ok"}],'
                  '"stop_reason":"end_turn","model":null,"usage":null}\n')
    a2.write_text('{"t":"SessionStarted","agent":"a2","at":"2026-01-01T00:00:01Z",'
                  '"parent":"a1","kind":"mnemon"}\n'
                  '{"t":"TurnStarted","turn":7,"at":"2026-01-01T00:00:02Z"}\n'
                  '{"t":"AssistantMessage","turn":7,"blocks":[{"type":"text","text":"x"}],'
                  '"stop_reason":"end_turn","model":null,"usage":null}\n'
                  '{"t":"SessionEnded","reason":"done","at":"2026-01-01T00:00:03Z"}\n')
    assert main(["verify", str(root), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    got = {(p["path"], p["line"]) for p in report["problems"]}
    assert got == {("agents/a2/record.jsonl", 1), ("agents/a2/record.jsonl", 3)}, report
    errors = " ".join(p["error"] for p in report["problems"])
    assert "Inherited" in errors and "no user turn before it" in errors


# ---------------------------------------------------------------- property


from hypothesis import given, settings as hsettings, strategies as st  # noqa: E402


@hsettings(max_examples=60, deadline=None)
@given(texts=st.lists(st.text(max_size=300), min_size=1, max_size=6),
       change=st.sampled_from(["none", "truncate", "grow", "flip"]),
       where=st.integers(min_value=0, max_value=1 << 16),
       how=st.sampled_from(WRITERS))
def test_any_change_under_the_writer_is_refused_and_none_is_not(tmp_path_factory, texts,
                                                                  change, where, how):
    """For any records written and any change to the file after them — cut back to any size,
    grown by any line, any byte of the last record flipped — the next append is refused and
    writes nothing; with no change it is taken."""
    path = tmp_path_factory.mktemp("p") / "agents" / "a1" / "record.jsonl"
    log = _writer(path, how)
    log.append(SessionStarted(agent="a1", at="2026-01-01T00:00:00Z"))
    for t in texts:
        log.append(Steering(text=t))
    data = path.read_bytes()
    last = data[:-1].rfind(b"\n") + 1  # where the last record starts
    if change == "truncate":
        cut = where % len(data)
        with open(path, "r+b") as f:
            f.truncate(cut)
    elif change == "grow":
        with open(path, "ab") as f:
            f.write(b'{"t":"Steering","text":"%d"}\n' % where)
    elif change == "flip":
        i = last + where % (len(data) - last)
        with open(path, "r+b") as f:
            f.seek(i)
            f.write(bytes([data[i] ^ 0x01]))
    before = path.read_bytes()
    if change == "none":
        log.append(Steering(text="taken"))
        assert path.read_bytes().startswith(before) and len(path.read_bytes()) > len(before)
    else:
        with pytest.raises(LogChanged):
            log.append(Steering(text="refused"))
        assert path.read_bytes() == before
    log.close()
