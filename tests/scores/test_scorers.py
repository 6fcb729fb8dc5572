"""Each scorer kind on its edge cases: unicode, numbers written as text, missing fields, a
pattern that would run for ever, a user scorer that raises (that task's score is an error,
the others go on)."""

from __future__ import annotations

import time

import pytest

from mnemon.orchestrator.scores.scorers import (Score, extract_choice, normalise, parse_number,
                                                score)
from mnemon.orchestrator.scores.spec import ScoreSpec, check


def S(kind: str, **kw) -> ScoreSpec:
    return ScoreSpec(name="s", kind=kind, **kw)


def row(answer, output=None, status="done"):
    return {"task": "t", "status": status, "answer": answer, "output": output,
            "reason": "done" if status == "done" else "failed: provider: 500"}


def value(spec, answer, target, output=None, user=None):
    got = score(spec, row(answer, output), target, user)
    assert isinstance(got, Score)
    return got.value


def test_exact_normalises_only_what_it_is_told():
    assert value(S("exact"), "  Paris \n", "Paris") == 1.0  # whitespace: the default
    assert value(S("exact"), "paris", "Paris") == 0.0
    assert value(S("exact", ignore=["case"]), "PARIS", "paris") == 1.0
    # '*' and '.' are both Unicode punctuation (Po): emphasis and a full stop go
    assert value(S("exact", ignore=["case", "punctuation", "whitespace"]), "**Paris.**",
                 "paris") == 1.0
    # NFKC always: a full-width or ligature spelling is the same text
    assert value(S("exact"), "ｆｉ", "fi") == 1.0
    assert value(S("exact", ignore=["case"]), "STRASSE", "straße") == 1.0  # case folding, not lower
    assert value(S("exact", ignore=["punctuation"]), "«Zürich»", "Zürich") == 1.0
    assert value(S("exact"), "Zu\u0308rich", "Zürich") == 1.0  # combining diaeresis composed


def test_includes_and_missing_targets():
    assert value(S("includes", ignore=["case"]), "It is PARIS, of course", "paris") == 1.0
    assert value(S("includes"), "Lyon", "Paris") == 0.0
    got = score(S("includes"), row("x"), None)
    assert got.value is None and "no target" in got.error


def test_numbers_as_text():
    assert parse_number("42") == 42 and parse_number(" 4.2e1 ") == 42
    assert parse_number("The total is 1,250.") == 1250
    assert parse_number("−5") == -5  # a minus sign, not a hyphen
    assert parse_number("٤٢") == 42  # Arabic-Indic digits
    assert parse_number("４２") == 42  # full-width
    assert parse_number("first 3, then 7, so 10") == 10  # the last number: the conclusion
    assert parse_number("no number here") is None and parse_number("inf") is None
    assert parse_number(True) is None and parse_number(3) == 3.0
    n = S("numeric", abs_tol=0.0001)
    assert value(n, "about 3.141", "3.14159") == 0.0
    assert value(S("numeric", abs_tol=0.001), "about 3.141", "3.14159") == 1.0
    assert value(S("numeric", rel_tol=0.1), "95", "100") == 1.0
    assert value(n, "nothing", "1") == 0.0
    bad = score(n, row("5"), "five")
    assert bad.value is None and "not a number" in bad.error


def test_numeric_reads_a_typed_number():
    assert value(S("numeric"), "ignored 3", "7", output=7) == 1.0


def test_regex_extracts_and_judges_and_stops_a_runaway_pattern():
    assert value(S("regex", pattern=r"answer is (\d+)"), "The answer is 42.", "42") == 1.0
    assert value(S("regex", pattern=r"answer is (\d+)"), "The answer is 41.", "42") == 0.0
    assert value(S("regex", pattern=r"^\d+$", full=True), "42", None) == 1.0
    assert value(S("regex", pattern=r"\d+", full=True), "42 apples", None) == 0.0
    assert value(S("regex"), "Paris or Lyon", "Par.s") == 1.0  # the target as the pattern
    broken = score(S("regex", pattern="("), row("x"), None)
    assert broken.value is None and "not a pattern" in broken.error
    t0 = time.monotonic()
    slow = score(S("regex", pattern=r"(a|aa)+$"), row("a" * 5000 + "!"), None)
    assert slow.value is None and "stopped" in slow.error
    assert time.monotonic() - t0 < 10


