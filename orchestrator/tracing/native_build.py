"""The trace builder of a live run in C (``native/otlp_build.c``, in the ``_otlp`` extension):
``build.TraceBuilder``'s mapping for what a live run sends without message content, writing
each finished span as OTLP protobuf bytes. ``tap.LiveTracer`` feeds it on the agent's own path
as each record is appended; ``mnemon trace``, ``--trace-content`` and an SDK sink keep the
Python builder, which stays the reference: the tests feed generated logs to both and compare
every span's bytes.

What the C builder asks of Python is here (``Hooks``): the span ids (``ids``), a call's price
(``providers.prices``, each model's price found once), the cut of a text a model or a person
chose to its class (an end reason, a call's error, a tool's name: ``build.ended``,
``call_error``, ``tool_name``), the attributes of the events on an agent's span (``build``'s
functions), a record time in another format than the log's own, and the number of each kind
of record.
"""

from __future__ import annotations

import os
from typing import Any

from ...providers.prices import Price, cost_at, price_for
from ...session.records import (ApprovalDecided, ApprovalRequested, Evicted, Marked, Rewound,
                                Swept, ToolUse)
from . import build, ids
from . import semconv as sc
from .spans import time_ns

try:
    from ._otlp import Builder as _CBuilder
except ImportError:  # not built here (no C compiler where it was installed), or an older build
    _CBuilder = None

#: the C builder is built and not turned off (``MNEMON_NO_NATIVE=1``)
AVAILABLE: bool = _CBuilder is not None and os.environ.get("MNEMON_NO_NATIVE") != "1"

#: what the C builder reads of a record's type (``kind_of``): a record with ``at``
HAS_AT = 0x100


class Hooks:
    """What one C builder calls back into Python for; one per builder (its prices)."""

    trace_id = staticmethod(ids.trace_id)
    agent_span_id = staticmethod(ids.agent_span_id)
    agent_ids = ids.AgentIds
    time_ns = staticmethod(time_ns)
    provider_name = staticmethod(sc.provider_name)
    offered = staticmethod(build.offered)
    tool_use = ToolUse

    def __init__(self, content: bool = False):
        self._content = content
        self._prices: dict[str | None, Price] = {}

    def ended(self, reason: str) -> tuple[str, str | None]:
        """``(end_reason, error.type or None)`` of an agent's end (``build.ended``)."""
        return build.ended(reason, self._content)

    def call_error(self, error: str) -> tuple[str, str]:
        """``(error.type, status message)`` of a failed call (``build.call_error``)."""
        return build.call_error(error, self._content)

    def tool_name(self, name: Any, table: frozenset[str] | None) -> str:
        """A called tool's name as the trace shows it (``build.tool_name``); asked once per
        name and agent."""
        return build.tool_name(name, table, self._content)

    def synod(self, input: dict[str, Any]) -> dict[str, Any]:
        return build.synod_attrs(input, self._content)

    def cost(self, model: str | None, usage: Any) -> float:
        """``mnemon.cost_usd`` of a call, as the Python builder rounds it."""
        price = self._prices.get(model)
        if price is None:
            price = self._prices[model] = price_for(model)
        return round(cost_at(price, usage, "5m"), 9)

    @staticmethod
    def kind_of(kind: type) -> int:
        """The C builder's number for a record type (its nearest handled kind's, 0 for one the
        trace does not read), with ``HAS_AT`` when its records carry a time."""
        number = 0
        for base in kind.__mro__:
            if base in build.HANDLED:
                number = build.HANDLED.index(base) + 1
                break
        return number | (HAS_AT if hasattr(kind, "at") else 0)

    def event(self, number: int, record: Any, weight: int,
              table: frozenset[str] | None) -> dict[str, Any]:
        """The attributes of the event a record of kind ``number`` puts on the agent's span
        (``table``: the tool names its agent was offered, ``offered``)."""
        kind = build.HANDLED[number - 1]
        if kind is Evicted:
            return build.eviction_attrs(record, weight, self._content)
        if kind is Marked:
            return build.mark_attrs(record)
        if kind is Swept:
            return build.sweep_attrs(record)
        if kind is ApprovalRequested:
            return build.asked_attrs(record, table, self._content)
        if kind is ApprovalDecided:
            return build.decided_attrs(record, self._content)
        if kind is Rewound:
            return build.rewind_attrs(record)
        raise ValueError(f"no event for a record of kind {kind.__name__}")


def builder(run: str, *, latest_only: bool) -> Any:
    """A C builder of the run ``run`` (``ids.run_key``); raises RuntimeError where there is none
    (check ``AVAILABLE``)."""
    if not AVAILABLE:
        raise RuntimeError("the C trace builder is not built or is turned off")
    return _CBuilder(run, latest_only, Hooks())
