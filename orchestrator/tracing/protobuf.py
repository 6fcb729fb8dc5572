"""Spans as OTLP protobuf bytes (an ``ExportTraceServiceRequest``), written directly in the
protobuf wire format: no protobuf library, so ``mnemon trace --endpoint`` and live export speak
the encoding every OTLP/HTTP receiver takes (Phoenix takes no JSON) with the core install.

Pure. ``span_bytes`` and the framing of many spans run in C (``native/otlp.c``, the optional
``_otlp`` extension) when it is built and ``MNEMON_NO_NATIVE=1`` is not set: the same bytes
(the tests compare both on generated spans) at a fraction of the cost, since live tracing encodes
two spans per turn of every agent. The field numbers are those of ``opentelemetry/proto/trace/v1/trace.proto``,
``common/v1/common.proto``, ``resource/v1/resource.proto`` and
``collector/trace/v1/trace_service.proto``; the tests decode the bytes with
``opentelemetry-proto`` itself. Encoded attributes are remembered by key and value — most of a
span's attributes (operation, provider, model, agent, tool) repeat from span to span — so a
span costs a few microseconds.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Mapping
from itertools import islice
from typing import Any

from ..._about import __version__
from . import semconv as sc
from .spans import Span

_pack_d = struct.Struct("<d").pack
_pack_q = struct.Struct("<Q").pack


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [_varint(i) for i in range(1 << 14)]


def _len(n: int) -> bytes:
    return _SMALL[n] if n < 16384 else _varint(n)


def _ld(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field."""
    return tag + _len(len(payload)) + payload


