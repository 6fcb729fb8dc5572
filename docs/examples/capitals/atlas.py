"""The example job's tool and the policy that plays the model (scripted provider, offline).

``lookup`` is a user tool (``[agent] tools``); ``policy`` plays the model the way a model would,
from what it is sent: asked about a country, it looks the capital up, then answers; asked as a
synod child, it answers from the context it inherited, each stance its own way.
"""

from __future__ import annotations

import json
import re
from typing import Literal

import msgspec

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi", "Peru": "Lima",
            "New Zealand": "Wellington"}


def lookup(country: str) -> str:
    """Look up a country's capital in the atlas."""
    return CAPITALS.get(country, "not in the atlas")


def _texts(message: dict) -> list[str]:
    return [b.get("text") or b.get("content") or "" for b in message.get("content") or ()]


def policy(request, state):
    last = request.messages[-1]
    said = " ".join(_texts(last))
    if "Your synod's children" in said:  # merge: the parent reads every child's answer
        answers = re.findall(r"\): (.+)", said)
        return [{"type": "text", "text": max(set(answers), key=answers.count)}], "end_turn"
    if request.meta.get("depth", 0) >= 1:  # a synod child: answer from the inherited context
        seen = " ".join(" ".join(_texts(m)) for m in request.messages)
        capital = next((c for c in CAPITALS.values() if c in seen), "unknown")
        if "contrarian" in said:
            return [{"type": "text", "text": f"Not {capital}, surely?"}], "end_turn"
        return [{"type": "text", "text": f"{capital}."}], "end_turn"
    results = [b for b in last.get("content") or () if b.get("type") == "tool_result"]
    if results:
        return [{"type": "text", "text": f"{results[0]['content']}"}], "end_turn"
    country = re.search(r"capital of ([A-Z][\w ]+?)\?", said)
    return [{"type": "tool_use", "id": "look_1", "name": "lookup",
             "input": {"country": country.group(1) if country else said}}], "tool_use"


# ---------------------------------------------------------------- the typed variant
# (capitals-typed.toml): the same model, asked for answers of the output type Capital

CONTINENTS = {"France": "Europe", "Japan": "Asia", "Kenya": "Africa", "Peru": "South America",
              "New Zealand": "Oceania"}
COASTAL = {"Paris": False, "Tokyo": True, "Nairobi": False, "Lima": True, "Wellington": True}


class Capital(msgspec.Struct):
    """The output type of capital.schema.json, as a msgspec Struct (``output = "atlas:Capital"``
    names it from a job file)."""

    country: str
    capital: str
    continent: Literal["Africa", "Asia", "Europe", "Oceania", "South America"]
    coastal: bool | None = None
    sources: list[str] = []


def typed_policy(request, state):
    """As ``policy``, but a typed request (``request.output``) is answered with one JSON
    object of its type; the first answer of each task forgets a field, as models do, and is
    sent back once with the problem (a retry, recorded like any turn)."""
    if request.output is None:
        return policy(request, state)
    last = request.messages[-1]
    said = " ".join(_texts(last))
    seen = " ".join(" ".join(_texts(m)) for m in request.messages)
    country = next((c for c in CAPITALS if c in seen), "unknown")
    if request.meta.get("depth", 0) == 0 and not any(
            b.get("type") == "tool_result" for m in request.messages
            for b in m.get("content") or ()):
        return [{"type": "tool_use", "id": "look_1", "name": "lookup",
                 "input": {"country": country}}], "tool_use"
    capital = CAPITALS.get(country, "unknown")
    if "contrarian" in said:
        capital = "Not " + capital
    answer = {"country": country, "capital": capital, "continent": CONTINENTS.get(country),
              "coastal": COASTAL.get(capital), "sources": ["atlas"]}
    if request.meta.get("depth", 0) == 0 and not state.get("retried"):
        state["retried"] = True  # the first answer misses a required field
        del answer["continent"]
    return [{"type": "text", "text": json.dumps(answer)}], "end_turn"
