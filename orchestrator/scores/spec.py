"""A job's ``[[score]]`` tables: how each task's answer is graded (``docs/scores.md``).

One Struct for every kind: the keys a kind does not read are refused when the job is loaded
(``check``), so a misplaced ``abs_tol`` under an ``exact`` scorer is a one-line error naming
its line rather than a setting silently ignored.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, Struct, field

__all__ = ["KINDS", "NAME", "ScoreSpec", "check", "kind_keys"]

KINDS = ("exact", "includes", "regex", "numeric", "json", "choice", "python", "model")

NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$"
"""A scorer's name: a column of ``mnemon results``, a key of a row's ``scores``, and part of a
judge's agent id — so path-safe and short."""

Ignore = Literal["case", "whitespace", "punctuation"]


class ScoreSpec(Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """One ``[[score]]`` table."""

    name: Annotated[str, Meta(pattern=NAME)]
    kind: Literal["exact", "includes", "regex", "numeric", "json", "choice", "python", "model"]
    target: str | None = None
    """This scorer's own target template (``{column}``), instead of the job's."""
    ignore: list[Ignore] = field(default_factory=lambda: ["whitespace"])
    """``exact``, ``includes``, ``regex`` (its group against the target), ``json`` (strings):
    differences that do not count. Unicode is always NFKC-normalised first."""
    pattern: Annotated[str, Meta(max_length=2000)] | None = None
    """``regex``: the pattern (default: the target itself)."""
    full: bool = False
    """``regex``: the pattern must match the whole answer (else: anywhere in it)."""
    abs_tol: Annotated[float, Meta(ge=0)] = 0.0
    """``numeric`` (and numbers in ``json``): an absolute tolerance."""
    rel_tol: Annotated[float, Meta(ge=0)] = 1e-9
    """``numeric`` (and numbers in ``json``): a relative tolerance."""
    fields: list[str] = []
    """``json``: the paths compared (``a.b[0]``); none: every top-level field of the target."""
    choices: Annotated[str, Meta(pattern=r"^[A-Z]{2,26}$")] = "ABCDE"
    """``choice``: the letters a multiple-choice answer may give."""
    python: str | None = None
    """``python``: the user's scorer, ``module:function`` beside the job file."""
    role: str | None = None
    """``model``: the judge's named role (one of the job's ``[roles.NAME]``; default: the
    job's provider with no system prompt of its own)."""
    rubric: Annotated[str, Meta(max_length=20000)] | None = None
    """``model``: what the judge grades against; the task, its target and the answer follow."""


#: the keys each kind reads beyond ``name``, ``kind`` and ``target``
_KEYS: dict[str, tuple[str, ...]] = {
    "exact": ("ignore",),
    "includes": ("ignore",),
    "regex": ("ignore", "pattern", "full"),
    "numeric": ("abs_tol", "rel_tol"),
    "json": ("ignore", "fields", "abs_tol", "rel_tol"),
    "choice": ("choices",),
    "python": ("python",),
    "model": ("role", "rubric"),
}
_DEFAULTS = {f: getattr(ScoreSpec(name="x", kind="exact"), f)
             for f in ("ignore", "pattern", "full", "abs_tol", "rel_tol", "fields", "choices",
                       "python", "role", "rubric")}


def kind_keys(kind: str) -> tuple[str, ...]:
    return _KEYS[kind]


def check(spec: ScoreSpec) -> tuple[str, str] | None:
    """``(key, why)`` of the first key the scorer's kind cannot use, else None."""
    for key, default in _DEFAULTS.items():
        if key not in _KEYS[spec.kind] and getattr(spec, key) != default:
            return key, (f"a {spec.kind} scorer takes no {key} (it takes "
                         f"{', '.join(_KEYS[spec.kind])})")
    if spec.kind == "python" and not spec.python:
        return "python", "a python scorer needs python = \"module:function\""
    if spec.kind == "model" and not spec.rubric:
        return "rubric", "a model scorer needs a rubric (what its judge grades against)"
    return None
