"""The cache model: prefix reads, invalidation, TTL, the 20-block lookback, the minimum
prefix, sharing between agents, and where breakpoints go."""

from __future__ import annotations

from mnemon.providers.base import Request
from mnemon.providers.cache import CacheModel, flatten, place_breakpoints, previous_request_len
from mnemon.session.records import Usage
from tests.providers.conformance import WEATHER

BIG = "x" * 8000  # 8000 bytes ≈ 2000 tokens at 1 token / 4 bytes


def u(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def a(text: str) -> dict:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def conversation(turns: int, *, edit: int | None = None) -> list[dict]:
    msgs = [u("task: " + BIG)]
    for k in range(turns):
        msgs.append(a(f"step {k} " + "y" * 400 + ("!" if edit == k else "")))
        msgs.append(u(f"result {k} " + "z" * 400))
    return msgs


def total(model: CacheModel, req: Request) -> int:
    return model.tokens(sum(b.bytes for b in flatten(req)))


def consistent(usage: Usage, model: CacheModel, req: Request) -> None:
    assert usage.total_input == total(model, req)


class TestCacheModel:
    def test_first_request_writes_repeat_reads(self):
        cm = CacheModel()
        req = Request(system="sys " + BIG, messages=[u("hello " + BIG)], tools=[WEATHER])
        first = cm.usage_for(req, 10, now=0.0)
        assert first.cache_read_tokens == 0
        assert first.input_tokens == 0  # the last block is a breakpoint: all of it is written
        assert first.cache_write_tokens == total(cm, req)
        second = cm.usage_for(req, 10, now=1.0)
        assert second == Usage(input_tokens=0, output_tokens=10,
                               cache_read_tokens=total(cm, req), cache_write_tokens=0)

    def test_growing_conversation_reads_previous_request(self):
        cm = CacheModel()
        r1 = Request(system="sys", messages=conversation(3))
        r2 = Request(system="sys", messages=conversation(4))
        u1 = cm.usage_for(r1, 1, now=0.0)
        u2 = cm.usage_for(r2, 1, now=10.0)
        consistent(u1, cm, r1)
        consistent(u2, cm, r2)
        assert u2.cache_read_tokens == total(cm, r1)
        assert u2.cache_write_tokens == total(cm, r2) - total(cm, r1)

    def test_edit_in_the_middle_invalidates_the_suffix(self):
        cm = CacheModel(min_prefix_tokens=100)
        before = Request(system="sys " + BIG, messages=conversation(4))
        cm.usage_for(before, 1, now=0.0)
        edited = Request(system="sys " + BIG, messages=conversation(4, edit=1))
        after = cm.usage_for(edited, 1, now=1.0)
        consistent(after, cm, edited)
        system_only = cm.tokens(flatten(edited)[0].bytes)
        assert after.cache_read_tokens == system_only  # only the prefix before the edit
        assert after.cache_write_tokens == total(cm, edited) - system_only

    def test_ttl_expiry_and_refresh_on_read(self):
        cm = CacheModel(ttl="5m")
        req = Request(system="sys " + BIG, messages=[u("q")])
        cm.usage_for(req, 1, now=0.0)
        assert cm.usage_for(req, 1, now=299.0).cache_read_tokens > 0  # refreshed: lives to 599
        assert cm.usage_for(req, 1, now=598.0).cache_read_tokens > 0
        expired = cm.usage_for(req, 1, now=598.0 + 301.0)
        assert expired.cache_read_tokens == 0 and expired.cache_write_tokens == total(cm, req)

    def test_one_hour_ttl(self):
        cm = CacheModel(ttl="1h")
        req = Request(system="sys " + BIG, messages=[u("q")])
        cm.usage_for(req, 1, now=0.0)
        assert cm.usage_for(req, 1, now=3000.0).cache_read_tokens > 0
        assert cm.usage_for(req, 1, now=3000.0 + 3601.0).cache_read_tokens == 0

    def test_lookback_limit_of_20_blocks(self):
        """A breakpoint finds an entry at most 20 blocks back; further back it misses."""
        cm = CacheModel(min_prefix_tokens=0)
        base = [u(BIG)] + [u(f"m{k}") for k in range(30)]
        entry = Request(system=None, messages=base[:5], breakpoints=[4])
        cm.usage_for(entry, 1, now=0.0)
        near = Request(system=None, messages=base[:25], breakpoints=[24])  # 20 blocks on
        assert cm.usage_for(near, 1, now=1.0).cache_read_tokens == total(cm, entry)
        cm2 = CacheModel(min_prefix_tokens=0)
        cm2.usage_for(entry, 1, now=0.0)
        far = Request(system=None, messages=base[:26], breakpoints=[25])  # 21 blocks on
        assert cm2.usage_for(far, 1, now=1.0).cache_read_tokens == 0

    def test_minimum_prefix(self):
        cm = CacheModel()  # 1024 tokens
        small = Request(system="short", messages=[u("hi")])
        for t in (0.0, 1.0):
            usage = cm.usage_for(small, 1, now=t)
            assert usage.cache_read_tokens == usage.cache_write_tokens == 0
            assert usage.input_tokens == total(cm, small)
        assert cm.entries == {}

    def test_shared_between_two_agents(self):
        cm = CacheModel()
        parent = Request(system="sys " + BIG, messages=[u("task " + BIG)], meta={"agent": "a1"})
        cm.usage_for(parent, 1, now=0.0)
        child = Request(system="sys " + BIG, messages=[u("task " + BIG), a("ok"), u("child")],
                        meta={"agent": "a2"})
        usage = cm.usage_for(child, 1, now=5.0)
        assert usage.cache_read_tokens == total(cm, parent)

    def test_models_do_not_share(self):
        cm = CacheModel()
        req = Request(system="sys " + BIG, messages=[u("q")])
        cm.usage_for(req, 1, now=0.0, model="claude-opus-4-6")
        assert cm.usage_for(req, 1, now=1.0, model="claude-haiku-4-5").cache_read_tokens == 0

    def test_tokens_per_byte(self):
        cm = CacheModel(tokens_per_byte=0.5, min_prefix_tokens=0)
        req = Request(system=None, messages=[u("abcd")])
        assert cm.usage_for(req, 0, now=0).total_input == cm.tokens(flatten(req)[0].bytes)
        assert cm.tokens(10) == 5


class TestBreakpoints:
    def test_places(self):
        req = Request(system="sys", tools=[WEATHER], messages=conversation(3))
        blocks = flatten(req)
        prev = previous_request_len(req, blocks)
        assert prev == len(blocks) - 2
        assert place_breakpoints(blocks, prev) == [1, prev - 1, len(blocks) - 1]

    def test_long_suffix_gets_an_intermediate(self):
        req = Request(system="sys", messages=[u(f"m{k}") for k in range(40)])
        blocks = flatten(req)
        points = place_breakpoints(blocks, 5)
        assert points == [0, 4, 24, 40]
        assert all(b - a <= 20 for a, b in zip(points[1:], points[2:]))
        assert len(points) <= 4

    def test_at_most_four_and_first_request(self):
        req = Request(system=None, messages=[u(f"m{k}") for k in range(100)])
        points = place_breakpoints(flatten(req), 0)
        assert len(points) == 4 and points[-1] == 99
        assert place_breakpoints([], 0) == []

    def test_replaced_after_an_eviction(self):
        """After an eviction shortens the context, the places are recomputed from the new
        blocks: the previous request's end is found again within reach."""
        cm = CacheModel(min_prefix_tokens=0)
        long = Request(system="sys", messages=[u(f"m{k} " + "w" * 100) for k in range(60)])
        cm.usage_for(long, 1, now=0.0)
        evicted = Request(system="sys", messages=[u("[evicted 1-40]")] + long.messages[41:])
        grown = Request(system="sys", messages=evicted.messages + [a("ok"), u("next")])
        cm.usage_for(evicted, 1, now=1.0)
        usage = cm.usage_for(grown, 1, now=2.0)
        assert usage.cache_read_tokens == total(cm, evicted)


def test_the_memoised_head_gives_the_same_blocks():
    """``CacheModel`` memoises the tools and system blocks; the blocks are the same either way,
    for every combination of tools, system and model it has seen."""
    from mnemon.providers.base import Request, ToolDef
    from mnemon.providers.cache import flatten

    tools_a = [ToolDef("a", "first", {"type": "object"})]
    tools_b = tools_a + [ToolDef("b", "second", {"type": "object"})]
    msgs = [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
    heads: dict = {}
    for tools in (tools_a, tools_b, tools_a, []):
        for system in ("one", "two", None):
            for model in ("m1", "m2"):
                req = Request(system=system, messages=msgs, tools=tools, max_tokens=10,
                              model=model, meta={})
                assert flatten(req, heads=heads) == flatten(req)
                copy = Request(system=system, messages=msgs, tools=list(tools),
                               max_tokens=10, model=model, meta={})
                assert flatten(copy, heads=heads) == flatten(req)  # an equal list, by bytes
    keys = [k for k in heads if isinstance(k[1], bytes)]
    assert len(keys) == 3 * 3 * 2, "one head per (model, tools, system) seen, by its bytes"


# --------------------------------------------------------------------------- the block memo

from hypothesis import HealthCheck, given, settings  # noqa: E402

from tests.strategies import fresh_log, sessions  # noqa: E402


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(records=sessions())
def test_the_block_memo_gives_what_hashing_every_block_gives(tmp_path, records):
    """A model's memo (blocks hashed after the same prefix, looked up by identity) never
    changes a flattened request or a usage: requests rendered after every record of random
    sessions — appends, evictions, sweeps, clears — through one model with its memo and one
    whose memo is emptied before each request."""
    from mnemon.session.render import render

    log = fresh_log(tmp_path, records[0])
    warm, cold = CacheModel(min_prefix_tokens=1), CacheModel(min_prefix_tokens=1)
    for i, r in enumerate(records[1:]):
        log.append(r)
        req = Request(system="You help.", messages=render(log.ctx), tools=[WEATHER])
        memo: dict = {}
        assert flatten(req, memo=memo) == flatten(req)
        assert flatten(req, memo=memo) == flatten(req)  # the second time from the memo
        cold._blocks.clear()
        assert warm.usage_for(req, 10, float(i)) == cold.usage_for(req, 10, float(i))
    log.close()


def test_a_changed_block_object_is_hashed_again():
    blk = {"type": "text", "text": "one"}
    req = Request(system=None, messages=[{"role": "user", "content": [blk]}])
    memo: dict = {}
    first = flatten(req, memo=memo)
    other = {"type": "text", "text": "two"}
    second = flatten(Request(system=None, messages=[{"role": "user", "content": [other]}]),
                     memo=memo)
    assert first[-1].prefix_hash != second[-1].prefix_hash
    assert flatten(req, memo=memo) == first


def test_a_remembered_block_after_an_empty_message_takes_its_new_index():
    """An empty message moves the index of the blocks after it, not their prefix hash (no
    block of it is hashed): a block remembered at one index and met again at another is
    flattened with the index it has now — the memo's FlatBlock is taken only where it was
    made."""
    blk = {"type": "text", "text": "hello"}
    memo: dict = {}
    first = Request(system=None, messages=[{"role": "user", "content": [blk]}])
    moved = Request(system=None, messages=[{"role": "user", "content": []},
                                           {"role": "user", "content": [blk]}])
    assert flatten(first, memo=memo) == flatten(first)
    again = flatten(moved, memo=memo)
    assert again == flatten(moved) and again[-1].message == 1
    assert again[-1].prefix_hash == flatten(first)[-1].prefix_hash  # the same prefix, by design
    assert flatten(first, memo=memo)[-1].message == 0
    # and a block met again where it was made is the remembered FlatBlock itself
    assert flatten(first, memo=memo)[-1] is flatten(first, memo=memo)[-1]
