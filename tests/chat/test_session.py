"""The chat's logic without a terminal: prompts after an end reopen the log, edits, forks in the
session's nursery, a cancelled turn, and the slash-command parser."""

from __future__ import annotations

import pytest
import trio

from mnemon import ScriptedProvider, Settings, open_supervisor
from mnemon.orchestrator.chat.commands import ChatInputError, SlashCommand, parse_line
from mnemon.orchestrator.chat.session import ChatSession
from mnemon.session.errors import Refusal
from mnemon.session.log import iter_lines
from mnemon.session.records import Text, ToolUse, decode


def kinds(root, agent="a1") -> list[str]:
    return [type(decode(line)).__name__
            for _, line in iter_lines(root / "agents" / agent / "record.jsonl")]


async def test_prompts_edits_and_a_fork(tmp_path):
    root = tmp_path / "run"
    with trio.fail_after(60):
        async with open_supervisor(root, ScriptedProvider(), Settings()) as sup:
            async with trio.open_nursery() as forks:
                chat = ChatSession(sup, forks)
                with pytest.raises(Refusal):
                    chat.rewind(1)
                node = await chat.send("first")
                assert node.reason == "done" and "first" in node.answer
                ended: list[str] = []
                child = chat.fork("look back", lambda c: ended.append(c.answer))
                await child.done.wait()
                await trio.testing.wait_all_tasks_blocked()
                assert ended == ["(scripted) You said: look back"]
                node = await chat.send("second")
                assert "second" in node.answer
                assert (await chat.grep("first"))["total"] >= 1
                chat.rewind(2)
                with pytest.raises(Refusal):
                    chat.rewind(99)
                chat.clear()
                assert chat.survey()["frontier"] == []
                node = await chat.send("third")
                assert node.reason == "done"
                assert [r["agent"] for r in chat.cost()] == ["a1", "a2"]
    assert kinds(root) == [
        "SessionStarted", "UserPrompt", "TurnStarted", "ProviderCall", "AssistantMessage",
        "SessionEnded", "SessionResumed", "UserPrompt", "TurnStarted", "ProviderCall",
        "AssistantMessage", "SessionEnded", "Rewound", "Cleared", "SessionResumed", "UserPrompt",
        "TurnStarted", "ProviderCall", "AssistantMessage", "SessionEnded"]


async def test_cancel_turn_ends_the_turn_not_the_session(tmp_path):
    root = tmp_path / "run"
    with trio.fail_after(60):
        async with open_supervisor(root, ScriptedProvider(latency_s=30), Settings()) as sup:
            async with trio.open_nursery() as forks:
                chat = ChatSession(sup, forks)
                assert not chat.cancel_turn()  # nothing in flight
                async with trio.open_nursery() as n:
                    n.start_soon(chat.send, "slow")
                    await trio.testing.wait_all_tasks_blocked()
                    assert chat.cancel_turn()
                assert chat.node.reason == "cancelled"
                sup.provider.latency_s = 0
                node = await chat.send("again")
                assert node.reason == "done"
    assert kinds(root).count("SessionEnded") == 2


@pytest.mark.parametrize("line, expected", [
    ("", None),
    ("hello /there", SlashCommand("prompt", text="hello /there")),
    ("//etc/hosts is a path", SlashCommand("prompt", text="/etc/hosts is a path")),
    ("/quit", SlashCommand("quit")),
    ("/rewind 12", SlashCommand("rewind", ("12",))),
    ("/fork check the totals again", SlashCommand("fork", text="check the totals again")),
    ("/transcript grep 'VESPER-[0-9]' 1-9", SlashCommand("transcript", ("grep", "VESPER-[0-9]",
                                                                        "1-9"))),
    ("/transcript read 3,5-9", SlashCommand("transcript", ("read", "3,5-9"))),
    ("/context", SlashCommand("context")),
])
def test_parse_line(line, expected):
    assert parse_line(line) == expected


@pytest.mark.parametrize("line", ["/rewind", "/rewind x", "/fork", "/transcript", "/cost 3",
                                  "/transcript grep", "/bogus"])
def test_parse_line_refuses(line):
    with pytest.raises(ChatInputError):
        parse_line(line)


@pytest.mark.parametrize("line, expected", [
    ("/steer a2 look in the other file", SlashCommand("steer", ("a2",), "look in the other file")),
    ("/steer a12   two  spaces kept ", SlashCommand("steer", ("a12",), "two  spaces kept")),
])
def test_parse_steer(line, expected):
    assert parse_line(line) == expected


@pytest.mark.parametrize("line", ["/steer", "/steer a2", "/steer a2   ", "/steer a\x1b[2J hi"])
def test_parse_steer_refuses(line):
    with pytest.raises(ChatInputError):
        parse_line(line)


async def test_steer_reaches_a_running_forks_next_request_and_an_ended_one_is_refused(tmp_path):
    root = tmp_path / "run"
    go = trio.Event()
    seen: list[str] = []

    async def policy(request, state):
        i = state["i"] = state.get("i", 0) + 1
        if request.meta["agent"] == "a1":
            return [Text("root here")], "end_turn"
        seen.append(repr(request.messages))
        if i == 1:
            await go.wait()
            return [ToolUse("t1", "context_survey", {})], "tool_use"
        return [Text("fork done")], "end_turn"

    with trio.fail_after(60):
        async with open_supervisor(root, ScriptedProvider(policy=policy), Settings()) as sup:
            async with trio.open_nursery() as forks:
                chat = ChatSession(sup, forks)
                await chat.send("first")
                with pytest.raises(Refusal, match="a1 has ended"):
                    chat.steer("a1", "too late")
                with pytest.raises(Refusal, match="no agent 'a9'"):
                    chat.steer("a9", "nobody")
                child = chat.fork("look aside", lambda c: None)
                while not seen:
                    await trio.sleep(0.01)
                out = chat.steer(child.id, "look at SOUTH-3 instead")
                assert out["agent"] == child.id and out["messages"] == 1
                go.set()
                await child.done.wait()
    assert "SOUTH-3" not in seen[0] and "[message from a person] look at SOUTH-3" in seen[1]
    steering = [decode(line) for _, line in iter_lines(root / "agents" / "a2" / "record.jsonl")]
    assert [(r.by, r.text) for r in steering if type(r).__name__ == "Steering"] == [
        ("user", "[message from a person] look at SOUTH-3 instead")]
    assert "Steering" not in kinds(root)
