"""The service's JSON shapes, as msgspec Structs: requests are decoded (and refused) by them, and
the OpenAPI document is generated from them, so the schema cannot drift from the code."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

Prompt = Annotated[str, Meta(min_length=1, max_length=1_000_000)]


class _In(Struct, forbid_unknown_fields=True, kw_only=True):
    pass


class AgentCreate(_In):
    """Start a root agent on a prompt; the optional fields override the service's settings."""
    prompt: Prompt
    system: str | None = None
    model: str | None = None
    context_window: Annotated[int, Meta(gt=0)] | None = None
    keep: Annotated[float, Meta(gt=0, lt=1)] | Literal["auto"] | None = None  # decision 0220
    max_turns: Annotated[int, Meta(gt=0)] | None = None
    output: Annotated[dict[str, Any], Meta(description=(
        "A typed answer: the JSON Schema (an object at the root; the subset of "
        "docs/orchestrator.md, 'Typed answers') the final answer must fit. A schema that "
        "cannot be used is refused with 422."))] | None = None
    output_retries: Annotated[int, Meta(ge=0, description=(
        "Turns the model gets to fix an answer that does not fit (default 2)."))] | None = None
    role: Annotated[str, Meta(description=(
        "Its named role (docs/roles.md; default: the roles' root role). The role's own "
        "settings apply over the fields above; an unknown role is refused with 409."))] | None \
        = None
    workspace: Annotated[str | dict[str, Any], Meta(description=(
        "Its files (docs/workspace.md): a directory on the server worked in place (a string), "
        "or an object — `{\"dir\": PATH}` in place, `{\"source\": PATH}` a copy of a "
        "directory or of a git repository's last commit, neither an empty one — with `inherit` "
        "(`inherit`, `empty` or `source`: how its children start). Not a directory: 422; a "
        "directory another agent works in: 409."))] | None = None
    sandbox: Annotated[dict[str, Any], Meta(description=(
        "How its `shell` runs commands (docs/sandbox.md): an object of the `[sandbox]` keys "
        "(`kind`, `network`, `timeout_s`, `max_timeout_s`, `memory_mb`, `processes`, `cpu_s`, "
        "`output_bytes`, `read_only`, `env`), each left out the service's own (`serve "
        "--sandbox`). It only narrows the service's: `\"network\": true` or `\"kind\": "
        "\"none\"` under a service that does not allow it, or any wider limit, is refused with "
        "422 naming the key, as is an agent without a workspace (it has no shell)."))] | None \
        = None


class PromptIn(_In):
    """A new user prompt for an agent that has ended: it resumes and runs again."""
    prompt: Prompt


class RewindIn(_In):
    """Withdraw every turn with id > ``to``."""
    to: Annotated[int, Meta(ge=0)]


class SteerIn(_In):
    """A message to a running agent: its next request carries it (docs/orchestrator.md,
    "Delegation")."""
    text: Annotated[str, Meta(min_length=1, max_length=16_384)]


class SteerOut(Struct, kw_only=True):
    agent: str
    delivered: str
    messages: Annotated[int, Meta(description="Messages it has been sent so far.")]
    at: str


class ForkIn(_In):
    """Fork a child of a running agent: ``mnemon`` inherits its table, ``fresh`` starts empty."""
    task: Prompt
    kind: Literal["mnemon", "fresh"] = "mnemon"


class GrepIn(_In):
    pattern: Annotated[str, Meta(min_length=1, max_length=10_000)]
    turns: str | None = None
    timeout_s: Annotated[float, Meta(gt=0, le=60)] | None = None


class UsageOut(Struct, kw_only=True, frozen=True):
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0


class AgentOut(Struct, kw_only=True):
    id: str
    state: Literal["running", "ended", "failed", "cancelled", "open"]
    reason: str | None = None
    kind: str | None = None
    role: Annotated[str | None, Meta(description=(
        "Its named role (docs/roles.md); null for an agent without one."))] = None
    model: str | None = None
    parent: str | None = None
    children: list[str] = []
    depth: int | None = None
    usage: UsageOut = UsageOut()
    cost_usd: float = 0.0
    answer: str | None = None
    output: Annotated[Any, Meta(description=(
        "A typed agent's accepted answer, the parsed JSON (null until it ends done)."))] = None
    live: bool = False
    sandbox: Annotated[dict[str, Any] | None, Meta(description=(
        "The sandbox its `shell` runs under, as its opening record names it (docs/sandbox.md); "
        "null for an agent without a workspace. `kind` = `none`: its commands run unconfined, "
        "trusting the model with the machine."))] = None
    budget: Annotated[dict[str, Any] | None, Meta(description=(
        "The caps its parent gave it (docs/orchestrator.md, \"Delegation\") beside what its "
        "tree spent: `usd` and `spent_usd`, `tokens` and `spent_tokens`, `max_turns` and "
        "`turns`, each pair present when that cap is; null for an agent with no cap."))] = None
    messages: Annotated[int, Meta(description=(
        "Messages sent to it (`agents_send` by its parent, `/steer` or the steer route by a "
        "person)."))] = 0
    in_tools: Annotated[list[str], Meta(description=(
        "The tools it is running now (a live agent)."))] = []
    approvals: Annotated[list[dict[str, Any]], Meta(description=(
        "The calls it waits on a decision for (a live agent): `call_id`, `tool`, and `to` = "
        "`parent` for an `ask_parent`."))] = []