def test_json_fields_by_path():
    want = '{"capital": "Paris", "pop": 2.1, "tags": ["a", "b"], "geo": {"lat": 48.86}}'
    out = {"capital": "paris", "pop": 2.1000001, "tags": ["a", "c"], "geo": {"lat": 48.86}}
    sp = S("json", ignore=["case"], rel_tol=1e-3)
    got = score(sp, row(None, out), want)
    assert got.value == 0.75 and "tags" in got.explanation  # 3 of 4 top-level fields
    paths = S("json", fields=["geo.lat", "tags[0]", "tags[1]"])
    assert score(paths, row(None, out), want).value == pytest.approx(2 / 3)
    missing = score(S("json", fields=["capital", "area"]), row(None, {"capital": "Paris"}),
                    '{"capital": "Paris", "area": 105}')
    assert missing.value == 0.5 and "area: missing" in missing.explanation
    no_field = score(S("json", fields=["nope"]), row(None, out), want)
    assert no_field.value is None and "no field 'nope'" in no_field.error
    # an untyped answer is parsed as JSON (a fenced block too); not JSON scores 0
    fenced = "```json\n{\"capital\": \"Paris\"}\n```"
    assert score(S("json", fields=["capital"]), row(fenced), want).value == 1.0
    assert score(S("json", fields=["capital"]), row("Paris"), want).value == 0.0


def test_choice_letters():
    assert extract_choice("B", "ABCD") == "B"
    assert extract_choice("(c)", "ABCD") is None  # letters are upper case
    assert extract_choice("**(C)**", "ABCD") == "C"
    assert extract_choice("A is tempting, but the answer is (D).", "ABCD") == "D"
    assert extract_choice("Answer: b", "ABCD") is None
    assert extract_choice("Reasoning…\nB) because of the tide", "ABCD") == "B"
    assert extract_choice("E", "ABCD") is None
    sp = S("choice", choices="ABCD")
    assert value(sp, "The answer is B.", "(B)") == 1.0
    assert value(sp, "I cannot say", "B") == 0.0
    bad = score(sp, row("B"), "Z")
    assert bad.value is None and "not one of" in bad.error


def test_a_user_scorer_that_raises_is_that_tasks_error_and_the_others_go_on():
    calls = []

    def picky(answer, target, task):
        calls.append(task)
        if answer == "boom":
            raise ValueError("cannot grade\nthis")
        return answer == target, "compared"

    sp = S("python", python="m:f")
    rows = [row("x"), row("boom"), row("y")]
    got = [score(sp, r, "x", picky) for r in rows]
    assert [g.value for g in got] == [1.0, None, 0.0]
    assert got[1].error == "ValueError: cannot grade this"  # one line
    assert len(calls) == 3
    assert score(sp, row("x"), "x", lambda: 0.25).value == 0.25  # no arguments asked: none given
    assert score(sp, row("x"), "x", lambda **kw: kw["output"] is None).value == 1.0
    assert score(sp, row("x"), "x", lambda answer: {"value": 0.5}).value == 0.5
    out_of_range = score(sp, row("x"), "x", lambda answer: 2)
    assert out_of_range.value is None and "not a score in [0, 1]" in out_of_range.error
    assert score(sp, row("x"), "x", lambda answer: "yes").value is None


def test_a_task_without_an_answer_scores_zero_with_its_reason():
    for kind in ("exact", "numeric", "choice", "json"):
        got = score(S(kind), row(None, status="failed"), "1")
        assert got.value == 0.0 and "no answer (failed: provider: 500)" == got.explanation


def test_a_kind_refuses_keys_it_does_not_read():
    assert check(S("exact", abs_tol=1.0)) == ("abs_tol", "a exact scorer takes no abs_tol (it "
                                               "takes ignore)")
    assert check(S("python"))[0] == "python"
    assert check(S("model"))[0] == "rubric"
    assert check(S("regex", pattern="x", full=True)) is None


def test_normalise():
    assert normalise("  A\u00a0 b\t", ["whitespace"]) == "A b"
    assert normalise("Hello, World!", ["punctuation", "case"]) == "hello world"
