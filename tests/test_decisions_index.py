"""docs/decisions/README.md lists every decision record, and only those: number, title, status,
what each amends and what amends it.

Records are added on several branches at once and their index lines at the merge, so each
failure prints the exact line to add, remove or write instead — the fix is a paste, not a hunt.
The line for a new record is made from the record itself: its ``# NNNN — Title``, its
``**Status**:`` word (``accepted`` when it gives none) and the records its status line says it
amends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

FOLDER = Path(__file__).resolve().parents[1] / "docs" / "decisions"
INDEX = FOLDER / "README.md"
STATUSES = ("accepted", "superseded", "withdrawn", "proposed")
NONE = "—"

RECORD_FILE = re.compile(r"^(\d{4})-[a-z0-9-]+\.md$")
HEADING = re.compile(r"^# (\d{4}) — (.+?)\s*$")
ROW = re.compile(r"^\| (\d{4}) \| \[(.+)\]\(([^)]+)\) \| ([a-z]+) \| (.+?) \| (.+?) \|$")
NUMBERS = re.compile(r"^\d{4}(, \d{4})*$")
#: in a record's status line, the verbs that say it changes another record, and the numbers after
AMENDING = re.compile(r"\b(?:amends|supersedes|replaces|adds to|widens|narrows|closes)\b"
                      r"(?:\s+decisions?)?((?:[\s,]*(?:and\s+)?\d{4}\b)+)", re.I)


@dataclass(frozen=True)
class Row:
    number: str
    title: str
    file: str
    status: str
    amends: tuple[str, ...]
    amended_by: tuple[str, ...]

    def line(self) -> str:
        return (f"| {self.number} | [{self.title}]({self.file}) | {self.status} | "
                f"{_cell(self.amends)} | {_cell(self.amended_by)} |")


def _cell(numbers) -> str:
    return ", ".join(sorted(set(numbers))) or NONE


def _numbers(cell: str) -> tuple[str, ...] | None:
    if cell == NONE:
        return ()
    return tuple(cell.split(", ")) if NUMBERS.match(cell) else None


def _records() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(FOLDER.glob("*.md")):
        m = RECORD_FILE.match(path.name)
        if m:
            assert m.group(1) not in found, f"two records numbered {m.group(1)}: " \
                                            f"{found[m.group(1)].name} and {path.name}"
            found[m.group(1)] = path
    return found


def _expected(path: Path, amended_by: tuple[str, ...] = ()) -> Row:
    """The index line a record asks for, read from its own text."""
    text = path.read_text(encoding="utf-8")
    m = HEADING.match(text.splitlines()[0] if text else "")
    assert m and m.group(1) == path.name[:4], (
        f"{path.name}: the first line must be '# {path.name[:4]} — Title', not {text[:80]!r}")
    status_line = next((line for line in text.splitlines() if line.startswith("**Status**")), "")
    word = re.match(r"\*\*Status\*\*:?\s*([a-z]+)", status_line, re.I)
    status = word.group(1).lower() if word and word.group(1).lower() in STATUSES else "accepted"
    amends = tuple(n for hit in AMENDING.finditer(status_line)
                   for n in re.findall(r"\d{4}", hit.group(1)) if n != path.name[:4])
    return Row(path.name[:4], m.group(2), path.name, status, amends, amended_by)


def _index() -> tuple[list[Row], list[str]]:
    """The rows, in order, and the problems of lines that look like rows and are not."""
    rows, bad = [], []
    for line in INDEX.read_text(encoding="utf-8").splitlines():
        if not re.match(r"^\|\s*\d", line):
            continue
        m = ROW.match(line)
        amends = _numbers(m.group(5)) if m else None
        amended_by = _numbers(m.group(6)) if m else None
        if m is None or amends is None or amended_by is None:
            bad.append(f"not an index line (| NNNN | [Title](NNNN-slug.md) | status | amends | "
                       f"amended by |, numbers as '0220, 0222' or '{NONE}'):\n    {line}")
            continue
        rows.append(Row(m.group(1), m.group(2), m.group(3), m.group(4), amends, amended_by))
    return rows, bad


def test_every_line_of_the_index_is_a_row():
    rows, bad = _index()
    assert not bad, "\n".join(bad)
    assert len(rows) >= 90  # the table was found at all


def test_every_record_is_listed():
    records = _records()
    rows, _ = _index()
    listed = {r.number for r in rows}
    missing = []
    for number, path in records.items():
        if number in listed:
            continue
        before = [r.number for r in rows if r.number < number]
        where = f"after the line of {before[-1]}" if before else "first in the table"
        row = _expected(path)
        note = ("" if not row.amends else
                f"\n  and on the lines of {', '.join(row.amends)}, add {number} to 'amended by'")
        missing.append(f"{path.name} is not in docs/decisions/README.md; add, {where}:\n"
                       f"{row.line()}{note}")
    assert not missing, "\n".join(missing)


def test_every_line_names_a_record_that_exists():
    records = _records()
    rows, _ = _index()
    stale = [f"{r.file} does not exist in docs/decisions/: remove the line\n{r.line()}"
             for r in rows if (FOLDER / r.file).name != r.file or not (FOLDER / r.file).is_file()]
    assert not stale, "\n".join(stale)
    wrong = []
    for r in rows:
        path = records.get(r.number)
        if path is None or path.name != r.file:
            continue  # the line above, or a number that is not its file's: below
        want = _expected(path, r.amended_by)
        if (r.title, r.file) != (want.title, want.file):
            fixed = Row(r.number, want.title, want.file, r.status, r.amends, r.amended_by)
            wrong.append(f"the line of {r.number} does not match {path.name}'s title; write:\n"
                         f"{fixed.line()}")
    numbered = [f"line {r.number} links {r.file}, a record of another number" for r in rows
                if r.file[:4] != r.number]
    assert not wrong + numbered, "\n".join(wrong + numbered)


def test_lines_are_once_each_and_in_number_order():
    rows, _ = _index()
    numbers = [r.number for r in rows]
    twice = sorted({n for n in numbers if numbers.count(n) > 1})
    assert not twice, f"listed more than once: {', '.join(twice)} (keep one line each)"
    out = [f"{b} comes after {a}" for a, b in zip(numbers, numbers[1:]) if b < a]
    assert not out, "the index is in number order: " + "; ".join(out)


def test_every_status_is_one_of_the_four():
    rows, _ = _index()
    bad = [f"{r.number}: status {r.status!r} is not one of {', '.join(STATUSES)}; write:\n"
           f"{Row(r.number, r.title, r.file, 'accepted', r.amends, r.amended_by).line()}"
           for r in rows if r.status not in STATUSES]
    assert not bad, "\n".join(bad)
    bare = [f"{r.number} is superseded by no record: name its successor in 'amended by'\n{r.line()}"
            for r in rows if r.status == "superseded" and not r.amended_by]
    assert not bare, "\n".join(bare)


def test_amendments_name_records_and_are_said_on_both_sides():
    rows, _ = _index()
    by_number = {r.number: r for r in rows}
    records = _records()
    unknown = [f"{r.number} names {n} in its {side} cell, "
               + ("which has no line here yet (add it first)" if n in records
                  else "which is no record")
               for r in rows for side, cell in (("amends", r.amends), ("amended by", r.amended_by))
               for n in cell if n not in by_number]
    selfish = [f"{r.number} names itself" for r in rows if r.number in r.amends + r.amended_by]
    assert not unknown + selfish, "\n".join(unknown + selfish)
    # what each line should say, were both sides of every amendment written
    amends = {r.number: set(r.amends) for r in rows}
    amended_by = {r.number: set(r.amended_by) for r in rows}
    for r in rows:
        for n in r.amends:
            amended_by[n].add(r.number)
        for n in r.amended_by:
            amends[n].add(r.number)
    fixes = [Row(r.number, r.title, r.file, r.status, tuple(amends[r.number]),
                 tuple(amended_by[r.number])).line()
             for r in rows if (set(r.amends), set(r.amended_by)) != (amends[r.number],
                                                                     amended_by[r.number])]
    assert not fixes, ("an amendment is said on one side only (the later record's 'amends', the "
                       "earlier one's 'amended by'); write:\n" + "\n".join(fixes))


def test_a_new_records_line_is_read_from_its_text(tmp_path):
    """The line the failure message offers, for a record that states its status and amendments
    in its status line as 0222 and 0303 do."""
    record = tmp_path / "0399-a-later-floor.md"
    record.write_text("# 0399 — A later floor\n\n**Status**: accepted, 2027-01-01. Amends "
                      "decision 0222, and adds to decisions 0220, 0268 and 0303.\n\nText.\n",
                      encoding="utf-8")
    assert _expected(record).line() == ("| 0399 | [A later floor](0399-a-later-floor.md) | "
                                        "accepted | 0220, 0222, 0268, 0303 | — |")
    bare = tmp_path / "0398-plain.md"
    bare.write_text("# 0398 — Plain\n\n**Question.** Why?\n", encoding="utf-8")
    assert _expected(bare).line() == "| 0398 | [Plain](0398-plain.md) | accepted | — | — |"


def test_the_index_says_what_the_records_say():
    """The amendments the records state in their own words are on the index (a record's own
    status line is the source; the index may hold more, read from the rest of its text)."""
    rows, _ = _index()
    by_number = {r.number: r for r in rows}
    records = _records()
    missing = []
    for number, path in records.items():
        row = by_number.get(number)
        if row is None:
            continue  # reported by test_every_record_is_listed
        for n in _expected(path).amends:
            if n not in row.amends:
                fixed = Row(number, row.title, row.file, row.status, row.amends + (n,),
                            row.amended_by)
                missing.append(f"{path.name}'s status line says it amends {n}; write:\n"
                               f"{fixed.line()}")
    assert not missing, "\n".join(missing)
