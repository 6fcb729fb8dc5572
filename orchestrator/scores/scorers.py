"""The scorers: an answer (and its typed output) against a target, as a number in [0, 1].

Pure and synchronous: each kind is a function of the answer, the typed output, the target and
the row. A scorer that raises is that task's *error* (``Score.error``), never the run's; the
caller (``jobs/scoring.py``) runs them in a worker thread, since a ``regex`` scorer's pattern is
the user's text and may take its whole time budget (``REGEX_TIMEOUT_S``) before it is refused.

An answer that is missing (a task that failed) scores 0 with the reason as its explanation:
leaving it out would grade a strategy that fails often on its easy tasks alone.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import regex
from msgspec import Struct

from .spec import ScoreSpec

__all__ = ["REGEX_TIMEOUT_S", "Score", "ScorerError", "normalise", "parse_number", "score"]

REGEX_TIMEOUT_S = 1.0
"""How long one ``regex`` scorer's pattern may run on one answer before it is that task's
error (the ``regex`` package's own timeout: a catastrophic pattern cannot hold a thread)."""

_CLIP = 300


class ScorerError(Exception):
    """A scorer that cannot grade this task (a target that is not a number, a field the target
    lacks, a user scorer returning something that is not a score): the task's score is an
    error naming why; the other tasks go on."""


class Score(Struct, kw_only=True, omit_defaults=True):
    value: float | None
    explanation: str | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value}
        if self.explanation is not None:
            out["explanation"] = self.explanation
        if self.error is not None:
            out["error"] = self.error
        return out


def _clip(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _CLIP else text[:_CLIP - 1] + "…"


_PUNCT = frozenset("P")


def normalise(text: str, ignore: Sequence[str]) -> str:
    """NFKC always; then, as ``ignore`` asks, case folded, punctuation dropped (every Unicode
    ``P*`` category), whitespace trimmed and collapsed."""
    text = unicodedata.normalize("NFKC", text)
    if "case" in ignore:
        text = text.casefold()
    if "punctuation" in ignore:
        text = "".join(c for c in text if unicodedata.category(c)[0] not in _PUNCT)
    if "whitespace" in ignore:
        text = " ".join(text.split())
    return text


# a number as a model writes it: signs, thousands separators, decimals, an exponent; \d takes
# every script's digits (float() reads them), NFKC has made full-width ones ASCII already
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d{1,4})?|[-+]?\.\d+")
_MINUS = str.maketrans({"\u2212": "-", "\u2013": "-", "\u00a0": " ", "\u202f": " "})


def parse_number(text: Any) -> float | None:
    """A number from a value: itself if it is one; the whole text if it reads as one
    (``"1e3"``, ``" 42 "``, ``"−5"``); else the *last* number written in it (the conclusion
    of a worked answer: ``"… so the total is 1,250."``); None when there is none."""
    if isinstance(text, bool):
        return None
    if isinstance(text, (int, float)):
        return float(text)
    if not isinstance(text, str):
        return None
    t = unicodedata.normalize("NFKC", text).translate(_MINUS).strip()
    try:
        v = float(t.replace(",", ""))
        return v if math.isfinite(v) else None
    except ValueError:
        pass
    found = _NUMBER.findall(t[-100_000:])
    if not found:
        return None
    try:
        v = float(found[-1].replace(",", ""))
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _close(a: float, b: float, spec: ScoreSpec) -> bool:
    return math.isclose(a, b, rel_tol=spec.rel_tol, abs_tol=spec.abs_tol)


def _need_target(target: str | None, spec: ScoreSpec) -> str:
    if target is None:
        raise ScorerError(f"no target: give [input] target, the task's target or the "
                          f"scorer's own (scorer {spec.name})")
    return target


# ------------------------------------------------------------------ each kind

def _exact(spec, answer, output, target, row) -> Score:
    t = _need_target(target, spec)
    ok = normalise(answer, spec.ignore) == normalise(t, spec.ignore)
    return Score(value=1.0 if ok else 0.0,
                 explanation=None if ok else f"expected {_clip(t)!r}")


