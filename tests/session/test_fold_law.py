"""The fold law: a log written through ``AgentLog`` and refolded from its file gives the live table."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemon.session.agentlog import AgentLog
from mnemon.session.chain import strip
from mnemon.session.records import encode
from mnemon.session.resume import fold_file
from tests.strategies import fold_records, sessions

SETTINGS = settings(max_examples=int(__import__("os").environ.get("MNEMON_HYPOTHESIS_EXAMPLES", 120)), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


def _write(tmp_path, records) -> AgentLog:
    path = tmp_path / "agents" / "a1" / "record.jsonl"
    if path.exists():
        path.unlink()
    log = AgentLog.create(path, "agents/a1/record.jsonl", records[0])
    assert log.ctx.history_bytes() == log.ctx.history_bytes_projection()
    for r in records[1:]:
        log.append(r)
        assert log.ctx.history_bytes() == log.ctx.history_bytes_projection(), r
    return log


@SETTINGS
@given(records=sessions())
def test_refold_equals_live(tmp_path, records):
    log = _write(tmp_path, records)
    log.close()
    folded, torn = fold_file(log.path, "agents/a1/record.jsonl")
    assert torn is None
    assert folded == log.ctx
    assert folded.records_folded == len(records)
    # the file holds exactly the encoded lines, one per record, each with its chain key
    lines = log.path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and [strip(x) for x in lines[:-1]] == [encode(r) for r in records]
    # folding the records without a file gives the same table but for the digests (a turn's
    # bytes are its lines' lengths as written, chain keys included)
    bare = fold_records(records, lengths=[len(x) for x in lines[:-1]])
    assert [(t.id, t.state, t.bytes, t.residue, t.swept) for t in bare.turns] == \
        [(t.id, t.state, t.bytes, t.residue, t.swept) for t in folded.turns]
    assert bare.history_bytes() == folded.history_bytes()


@SETTINGS
@given(records=sessions(), cut=st.integers(1, 60))
def test_resume_midway_then_continue(tmp_path, records, cut):
    """Resume after any prefix, keep appending: the result folds to the same table as live."""
    cut = min(cut, len(records))
    log = _write(tmp_path, records[:cut])
    log.close()
    resumed, torn = AgentLog.resume(log.path, "agents/a1/record.jsonl")
    assert torn is None
    for r in records[cut:]:
        resumed.append(r)
        assert resumed.ctx.history_bytes() == resumed.ctx.history_bytes_projection()
    resumed.close()
    again, _ = fold_file(log.path, "agents/a1/record.jsonl")
    assert again == resumed.ctx
