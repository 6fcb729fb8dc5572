"""Every record of ``record.jsonl`` as a msgspec Struct, in the exact shapes of the on-disk format.

The tag field is ``t`` and the tag is the class name. Protocol records act on the context table;
forensic records are durable evidence folded into nothing. Optional fields are omitted when unset,
so a file written by us stays byte-for-byte in the documented shape; fields the format shows as
``null`` are required and always written.

Records are plain data and can hold no reference cycle, so they are not tracked by the cyclic
garbage collector (``gc=False``): a table of a million records costs collections nothing.
"""

from __future__ import annotations

from typing import Any, Literal, Union

import msgspec
from msgspec import Struct

DECODE_ERRORS = (msgspec.DecodeError, RecursionError)
"""What decoding a line may raise for a line that is not a record: msgspec raises RecursionError,
not DecodeError, for a value nested too deep (a hostile line must still be refused by name)."""

# --------------------------------------------------------------------------- blocks


class Usage(Struct, gc=False, kw_only=True, omit_defaults=False):
    """Token usage of one response; ``input_tokens`` counts only uncached input."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int | msgspec.UnsetType = msgspec.UNSET
    """Of ``output_tokens``, those the model spent reasoning (OpenAI's Responses API reports
    them apart): already counted and priced in ``output_tokens``, shown apart by ``mnemon
    cost``. Written only where a provider reported them (unset is never encoded), so every
    other usage keeps its four documented fields byte for byte."""

    @property
    def total_input(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def reasoning(self) -> int:
        """``reasoning_tokens``, 0 where none were reported."""
        r = self.reasoning_tokens
        return 0 if r is msgspec.UNSET else r

    def __add__(self, other: "Usage") -> "Usage":
        a, b = self.reasoning_tokens, other.reasoning_tokens
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=(a if b is msgspec.UNSET else b if a is msgspec.UNSET
                              else a + b),
        )


class Text(Struct, gc=False, tag="text", tag_field="type", frozen=True):
    text: str


class Thinking(Struct, gc=False, tag="thinking", tag_field="type", frozen=True):
    text: str
    signature: str | None = None


class ToolUse(Struct, gc=False, tag="tool_use", tag_field="type", frozen=True):
    id: str
    name: str
    input: Any  # a JSON object as recorded; a string when the provider cut it mid-JSON


class Opaque(Struct, gc=False, tag="opaque", tag_field="type", frozen=True):
    """A provider's block with no shape of ours, kept verbatim and passed back to that provider."""

    provider: str
    block: Any


Block = Union[Text, Thinking, ToolUse, Opaque]


class ToolResult(Struct, gc=False, kw_only=True, frozen=True):
    tool_use_id: str
    content: str
    is_error: bool = False


# --------------------------------------------------------------------------- lineage parts

Locus = tuple[int, int, str]
"""``[offset, length, digest]``: digest is 16 hex digits, the first 8 bytes of blake3 of the line."""

Held = Literal["resident", "evicted", "withdrawn", "swept"]
By = Literal["model", "harness"]


class Pointer(Struct, gc=False, frozen=True):
    """A log file (relative to the run root) and one Locus per record."""

    source: str
    loci: list[Locus]


class Residue(Struct, gc=False, frozen=True):
    span: tuple[int, int]
    note: str | None = None
    by: By = "harness"


class Row(Struct, gc=False, kw_only=True, frozen=True, omit_defaults=True):
    id: int
    role: Literal["user", "assistant"]
    label: str
    bytes: int
    held: Held
    swept: list[tuple[int, str]] | None = None


class Linked(Struct, gc=False, frozen=True):
    row: Row
    at: Pointer


# --------------------------------------------------------------------------- protocol records


class _R(Struct, gc=False, tag_field="t", tag=True, kw_only=True, frozen=True, omit_defaults=True):
    pass


class UserPrompt(_R, frozen=True):
    turn: int
    text: str


class AssistantMessage(_R, frozen=True):
    turn: int
    blocks: list[Block]
    stop_reason: str | None
    model: str | None
    usage: Usage | None
    recorded_usage: Usage | None = None


class ToolResults(_R, frozen=True):
    results: list[ToolResult]


class Steering(_R, frozen=True):
    text: str
    # who steers: the harness (nudges, reminders, notes about children), a person (``user``:
    # chat's ``/steer``, ``POST /v1/agents/{id}/steer``) or the agent's parent (``agents_send``)
    by: Literal["harness", "user", "parent"] | None = None