class AgentList(Struct, kw_only=True):
    agents: list[AgentOut]
    read_only: bool
    next: Annotated[str | None, Meta(description=(
        "With ?limit: the last id of this page, to pass as ?after for the next; null at the "
        "end."))] = None


class Accepted(Struct, kw_only=True):
    id: str
    state: str


class DoorRows(Struct, kw_only=True):
    agent: str
    rows: list[dict[str, Any]]


class GrepOut(Struct, kw_only=True):
    agent: str
    hits: list[dict[str, Any]]
    total: int


class Survey(Struct, kw_only=True):
    agent: str
    frontier: list[dict[str, Any]]
    marks: list[dict[str, Any]]
    history_bytes: int
    used_tokens: int
    context_window: int | None = None


class TreeOut(Struct, kw_only=True):
    tree: list[dict[str, Any]]


class CostOut(Struct, kw_only=True):
    agents: list[dict[str, Any]]
    total: dict[str, Any]


class RunOut(Struct, kw_only=True):
    run_root: str
    read_only: bool
    provider: str | None
    model: str | None
    agents: int
    version: str
    sandbox: Annotated[dict[str, Any] | None, Meta(description=(
        "The sandbox a new agent's `shell` runs under unless its request narrows it (`serve "
        "--sandbox`; docs/sandbox.md); `kind` = `none` runs commands unconfined. Null when "
        "read-only."))] = None
    workspace: Annotated[bool, Meta(description=(
        "Whether a new agent gets a workspace without asking (`serve --workspace`): only an "
        "agent with one is offered the shell."))] = False


class Health(Struct, kw_only=True):
    ok: bool


class ErrorOut(Struct, kw_only=True):
    error: str


class JobIn(_In):
    """Run a job file (docs/jobs.md) on this machine: its own run root and results file, as
    ``mnemon run`` would use them unless given here."""
    path: Annotated[str, Meta(min_length=1)]
    run_root: str | None = None
    output: str | None = None


class JobOut(Struct, kw_only=True):
    id: str
    path: str
    run_root: str
    output: str
    state: Literal["running", "ended", "failed", "cancelled"]
    error: str | None = None
    total: int = 0
    skipped: int = 0
    done: int = 0
    failed: int = 0
    budget: int = 0
    cancelled: int = 0
    running: int = 0
    cost_usd: float = 0.0
    eta_s: float | None = None


class JobList(Struct, kw_only=True):
    jobs: list[JobOut]


class TranscriptOut(Struct, kw_only=True):
    """An agent's log records in order from a byte offset, as a person reads them."""
    agent: str
    entries: Annotated[list[dict[str, Any]], Meta(description=(
        "Each record as in the log, at its byte `offset`; a string longer than the clip is cut "
        "(`clipped: true`: read the turn for all of it); an Inherited record's turns name the "
        "ancestor each comes `from`."))]
    next: Annotated[int, Meta(description="Where the next record starts: pass it as `after`.")]
    more: Annotated[bool, Meta(description="The answer stopped before the end of the log.")]


class JobResults(Struct, kw_only=True):
    """A job's results file as a table: the typed output's top-level fields as columns."""
    job: str
    columns: list[str]
    rows: list[dict[str, Any]]
    failed: Annotated[list[dict[str, Any]], Meta(description=(
        "The tasks that did not end done: `task`, `agent`, `status`, `reason`."))]


class JobScores(Struct, kw_only=True):
    """A job's scores (docs/scores.md): per scorer the summary `mnemon results --summary`
    prints, and each scored task's scores."""
    job: str
    summary: Annotated[list[dict[str, Any]], Meta(description=(
        "Per scorer: `scorer`, `n`, `mean`, `se`, `lo`/`hi` (the 95 % interval), `method` "
        "(`wilson` or `t`), `failures`, `correct` (the scores' sum), `cost_usd`, "
        "`cost_per_correct`, `judge_usd`."))]
    tasks: Annotated[list[dict[str, Any]], Meta(description=(
        "Each final task's `task`, `status` and `scores` (`{name: {value, explanation?, "
        "error?}}`)."))]


class WorkspaceFile(Struct, kw_only=True):
    path: str
    size: int | None = None
    kind: Literal["file", "symlink", "dir", "repository"] = "file"


class WorkspaceOut(Struct, kw_only=True):
    """An agent's files at a turn (docs/workspace.md): the snapshot and what is in it."""
    agent: str
    turn: Annotated[int | None, Meta(description=(
        "The turn asked (`?turn=`): the files as they stood after its tools; null: the "
        "latest."))] = None
    snapshot: Annotated[str, Meta(description="The snapshot: a git tree id (40 hex).")]
    files: list[WorkspaceFile]
    turns: Annotated[list[dict[str, Any]], Meta(description=(
        "Each workspace record of the agent's log in order: `turn`, `snapshot`, `why` "
        "(`start`, `tools`, `rewind`, `resume`, `merge`), and `source`/`dir`/`aside` where "
        "recorded."))]


class WorkspaceChanges(Struct, kw_only=True):
    """Per recorded change of an agent's files, the paths it changed."""
    agent: str
    changes: Annotated[list[dict[str, Any]], Meta(description=(
        "`{turn, why, from, to, files: [{status, path}]}` per record that changed the "
        "snapshot (`status`: A added, M modified, D deleted, T type changed); `from`/`to` "
        "are snapshots, which `diff?from=&to=` takes."))]
