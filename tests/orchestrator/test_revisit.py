"""The revisit through the live loop (decision 0303): a cut whose kept material would be carried
over a long, slow tail is cut again, within its bounds, and the session costs less for it."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mnemon.orchestrator import weighing
from mnemon.orchestrator.replay import replay
from mnemon.session.revisit import REVISIT_MARGIN, REVISIT_MIN_REQUESTS

from tests.helpers import harness_events
from .test_replay import _sized_traj


def _cuts(events: list[dict]) -> list[dict]:
    return [e for e in events if e["event"] in ("harness eviction", "harness revisit")]


def test_a_long_slow_tail_after_a_cut_is_revisited(tmp_path, monkeypatch):
    """Twenty 2 500-token reads fill a 64k window's line; the cut keeps the newest few, then 150
    small reads grow the context 100 tokens a request: the line is 400 requests away. Twenty-odd
    requests on, the revisit takes what the cut kept (the newer reads now hold the floor), and
    the session costs a fifth less than carrying it — which is what the plan did before."""
    traj = _sized_traj([10_000] * 20 + [400] * 150)
    with harness_events() as events:
        res = replay(traj, tmp_path / "on", "evict", window=64_000)
    cuts = _cuts(events)
    assert [c["event"] for c in cuts] == ["harness eviction", "harness revisit"]
    first, again = cuts
    # it takes what the first cut kept and nothing newer, and keeps the floor
    assert first["span"][1] < again["span"][1] <= again["last_cut_reach"]
    assert again["since_cut"] >= REVISIT_MIN_REQUESTS and again["verbatim"] >= again["floor"]
    assert res.summary()["recoverability"] == 1.0
    monkeypatch.setattr(weighing, "revisit", lambda env, node, used: False)
    without = replay(traj, tmp_path / "off", "evict", window=64_000)
    assert without.summary()["edits"] == 1
    assert res.cost_usd < 0.85 * without.cost_usd


def test_a_short_session_after_the_cut_is_not_revisited(tmp_path):
    """The same cut early in a short session (ten requests before it): the tail is expected
    short, and carrying what the cut kept to the end is cheaper than cutting again."""
    traj = _sized_traj([40_000] * 5 + [400] * 30)
    with harness_events() as events:
        replay(traj, tmp_path / "r", "evict", window=64_000)
    assert [c["event"] for c in _cuts(events)] == ["harness eviction"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(burst=st.lists(st.one_of(st.integers(2_000, 12_000), st.integers(20_000, 120_000)),
                      min_size=3, max_size=80),
       tail=st.lists(st.integers(100, 1_500), min_size=0, max_size=150),
       window=st.sampled_from([32_000, 64_000]))
@example(burst=[10_000] * 20, tail=[400] * 150, window=64_000)  # revisits (the test above)
@example(burst=[8_000] * 21, tail=[900] * 116, window=64_000)  # four, one after another
def test_revisits_keep_their_bounds_on_generated_sessions(tmp_path_factory, burst, tail, window):
    """Over generated sessions (bursts of large reads, then tails of small ones): a revisit comes
    no sooner than REVISIT_MIN_REQUESTS after any cut, takes nothing newer than the last cut,
    keeps the verbatim floor, is weighed to pay by the margin, and everything stays readable."""
    with harness_events() as events:
        res = replay(_sized_traj(burst + tail), tmp_path_factory.mktemp("revisit") / "r",
                     "evict", window=window)
    cuts = _cuts(events)
    for prev, c in zip(cuts, cuts[1:]):
        if c["event"] != "harness revisit":
            continue
        assert c["turn"] - prev["turn"] >= REVISIT_MIN_REQUESTS, (prev, c)
        assert c["span"][1] <= c["last_cut_reach"], c
        assert c["verbatim"] >= c["floor"], c
        assert c["gain"] > REVISIT_MARGIN * c["cost"] - 1, c  # figures logged rounded
    assert cuts[:1] == [] or cuts[0]["event"] == "harness eviction"  # a revisit follows a cut
    assert res.summary()["recoverability"] == 1.0