def _includes(spec, answer, output, target, row) -> Score:
    t = _need_target(target, spec)
    ok = normalise(t, spec.ignore) in normalise(answer, spec.ignore)
    return Score(value=1.0 if ok else 0.0,
                 explanation=None if ok else f"{_clip(t)!r} not in the answer")


def _regex(spec, answer, output, target, row) -> Score:
    pattern = spec.pattern if spec.pattern is not None else _need_target(target, spec)
    try:
        rx = regex.compile(pattern, regex.V0)
    except (regex.error, OverflowError, RecursionError) as e:
        raise ScorerError(f"not a pattern: {e}") from None
    try:
        m = (rx.fullmatch if spec.full else rx.search)(answer, concurrent=True,
                                                     timeout=REGEX_TIMEOUT_S)
    except TimeoutError:
        raise ScorerError(f"the pattern ran longer than {REGEX_TIMEOUT_S:g} s on the answer "
                          "and was stopped") from None
    if m is None:
        return Score(value=0.0, explanation="no match")
    if spec.pattern is None or target is None:
        return Score(value=1.0, explanation=_clip(m.group(0)))
    got = m.group(1) if rx.groups else m.group(0)  # the pattern extracts; the target judges
    ok = got is not None and normalise(got, spec.ignore) == normalise(target, spec.ignore)
    return Score(value=1.0 if ok else 0.0,
                 explanation=f"found {_clip(got or '')!r}" + ("" if ok else
                                                               f", expected {_clip(target)!r}"))


def _numeric(spec, answer, output, target, row) -> Score:
    t = parse_number(_need_target(target, spec))
    if t is None:
        raise ScorerError(f"the target {_clip(str(target))!r} is not a number")
    got = parse_number(output) if isinstance(output, (int, float)) else parse_number(answer)
    if got is None:
        return Score(value=0.0, explanation="no number in the answer")
    ok = _close(got, t, spec)
    return Score(value=1.0 if ok else 0.0, explanation=f"{got:g} vs {t:g}")


_FENCE = re.compile(r"^```[a-zA-Z]*\n(.*)\n```$", re.S)
_PATH = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def _as_json(value: Any, what: str) -> Any:
    if not isinstance(value, str):
        return value
    text = value.strip()
    m = _FENCE.match(text)
    try:
        return json.loads(m.group(1) if m else text)
    except ValueError:
        raise ScorerError(f"the {what} is not JSON") from None


_MISSING = object()


def _at(value: Any, path: str) -> Any:
    for key, index in _PATH.findall(path):
        if index:
            i = int(index)
            value = value[i] if isinstance(value, list) and i < len(value) else _MISSING
        else:
            value = value.get(key, _MISSING) if isinstance(value, dict) else _MISSING
        if value is _MISSING:
            return _MISSING
    return value


def _same(a: Any, b: Any, spec: ScoreSpec) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return normalise(a, spec.ignore) == normalise(b, spec.ignore)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) \
            and not isinstance(a, bool) and not isinstance(b, bool):
        return _close(float(a), float(b), spec)
    return bool(a == b)


def _json(spec, answer, output, target, row) -> Score:
    want = _as_json(_need_target(target, spec), "target")
    if output is None:
        try:
            output = _as_json(answer, "answer")
        except ScorerError:
            return Score(value=0.0, explanation="the answer is not JSON")
    paths = spec.fields or (list(want) if isinstance(want, dict) else [])
    if not paths:
        raise ScorerError("no fields to compare: give fields, or a target that is an object")
    wrong: list[str] = []
    for p in paths:
        w = _at(want, p)
        if w is _MISSING:
            raise ScorerError(f"the target has no field {p!r}")
        g = _at(output, p)
        if g is _MISSING:
            wrong.append(f"{p}: missing")
        elif not _same(g, w, spec):
            wrong.append(f"{p}: {_clip(json.dumps(g, ensure_ascii=False))[:60]}")
    value = (len(paths) - len(wrong)) / len(paths)
    return Score(value=value, explanation="; ".join(wrong) if wrong else None)


def _letters(spec: ScoreSpec) -> str:
    return "[" + re.escape(spec.choices) + "]"


