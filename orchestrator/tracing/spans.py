"""Spans as plain values: what the builder makes, what ``otlp`` encodes and ``live`` hands to
the OpenTelemetry SDK. Ids are lowercase hex (32 digits for a trace, 16 for a span); times are
nanoseconds since the Unix epoch; attribute values are str, int, float, bool or a list of str."""

from __future__ import annotations

import calendar
from typing import Any

Attributes = dict[str, Any]


class Event:
    __slots__ = ("name", "time_ns", "attributes")

    def __init__(self, name: str, time_ns: int, attributes: Attributes):
        self.name = name
        self.time_ns = time_ns
        self.attributes = attributes


class Link:
    __slots__ = ("trace_id", "span_id", "attributes")

    def __init__(self, trace_id: str, span_id: str, attributes: Attributes):
        self.trace_id = trace_id
        self.span_id = span_id
        self.attributes = attributes


class Span:
    """One span; ``status`` is 0 unset, 1 ok, 2 error (OTLP's numbers), ``kind`` 1 internal,
    3 client."""

    __slots__ = ("trace_id", "span_id", "parent_id", "name", "kind", "start_ns", "end_ns",
                 "attributes", "events", "links", "status", "status_message", "static")

    def __init__(self, trace_id: str, span_id: str, parent_id: str | None, name: str, kind: int,
                 start_ns: int, attributes: Attributes):
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_id = parent_id
        self.name = name
        self.kind = kind
        self.start_ns = start_ns
        self.end_ns = start_ns
        self.attributes = attributes
        self.events: list[Event] = []
        self.links: list[Link] = []
        self.status = 0
        self.status_message = ""
        #: the first attributes, as ``(key, value)`` pairs shared by many spans (an agent's
        #: chat spans, its calls of one tool) and never changed: encoded once (``protobuf``)
        self.static: tuple[tuple[str, Any], ...] | None = None

    def fail(self, error_type: str, message: str = "") -> None:
        self.status = 2
        self.status_message = message
        self.attributes["error.type"] = error_type

    def __repr__(self) -> str:
        return (f"Span({self.name!r}, {self.span_id}, parent={self.parent_id}, "
                f"{len(self.attributes)} attributes)")


_seconds: dict[str, int] = {}


def time_ns(at: str | None) -> int | None:
    """Nanoseconds of a record's ``at`` (``2026-12-02T01:00:00.000123Z``, as ``now_iso``
    writes it; an offset or fewer digits are read too); None when absent or unreadable."""
    if not at or len(at) < 19:
        return None
    if len(at) == 27 and at[26] == "Z" and at[19] == "." and at[20:26].isdecimal():
        sec = _seconds.get(at[:19])  # as ``now_iso`` writes it: its second read once
        if sec is not None:
            return sec * 1_000_000_000 + int(at[20:26]) * 1000
    head = at[:19]
    sec = _seconds.get(head)
    if sec is None:
        try:
            sec = calendar.timegm((int(at[0:4]), int(at[5:7]), int(at[8:10]), int(at[11:13]),
                                   int(at[14:16]), int(at[17:19]), 0, 0, 0))
        except ValueError:
            return None
        if len(_seconds) > 4096:
            _seconds.clear()
        _seconds[head] = sec
    rest = at[19:]
    frac = 0
    if rest.startswith("."):
        digits = ""
        for ch in rest[1:]:
            if not ch.isdecimal():
                break
            digits += ch
        frac = int((digits + "000000000")[:9]) if digits else 0
        rest = rest[1 + len(digits):]
    if rest and rest not in ("Z", "+00:00"):
        sign = 1 if rest[0] == "+" else -1
        try:
            hh, mm = int(rest[1:3]), int(rest[4:6])
        except ValueError:
            return None
        sec -= sign * (hh * 3600 + mm * 60)
    return sec * 1_000_000_000 + frac
