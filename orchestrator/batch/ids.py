"""A batched request's ``custom_id``: the run, the agent, the turn and the attempt (pure).

Both providers take 1–64 characters of ``[A-Za-z0-9_-]``. An agent id may hold ``.`` and ``_``;
``_`` is written ``_u`` and ``.`` ``_d``, so the name stays readable and two agents never share
one (an id too long for 64 characters is replaced by a hash of it). The engine never parses a
custom id back: the run root's ledger maps each to its agent, turn and attempt.
"""

from __future__ import annotations

import re

from blake3 import blake3

__all__ = ["custom_id", "run_tag", "create_marker", "CUSTOM_ID"]

CUSTOM_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def run_tag(created_at: str) -> str:
    """Eight hex digits naming the run: from its ``run.json`` creation time, so a moved run
    root keeps its tag and two runs almost never share one."""
    return blake3(created_at.encode()).hexdigest()[:8]


def custom_id(run: str, agent: str, turn: int, attempt: int) -> str:
    """``<run>-<agent>-<turn>-<attempt>``, e.g. ``3f9a0c1e-t12_ds2-5-1``."""
    enc = agent.replace("_", "_u").replace(".", "_d")
    out = f"{run}-{enc}-{turn}-{attempt}"
    if len(out) > 64:
        out = f"{run}-h{blake3(agent.encode()).hexdigest()[:16]}-{turn}-{attempt}"
    assert CUSTOM_ID.match(out), out
    return out


def create_marker(run: str, wave: int, nonce: str) -> str:
    """``mn-<run>-w<wave>-<nonce>``: the name of one batch create, recorded before it is sent
    and matched against the provider's listing when its answer is lost (decision 0313). The
    nonce (random hex) keeps two creates of one wave, or of a wave a re-run numbers again, apart."""
    out = f"mn-{run}-w{wave}-{nonce}"
    assert CUSTOM_ID.match(out), out
    return out