class ChainAt(Struct, gc=False, frozen=True):
    """The parent's chain where a child was forked from it (docs/format.md, "The chain"):
    its log, the bytes and records it held then, and BLAKE3 of those bytes (64 hex digits).
    ``mnemon verify`` checks the parent's first ``bytes`` against ``head``."""

    source: str
    bytes: int
    lines: int
    head: str


class Inherited(_R, frozen=True):
    turns: list[Linked]
    residues: list[Residue]
    id_floor: int | None = None
    parent_head: ChainAt | None = None


class PlanFigures(Struct, gc=False, frozen=True, kw_only=True, omit_defaults=True):
    """The figures of a harness eviction's choice of cut (``keep = "auto"``, session/keep.py):
    optional, so a replay can explain every cut and older logs still fold; every field is optional
    too, for files written by other tools."""

    keep: float | None = None  # share of the history bytes the chosen cut keeps (its items)
    kept_tokens: int | None = None  # tokens kept, the new residue message included
    verbatim_tokens: int | None = None  # tokens of recorded turns kept
    floor_tokens: int | None = None  # the verbatim floor applied (capped at what the ceiling cut keeps)
    ceiling_keep: float | None = None  # the share the ceiling cut (KEEP) would keep
    requests: float | None = None  # requests expected before the next eviction
    cost: float | None = None  # input-token equivalents per request, chosen cut
    ceiling_cost: float | None = None  # the same for the ceiling cut
    candidates: int | None = None  # cuts weighed


class Evicted(_R, frozen=True):
    residue: Residue
    plan: PlanFigures | None = None


class Marked(_R, frozen=True):
    block: tuple[int, int]
    replacement: str


class Swept(_R, frozen=True):
    blocks: list[tuple[int, int]]


class Cleared(_R, frozen=True):
    pass


class Rewound(_R, frozen=True):
    to: int


# --------------------------------------------------------------------------- forensic records


class SessionStarted(_R, frozen=True):
    agent: str
    parent: str | None = None
    kind: Literal["mnemon", "fresh"] | None = None
    at: str | None = None
    system: str | None = None
    tools: list[Any] | None = None
    provider: str | None = None
    model: str | None = None
    context_window: int | None = None
    tokens_per_byte: float | None = None
    depth: int | None = None
    # a typed agent's output type, ``{"name", "schema", "retries"}`` (docs/format.md)
    output_type: dict[str, Any] | None = None
    # the agent's named role (docs/roles.md); absent for an agent without one
    role: str | None = None
    # the tool policy the agent started under, its ancestors' included: its layers, outermost
    # first (docs/format.md, docs/policy.md); absent when none was in force
    policy: list[dict[str, Any]] | None = None
    # the sandbox its shell runs under (docs/sandbox.md), for an agent with a workspace: what a
    # reopened agent may not exceed, and what every surface shows (``kind = "none"`` above all)
    sandbox: dict[str, Any] | None = None
    # the caps its parent gave it (docs/orchestrator.md, "Delegation"): ``{"usd", "tokens",
    # "max_turns"}``, each optional — dollars and tokens for it and its descendants, turns its
    # own; what any process that reopens it holds it to
    budget: dict[str, Any] | None = None


class SessionResumed(_R, frozen=True):
    at: str | None = None
    records: int | None = None
    torn_bytes: int | None = None


class SessionEnded(_R, frozen=True):
    reason: str
    at: str | None = None
    output: Any = None  # a typed agent's accepted answer, the parsed JSON (docs/format.md)


class TurnStarted(_R, frozen=True):
    turn: int
    at: str | None = None


class WorkspaceSnapshot(_R, frozen=True):
    """The agent's workspace as it stood at this point of its log (docs/workspace.md): the
    content id of a tree in the run root's store (``workspace/store.git``, git's object format).

    ``turn``: the turn whose tools left it (absent: before any turn — the workspace the agent
    started from). ``why``: absent for a turn's tools; ``start`` (the first, naming ``dir`` and
    ``source``), ``rewind`` (``turn``: the turn rewound to), ``resume`` (the snapshot a resumed agent was restored to;
    ``aside`` then names what its directory held that no record named, kept in the store), or
    ``merge`` (a synod member's change applied; ``source`` names the member)."""

    snapshot: str
    turn: int | None = None
    why: Literal["start", "rewind", "resume", "merge"] | None = None
    dir: str | None = None
    source: str | None = None
    aside: str | None = None
    at: str | None = None


