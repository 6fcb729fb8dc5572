"""Every link between the README and the pages of docs/ lands: the file exists, and an anchor
(``docs/jobs.md#synods``) names a heading of that page. The README's list of ideas is links and
nothing else; a page renamed or a heading reworded must not leave it pointing nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```$", re.M | re.S)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_links_land(doc):
    text = FENCE.sub("", doc.read_text(encoding="utf-8"))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # http:, mailto: …
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading of {dest.name} has the anchor #{anchor}")
    assert not broken, f"{doc.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_readme_lists_the_ideas_with_their_pages():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    ideas = text.split("## The ideas, one line each", 1)[1].split("\n## ", 1)[0]
    linked = re.findall(r"^- \*\*\[([^\]]+)\]\(([^)]+)\)\*\*", ideas, re.M)
    names = {name.lower() for name, _ in linked}
    assert {"context and eviction", "the door", "mnemon children", "mark-and-sweep", "synods",
            "jobs", "policies and approvals", "roles", "typed answers", "traces"} <= names
    assert "docs/img/page.png" in text and (ROOT / "docs" / "img" / "page.png").stat().st_size \
        < 250_000