def _tag(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


_LD = {f: _tag(f, 2) for f in range(1, 17)}
_VARINT = {f: _tag(f, 0) for f in range(1, 17)}
_FIXED64 = {f: _tag(f, 1) for f in range(1, 17)}


def _string(field: int, s: str) -> bytes:
    return _ld(_LD[field], s.encode("utf-8"))


def any_value(v: Any) -> bytes:
    """An ``AnyValue`` message."""
    if isinstance(v, bool):
        return _VARINT[2] + (b"\x01" if v else b"\x00")
    if isinstance(v, int):
        return _VARINT[3] + _varint(v)
    if isinstance(v, float):
        return _FIXED64[4] + _pack_d(v)
    if isinstance(v, (list, tuple)):
        return _ld(_LD[5], b"".join(_ld(_LD[1], any_value(x)) for x in v))
    return _string(1, str(v))


def key_value(key: str, v: Any) -> bytes:
    """A ``KeyValue`` message."""
    return _string(1, key) + _ld(_LD[2], any_value(v))


#: attribute fields as written, by (container field, key, type, value): strings and booleans,
#: which repeat from span to span; and each key's own field, for the numbers, which do not
_FRAMED: dict[tuple, bytes] = {}
#: values that never repeat: not remembered (they would only push out the ones that do)
_UNIQUE = frozenset({sc.TOOL_CALL_ID, sc.TOOL_ARGUMENTS, sc.TOOL_RESULT, sc.INPUT_MESSAGES,
                     sc.OUTPUT_MESSAGES, sc.SYSTEM_INSTRUCTIONS, "mnemon.residue.note"})
_KEYS: dict[str, bytes] = {}
_INT_TAG = _VARINT[3]
_DOUBLE_TAG = _FIXED64[4]
_VALUE_TAG = _LD[2]


def _attributes(field: int, attrs: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> bytes:
    tag = _LD[field]
    out = []
    for k, v in (attrs.items() if isinstance(attrs, Mapping) else attrs):
        t = type(v)
        if t is int or t is float:
            kp = _KEYS.get(k)
            if kp is None:
                kp = _KEYS[k] = _string(1, k)
            av = (_INT_TAG + (_SMALL[v] if 0 <= v < 16384 else _varint(v)) if t is int
                  else _DOUBLE_TAG + _pack_d(v))
            kv = kp + _VALUE_TAG + _SMALL[len(av)] + av
            out.append(tag + _SMALL[len(kv)] + kv if len(kv) < 16384 else _ld(tag, kv))
            continue
        if (t is bool or t is str and k not in _UNIQUE and len(v) <= 80
                or t is list and len(v) == 1 and type(v[0]) is str):
            key = (field, k, t, v if t is not list else v[0])
            hit = _FRAMED.get(key)
            if hit is None:
                if len(_FRAMED) >= 8192:
                    _FRAMED.clear()
                hit = _FRAMED[key] = _ld(tag, key_value(k, v))
            out.append(hit)
            continue
        out.append(_ld(tag, key_value(k, v)))
    return b"".join(out)


_STATIC: dict[tuple, bytes] = {}


_IDS: dict[tuple[int, str], bytes] = {}


def _id(field: int, hex_id: str) -> bytes:
    """A trace or parent id's field, remembered: an agent's spans share them."""
    hit = _IDS.get((field, hex_id))
    if hit is None:
        if len(_IDS) >= 8192:
            _IDS.clear()
        hit = _IDS[(field, hex_id)] = _ld(_LD[field], bytes.fromhex(hex_id))
    return hit


def py_span_bytes(s: Span) -> bytes:
    """A ``Span`` message, in Python."""
    parts = [_id(1, s.trace_id), _ld(_LD[2], bytes.fromhex(s.span_id))]
    if s.parent_id:
        parts.append(_id(4, s.parent_id))
    parts.append(_string(5, s.name))
    parts.append(_VARINT[6] + _varint(s.kind))
    parts.append(_FIXED64[7] + _pack_q(s.start_ns))
    parts.append(_FIXED64[8] + _pack_q(s.end_ns))
    static = s.static
    if static is None:
        parts.append(_attributes(9, s.attributes))
    else:  # the span's shared first attributes, encoded once; then its own
        head = _STATIC.get(static)
        if head is None:
            if len(_STATIC) >= 4096:
                _STATIC.clear()
            head = _STATIC[static] = _attributes(9, static)
        parts.append(head)
        parts.append(_attributes(9, islice(s.attributes.items(), len(static), None)))
    for e in s.events:
        parts.append(_ld(_LD[11], _FIXED64[1] + _pack_q(e.time_ns) + _string(2, e.name)
                         + _attributes(3, e.attributes)))
    for ln in s.links:
        parts.append(_ld(_LD[13], _ld(_LD[1], bytes.fromhex(ln.trace_id))
                         + _ld(_LD[2], bytes.fromhex(ln.span_id))
                         + _attributes(4, ln.attributes)))
    status = (_string(2, s.status_message) if s.status_message else b"") + \
        (_VARINT[3] + _varint(s.status) if s.status else b"")
    parts.append(_ld(_LD[15], status))
    return b"".join(parts)


def py_framed(field: int, parts: Iterable[bytes]) -> bytes:
    """Each of ``parts`` as one length-delimited field ``field``, joined, in Python."""
    tag = _LD[field] if field in _LD else _tag(field, 2)
    return b"".join(_ld(tag, p) for p in parts)


_native: Any = None
if os.environ.get("MNEMON_NO_NATIVE") != "1":
    try:
        from . import _otlp as _native
    except ImportError:  # not built (no C compiler where it was installed): Python's
        _native = None

#: the C encoder is in use
NATIVE: bool = _native is not None


def span_bytes(s: Span) -> bytes:
    """A ``Span`` message: in C when built; a span the C encoder does not take exactly as the
    Python one does (an id with spaces, an integer wider than 64 bits, attributes that are not a
    dict) is encoded in Python, which gives its answer or its error."""
    if _native is not None:
        try:
            return _native.span_bytes(s)
        except Exception:
            pass
    return py_span_bytes(s)


def framed(field: int, parts: list[bytes]) -> bytes:
    """Each of ``parts`` as one length-delimited field ``field``, joined."""
    if _native is not None and 1 <= field < 16:
        return _native.framed(field, parts)
    return py_framed(field, parts)


def request_bytes(spans: Iterable[Span], resource: Mapping[str, Any], *,
                  encoded: Iterable[bytes] = ()) -> bytes:
    """One ``ExportTraceServiceRequest`` holding ``spans`` (and spans already encoded with
    ``span_bytes``) under one resource and scope — what ``otlp.request`` is in JSON."""
    body = framed(2, list(encoded)) + framed(2, [span_bytes(s) for s in spans])
    scope = _string(1, sc.SCOPE) + _string(2, __version__)
    scope_spans = _ld(_LD[1], scope) + body + _string(3, sc.SCHEMA_URL)
    resource_spans = (_ld(_LD[1], _attributes(1, resource)) + _ld(_LD[2], scope_spans)
                      + _string(3, sc.SCHEMA_URL))
    return _ld(_LD[1], resource_spans)