def extract_choice(answer: str, choices: str) -> str | None:
    """The letter a multiple-choice answer gives: the whole answer (``B``, ``(B)``, ``B.``),
    an ``answer: B`` / ``answer is (B)``, a line that starts ``B)``, or a lone ``(B)``; the last
    such statement wins (a model may discuss the others first). None when there is none."""
    a = unicodedata.normalize("NFKC", answer).strip()[-20_000:]
    L = "[" + re.escape(choices) + "]"
    whole = re.fullmatch(rf"\**\(?({L})\)?[.:]?\**", a)
    if whole:
        return whole.group(1)
    for rx in (rf"(?i:answer)\W{{0,3}}(?:(?i:is)\s+)?(?:(?i:option)\s+)?\(?\**({L})\b",
               rf"(?m)^\s*\**\(?({L})[).:]\s", rf"\(({L})\)"):
        found = re.findall(rx, a)
        if found:
            return found[-1]
    return None


def _choice(spec, answer, output, target, row) -> Score:
    t = extract_choice(_need_target(target, spec), spec.choices)
    if t is None:
        raise ScorerError(f"the target {_clip(str(target))!r} is not one of "
                          f"{', '.join(spec.choices)}")
    got = extract_choice(answer, spec.choices)
    if got is None:
        return Score(value=0.0, explanation="no choice found in the answer")
    return Score(value=1.0 if got == t else 0.0, explanation=f"chose {got}, expected {t}")


def as_score(value: Any) -> Score:
    """What a user scorer returned, as a score: a bool, a number in [0, 1], a ``(value,
    explanation)`` pair, a ``{"value", "explanation"?}`` dict or a ``Score``."""
    explanation = None
    if isinstance(value, Score):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        value, explanation = value
    elif isinstance(value, dict) and "value" in value:
        value, explanation = value["value"], value.get("explanation")
    if isinstance(value, bool):
        value = 1.0 if value else 0.0
    if not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise ScorerError(f"returned {_clip(repr(value))}, not a score in [0, 1] (a bool, a "
                          "number, (value, explanation) or {'value': …})")
    if explanation is not None and not isinstance(explanation, str):
        explanation = str(explanation)
    return Score(value=float(value), explanation=_clip(explanation) if explanation else None)


_OFFERED = ("answer", "target", "output", "input", "task")


def call_user(fn: Callable[..., Any], *, answer: str, target: str | None, output: Any,
              row: dict[str, Any]) -> Score:
    """A ``python`` scorer called with the arguments its signature names, of ``answer``,
    ``target``, ``output`` (the typed answer), ``input`` (the row) and ``task`` (the id)."""
    offered = {"answer": answer, "target": target, "output": output,
               "input": row.get("input"), "task": row.get("task")}
    params: Mapping[str, inspect.Parameter]
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        kwargs = offered
    else:
        kwargs = {k: v for k, v in offered.items() if k in params}
    return as_score(fn(**kwargs))


KINDS: dict[str, Callable[..., Score]] = {
    "exact": _exact, "includes": _includes, "regex": _regex, "numeric": _numeric,
    "json": _json, "choice": _choice,
}


def score(spec: ScoreSpec, row: dict[str, Any], target: str | None,
          user: Callable[..., Any] | None = None) -> Score:
    """One scorer on one results row (its ``answer``, ``output``, ``status``): never raises —
    a scorer that fails is this task's error. ``user`` is the ``python`` kind's function."""
    answer, output = row.get("answer"), row.get("output")
    if answer is None and output is None:
        return Score(value=0.0, explanation=_clip(f"no answer ({row.get('reason') or row.get('status')})"))
    if not isinstance(answer, str):
        answer = json.dumps(output, ensure_ascii=False)
    try:
        if spec.kind == "python":
            if user is None:
                raise ScorerError("no function")
            return call_user(user, answer=answer, target=target, output=output, row=row)
        return KINDS[spec.kind](spec, answer, output, target, row)
    except ScorerError as e:
        return Score(value=None, error=_clip(str(e)))
    except Exception as e:  # noqa: BLE001 - a user scorer's (or a target's) failure is the task's
        return Score(value=None, error=_clip(f"{type(e).__name__}: {e}"))
