"""The example job's tool and the policy that plays the model (scripted provider, offline).

``lookup`` is a user tool (``[agent] tools``); ``policy`` plays the model the way a model would,
from what it is sent: asked about a country, it looks the capital up, then answers; asked as a
synod child, it answers from the context it inherited, each stance its own way.
"""

from __future__ import annotations

import re

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
