"""Installing a link is not quadratic in nested residues (a long-lived parent's harness cuts all
start at turn 1 and nest)."""

from __future__ import annotations

import gc
import time

from mnemon.session.context import Context
from mnemon.session.records import Inherited, Linked, Pointer, Residue, Row, SessionStarted


def test_thousands_of_nested_residues_install_quickly():
    rows, residues = [], []
    n = 20_000
    for i in range(1, n + 1):
        held = "evicted" if i <= n - 10 else "withdrawn"
        role = "user" if i % 7 == 0 else "assistant"
        rows.append(Linked(row=Row(id=i, role=role, label=f"t{i}", bytes=100, held=held),
                           at=Pointer("agents/p/record.jsonl", [(i * 200, 100, "0" * 16)])))
    for k in range(1, 4001):  # nested prefix cuts [1, 5k]
        residues.append(Residue(span=(1, 5 * k), note=None, by="harness"))
    ctx = Context("agents/c/record.jsonl")
    ctx.step(SessionStarted(agent="c", parent="p", kind="mnemon"))
    gc.collect()
    gc.freeze()  # time the install, not the cyclic GC walking what earlier tests left behind
    try:
        t0 = time.perf_counter()
        ctx.step(Inherited(turns=rows, residues=residues, id_floor=n + 1))
        took = time.perf_counter() - t0
    finally:
        gc.unfreeze()
    # quadratic installs take minutes here; the bound leaves room for a loaded 2-core machine
    assert took < 8.0, f"install took {took:.1f} s"
    outer = [r for r in ctx.residues if r.outer]
    assert [r.span for r in outer] == [(1, 20_000)]
    assert ctx.residues[0].weight == 500
    assert ctx.residues[0].labels == () and ctx.residues[6].labels == ("t35", "t28", "t21")
    assert ctx.turn(3).residue == (1, 20_000)
    assert [type(x).__name__ for x in ctx.frontier()] == ["ResidueEntry"]
