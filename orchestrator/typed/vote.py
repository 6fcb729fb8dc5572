"""A synod's vote over typed answers: field by field (decision 0282).

Each top-level field of the children's outputs is voted on alone: the value most children
gave wins it (strings compared as the text vote compares answers — the caller's
``normalise`` — other values by their canonical JSON). A child that ended without an output
does not vote; one whose output lacks a field abstains on that field. A tie is never hidden:
it is listed in ``ties`` and in the field's own tally with every tied value; the voted
object takes, for a tied field, the tied value given first — so that it keeps the output
type's shape — and whoever reads the vote sees that the field was tied.

Pure.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

from msgspec import Struct

from ...session.records import compact

__all__ = ["FieldVote", "vote_fields"]


class FieldVote(Struct, kw_only=True):
    output: dict[str, Any] | None
    """The voted object (None when no child gave an output)."""
    fields: dict[str, dict[str, Any]]
    """Per field: ``winner`` (None on a tie), ``tie``, ``tied`` (every tied value, first-given
    first), ``counts`` (votes per value as compared, most first), ``voters``."""
    ties: list[str]
    """The fields whose vote tied, in field order."""
    voters: int

    def as_dict(self) -> dict[str, Any]:
        return {"output": self.output, "fields": self.fields, "ties": self.ties,
                "voters": self.voters}


def _canonical(value: Any) -> str:
    return compact(_sorted(value)).decode()


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def vote_fields(outputs: list[dict[str, Any] | None],
                normalise: Callable[[str], str] = str.strip) -> FieldVote:
    """The field-wise vote over ``outputs`` (one per child; None: no output)."""
    voting = [o for o in outputs if isinstance(o, dict)]
    names: list[str] = []
    for o in voting:
        names += [k for k in o if k not in names]
    fields: dict[str, dict[str, Any]] = {}
    ties: list[str] = []
    out: dict[str, Any] = {}
    for name in names:
        first: dict[str, Any] = {}
        counts: Counter[str] = Counter()
        for o in voting:
            if name not in o:
                continue
            v = o[name]
            key = normalise(v) if isinstance(v, str) else _canonical(v)
            first.setdefault(key, v)
            counts[key] += 1
        ranked = sorted(first, key=lambda k: -counts[k])  # stable: first-given among equals
        top = counts[ranked[0]]
        leaders = [k for k in ranked if counts[k] == top]
        tie = len(leaders) > 1
        if tie:
            ties.append(name)
        out[name] = first[leaders[0]]
        fields[name] = {"winner": None if tie else first[leaders[0]], "tie": tie,
                        "tied": [first[k] for k in leaders] if tie else [],
                        "counts": {k: counts[k] for k in ranked},
                        "voters": sum(counts.values())}
    return FieldVote(output=out if voting else None, fields=fields, ties=ties,
                     voters=len(voting))
