"""``mnemon results``: the results of a run as a table — one row per task, the typed output's
top-level fields as columns — in JSON lines or CSV, ready for a spreadsheet or pandas.

Pure: rows in, text out. Columns are ``task``, ``status`` and ``agent``, then every top-level
field of the outputs in the order first met, then ``answer`` when no task has an output; a
field whose name is already a column is named ``output.<field>``. A job with ``[variants]``
adds ``variant`` after ``task``; a job with ``[[score]]`` tables adds ``score.<name>`` per
scorer (the value; empty for a scorer's error) after the rest. In CSV, nested values
(objects, arrays) are their compact JSON, ``null`` an empty cell, booleans ``true``/``false``.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import msgspec

__all__ = ["FIXED", "columns", "table_rows", "to_csv", "to_jsonl"]

FIXED = ("task", "status", "agent")
_encode = msgspec.json.Encoder().encode


def _fields(rows: list[dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for r in rows:
        out = r.get("output")
        if isinstance(out, dict):
            names += [k for k in out if k not in names]
    return names


def _scorers(rows: list[dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for r in rows:
        sc = r.get("scores")
        if isinstance(sc, dict):
            names += [k for k in sc if k not in names]
    return names


def _fixed(rows: list[dict[str, Any]]) -> list[str]:
    if any("variant" in r for r in rows):
        return ["task", "variant", "status", "agent"]
    return list(FIXED)


def columns(rows: list[dict[str, Any]]) -> list[str]:
    """The table's columns (see the module's docstring)."""
    fields = _fields(rows)
    fixed = _fixed(rows)
    cols = list(fixed)
    cols += [f"output.{f}" if f in fixed else f for f in fields]
    if not fields:
        cols.append("answer")
    cols += [f"score.{n}" for n in _scorers(rows)]
    return cols


def table_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each results row as a flat ``{column: value}`` (values as in the JSON: nested ones kept
    whole)."""
    fields = _fields(rows)
    fixed = _fixed(rows)
    scorers = _scorers(rows)
    out = []
    for r in rows:
        row = {c: r.get(c) for c in fixed}
        o = r.get("output") if isinstance(r.get("output"), dict) else {}
        for f in fields:
            row[f"output.{f}" if f in fixed else f] = o.get(f)
        if not fields:
            row["answer"] = r.get("answer")
        sc = r.get("scores") if isinstance(r.get("scores"), dict) else {}
        for n in scorers:
            s = sc.get(n)
            row[f"score.{n}"] = s.get("value") if isinstance(s, dict) else None
        out.append(row)
    return out


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return _encode(value).decode()


def to_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    cols = columns(rows)
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for row in table_rows(rows):
        w.writerow([_cell(row[c]) for c in cols])
    return buf.getvalue()


def to_jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(_encode(row).decode() + "\n" for row in table_rows(rows))