class ProviderCall(_R, frozen=True):
    attempt: int
    latency_s: float
    usage: Usage | None = None
    error: str | None = None
    model: str | None = None
    at: str | None = None
    purpose: str | None = None  # set when the call opens no turn (a summarisation request)
    # the batch engine: the provider's batch id and this request's custom id in it (a call
    # recorded with them and no usage is a submission; the one with its usage, its result)
    batch: str | None = None
    custom_id: str | None = None


# --------------------------------------------------------------------------- approval records


class ApprovalRequested(_R, frozen=True):
    """A tool call the agent's policy asks a person about (docs/policy.md): the call waits,
    and runs only once an ``ApprovalDecided`` approves it. Belongs to no turn and changes
    nothing sent; the fold judges it (the call must be unanswered in the turn in hand, asked
    once)."""

    call_id: str
    tool: str
    input: Any
    rule: str | None = None
    reason: str | None = None
    at: str | None = None
    # ``"parent"``: the policy said ``ask_parent`` — the agent's parent decides (with
    # ``approvals_decide``), a person where the parent may not make the call itself
    to: Literal["parent"] | None = None


class ApprovalDecided(_R, frozen=True):
    """The decision on a pending ``ApprovalRequested``: ``approve`` (with ``input`` when the
    person edited it: what the tool receives) or ``reject`` (``reason`` goes to the model as
    the call's error result). ``by`` says who decided: ``api``, ``callback``, ``chat``,
    ``timeout``, ``on_ask``."""

    call_id: str
    decision: Literal["approve", "reject"]
    reason: str | None = None
    input: dict[str, Any] | None = None
    by: str | None = None
    at: str | None = None


Record = Union[
    UserPrompt,
    AssistantMessage,
    ToolResults,
    Steering,
    Inherited,
    Evicted,
    Marked,
    Swept,
    Cleared,
    Rewound,
    SessionStarted,
    SessionResumed,
    SessionEnded,
    TurnStarted,
    ProviderCall,
    ApprovalRequested,
    ApprovalDecided,
    WorkspaceSnapshot,
]

PROTOCOL = (UserPrompt, AssistantMessage, ToolResults, Steering, Inherited, Evicted, Marked, Swept,
            Cleared, Rewound)
FORENSIC = (SessionStarted, SessionResumed, SessionEnded, TurnStarted, ProviderCall,
            ApprovalRequested, ApprovalDecided, WorkspaceSnapshot)
APPROVAL = (ApprovalRequested, ApprovalDecided)
"""Records of the approval of a call: they belong to no turn (like the forensic records, among
which they are counted), but the fold judges them and keeps the turn in hand's approvals."""

_encoder = msgspec.json.Encoder()
encoder = _encoder
"""The encoder ``encode`` uses (a log writer calls its ``encode`` directly)."""
_decoder = msgspec.json.Decoder(Record)
_block_decoder = msgspec.json.Decoder(Block)


def encode(record: Record) -> bytes:
    """The record's line, without its newline: compact JSON, keys in field order."""
    return _encoder.encode(record)


def decode(line: bytes | memoryview) -> Record:
    """Parse one line; raises ``msgspec.DecodeError`` / ``ValidationError`` on a foreign shape."""
    return _decoder.decode(line)


def compact(value: Any) -> bytes:
    """Compact JSON as the writer produces it (tool inputs, opaque blocks)."""
    return _encoder.encode(value)


_SIZES: dict[int, tuple[object, int]] = {}


def size_of(value: str | list) -> int:
    """Encoded size of a system prompt (UTF-8) or a tools list (compact JSON), remembered by
    identity: every request of a run, and every agent's opening, holds the same few objects.
    The object is held while remembered, so its id is not reused under it."""
    hit = _SIZES.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1]
    n = len(value.encode("utf-8")) if isinstance(value, str) else len(compact(value))
    if len(_SIZES) >= 64:
        _SIZES.clear()
    _SIZES[id(value)] = (value, n)
    return n


def to_builtins(record: Any) -> Any:
    return msgspec.to_builtins(record)


def decode_block(obj: Any) -> Block:
    return msgspec.convert(obj, Block)
