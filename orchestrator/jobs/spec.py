"""The job file: TOML read with ``mnemon._toml``, validated into msgspec Structs.

Every Struct forbids unknown fields, so a misspelt key anywhere is refused naming the key and the
line it is on (``JobError``); a wrong type is refused the same way. Relative paths in the file
resolve against the job file's folder. ``docs/jobs.md`` is the reference.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from ...errors import ConfigError
from ... import _toml as toml
from ..scores.spec import ScoreSpec, check as check_score



class JobError(ConfigError):
    """A job file, input file or template that cannot run: one line naming the key, column or
    line. The CLI turns it into exit 2 before any agent starts."""


class _S(Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    pass


class ProviderSpec(_S, frozen=True):
    """As the CLI's ``--provider/--model/--base-url/--max-tokens/--cache-ttl``."""

    name: Literal["scripted", "anthropic", "openai", "openai-responses",
                  "bedrock", "vertex", "gemini", "azure-openai",
                  "azure-openai-responses"] = "scripted"
    model: str | None = None
    base_url: str | None = None
    max_tokens: Annotated[int, Meta(ge=1)] = 8192
    cache_ttl: Literal["5m", "1h"] = "5m"
    price_as: str | None = None
    """Price every usage as this model (a scripted run priced as a real one)."""
    script: str | None = None
    """Scripted provider: a JSONL script (a path)."""
    policy: str | None = None
    """Scripted provider: ``module:callable`` playing the model."""
    latency_s: Annotated[float, Meta(ge=0)] = 0.0
    """Scripted provider: simulated latency per request."""
    store: bool = False
    """openai-responses: store responses server-side and chain turns (``--store``)."""
    batch: bool = False
    """Run the job through the provider's batch API (``--engine batch``; docs/jobs.md)."""
    batch_poll_s: Annotated[float, Meta(gt=0)] = 5.0
    """The batch engine: the first wait between polls of a batch, doubled up to 60 s."""


class AgentSpec(_S, frozen=True):
    system: str | None = None
    system_file: str | None = None
    tools: list[str] = []
    """User tools by import path, ``module:callable``."""
    context_window: Annotated[int, Meta(ge=1)] | None = None
    keep: Annotated[float, Meta(gt=0, lt=1)] | Literal["auto"] = "auto"
    """``auto`` (the default, as everywhere): the plan chooses; or a share of history to keep."""
    keep_floor_tokens: Annotated[int, Meta(ge=0)] | None = None
    """Under ``auto``: tokens of recorded turns a cut keeps (the run's default when unset)."""
    max_turns: Annotated[int, Meta(ge=1)] = 250
    output: str | None = None
    """The answer's output type: a JSON Schema file (relative to the job file) or
    ``module:Type`` (a msgspec Struct, dataclass or TypedDict); results rows gain ``output``."""
    output_retries: Annotated[int, Meta(ge=0)] = 2
    """Turns a model gets to fix an answer that does not fit its output type."""
    role: str | None = None
    """Each task's agent's named role, one of ``[roles.NAME]`` (docs/roles.md)."""
    child_budget_usd: Annotated[float, Meta(gt=0)] | None = None
    """The caps of a child a task's agent starts without giving its own (``agents_start``'s
    ``budget_usd``; docs/orchestrator.md, "Delegation"): lowered to what the parent has left."""
    child_budget_tokens: Annotated[int, Meta(ge=1)] | None = None
    child_max_turns: Annotated[int, Meta(ge=1)] | None = None
    mcp: str | None = None
    """MCP servers each task's agent starts for itself (a config file in the ``mcpServers``
    shape, relative to the job file): they start before its log opens and stop when it ends,
    unlike the top-level ``mcp``, whose servers every task shares for the whole run."""


class InputSpec(_S, frozen=True):
    path: str
    prompt: str
    """A template: ``{column}`` is the row's value; ``{{`` and ``}}`` are literal braces."""
    id: str | None = None
    """The column holding each task's id (default: the row's number, from 1)."""
    target: str | None = None
    """Each task's expected answer, a template like ``prompt`` (``"{answer}"``): what the
    ``[[score]]`` tables grade against (docs/scores.md)."""


class TaskSpec(_S, frozen=True):
    id: str
    prompt: str
    target: str | None = None
    """The task's expected answer, for the ``[[score]]`` tables."""


class BudgetSpec(_S, frozen=True):
    tokens: Annotated[int, Meta(ge=1)] | None = None
    """All tokens (input, cache, output) across the job."""
    usd: Annotated[float, Meta(gt=0)] | None = None
    task_tokens: Annotated[int, Meta(ge=1)] | None = None
    """Per task: its agent and every agent forked from it."""
    task_usd: Annotated[float, Meta(gt=0)] | None = None


class SynodSpec(_S, frozen=True):
    n: Annotated[int, Meta(ge=1, le=32)]
    reduce: Literal["vote", "merge"] = "vote"
    question: str | None = None
    """Each child's prompt, a template like ``[input].prompt`` (default: the task's prompt)."""
    stances: list[str] = []
    merge_prompt: str = ("Your synod's children answered as follows. Give your final answer.")
    """``merge``: the parent's next prompt, followed by every child's answer."""
    output: str | None = None
    """The children's output type (as ``[agent] output``; default: the agent's): a typed
    vote is taken field by field."""


class RuleSpec(_S, frozen=True):
    """One ``[[policy.rule]]``, as a ``[[rule]]`` of a policy file (docs/policy.md)."""

    tool: str
    action: Literal["allow", "deny", "ask"]
    when: dict[str, str] = {}
    reason: str | None = None


class PolicySpec(_S, frozen=True):
    """``[policy]``: a policy ``file`` (relative to the job file) or inline ``default`` and
    ``[[policy.rule]]``; ``on_ask``: what a call the policy asks about meets in a batch job —
    ``deny`` (the default: nobody is there to ask) or ``wait`` (for a decision from Python, or
    until ``ask_timeout``)."""

    file: str | None = None
    default: Literal["allow", "deny", "ask"] | None = None
    ask_timeout: Annotated[float, Meta(gt=0)] | None = None
    rule: list[RuleSpec] = []
    on_ask: Literal["deny", "wait"] = "deny"


class JobWorkspaceSpec(_S, frozen=True):
    """``[workspace]``: the files each task's agent works on (docs/jobs.md, "Workspaces").
    ``source`` a directory or a git repository (its last commit), relative to the job file,
    copied per task — never written; none: each task starts from an empty workspace.
    ``inherit``: what a task's children start from (``workspace.spec.WorkspaceSpec``)."""

    source: str | None = None
    inherit: Literal["inherit", "empty", "source"] = "inherit"


class JobSpec(_S, frozen=True):
    concurrency: Annotated[int, Meta(ge=1, le=4096)] = 8
    """Tasks in flight."""
    output: str | None = None
    """``results.jsonl`` path (default: inside the run root)."""
    run_root: str | None = None
    """Where logs go (default: ``<job file stem>.run`` beside the job file)."""
    retries: Annotated[int, Meta(ge=0)] = 0
    """How many more times a task whose agent failed is resumed from its log."""
    provider: ProviderSpec = ProviderSpec()
    agent: AgentSpec = AgentSpec()
    input: InputSpec | None = None
    tasks: list[TaskSpec] = []
    budget: BudgetSpec = BudgetSpec()
    synod: SynodSpec | None = None
    mcp: str | None = None
    """MCP servers every task's agents are offered: a config file in the ``mcpServers`` shape
    (JSON or TOML, as ``--mcp``; docs/mcp.md), relative to the job file."""
    policy: PolicySpec | None = None
    """Which tool calls the job's agents may make (docs/policy.md)."""
    workspace: JobWorkspaceSpec | None = None
    """Each task's own files (``[workspace]``): a copy of ``source`` per task."""
    sandbox: dict[str, Any] | None = None
    """How the shell tool runs the tasks' commands (``[sandbox]``, docs/sandbox.md): judged by
    ``sandbox.spec.parse_sandbox`` when the job is built."""
    roles: dict[str, dict[str, Any]] = {}
    """Named roles the agents may delegate to, ``[roles.NAME]`` (docs/roles.md): judged by
    ``roles.spec`` when the job is built."""
    score: list[ScoreSpec] = []
    """How each task's answer is graded, ``[[score]]`` (docs/scores.md)."""
    variants: dict[str, Any] = {}
    """``[variants]``: keys of this file each given a list of values; the job runs once per
    combination, on the same tasks, into one run root (docs/scores.md, "Variants")."""


class Job(Struct, kw_only=True, frozen=True):
    """A validated job: the spec plus where it came from."""

    spec: JobSpec
    path: Path
    text: str

    @property
    def folder(self) -> Path:
        return self.path.parent

    def resolve(self, value: str) -> Path:
        p = Path(value).expanduser()
        return p if p.is_absolute() else self.folder / p

    @property
    def run_root(self) -> Path:
        return self.resolve(self.spec.run_root or f"{self.path.stem}.run")

    def output(self, run_root: Path) -> Path:
        return self.resolve(self.spec.output) if self.spec.output else run_root / "results.jsonl"

    def system(self) -> str | None:
        a = self.spec.agent
        if a.system_file is None:
            return a.system
        try:
            return self.resolve(a.system_file).read_text(encoding="utf-8")
        except OSError as e:
            raise JobError(f"{self.path}: [agent] system_file: {e.strerror}: "
                           f"{self.resolve(a.system_file)}") from None


_AT = re.compile(r"at `\$((?:\.[A-Za-z0-9_-]+|\[\d+\])*)`")
_UNKNOWN = re.compile(r"unknown field `([^`]+)`")


def load_job(path: str | Path) -> Job:
    """Read and validate a job file. Raises ``JobError`` naming the key and its line."""
    path = Path(path)
    try:
        text = toml.read_text(path)
        data = toml.parse(text, path)
    except OSError as e:
        raise JobError(f"{path}: {e.strerror}") from None
    except toml.TomlError as e:
        raise JobError(str(e)) from None
    try:
        spec = msgspec.convert(data, JobSpec)
    except msgspec.ValidationError as e:
        raise JobError(_explain(path, text, str(e))) from None
    if spec.input is None and not spec.tasks:
        raise JobError(f"{path}: no tasks: give [input] (a JSONL or CSV file and a prompt "
                       "template) or [[tasks]] (id and prompt)")
    if spec.input is not None and spec.tasks:
        raise JobError(f"{path}:{_line(text, ('input',)) or 1}: give [input] or [[tasks]], "
                       "not both")
    if spec.agent.system is not None and spec.agent.system_file is not None:
        raise JobError(f"{path}:{_line(text, ('agent', 'system_file'))}: [agent] takes system "
                       "or system_file, not both")
    if spec.provider.name != "scripted":
        for key in ("script", "policy"):
            if getattr(spec.provider, key) is not None:
                raise JobError(f"{path}:{_line(text, ('provider', key))}: [provider] {key} is "
                               "for the scripted provider only")
    if spec.provider.script is not None and spec.provider.policy is not None:
        raise JobError(f"{path}:{_line(text, ('provider', 'policy'))}: [provider] takes a "
                       "script or a policy, not both")
    if spec.synod is not None and len(spec.synod.stances) > spec.synod.n:
        raise JobError(f"{path}:{_line(text, ('synod', 'stances'))}: {len(spec.synod.stances)} "
                       f"stances for n = {spec.synod.n} children")
    pol = spec.policy
    if pol is not None and pol.file is not None and (pol.rule or pol.default is not None):
        raise JobError(f"{path}:{_line(text, ('policy', 'file')) or 1}: [policy] takes a file "
                       "or inline default and [[policy.rule]], not both")
    ws = spec.workspace
    if ws is not None and ws.source is not None:
        if not ws.source.strip():
            raise JobError(f"{path}:{_line(text, ('workspace', 'source')) or '?'}: [workspace] "
                           "source needs a path (leave it out for an empty workspace)")
        src = Path(ws.source).expanduser()
        src = src if src.is_absolute() else path.parent / src
        if not src.is_dir():
            why = "does not exist" if not src.exists() else "is not a directory"
            raise JobError(f"{path}:{_line(text, ('workspace', 'source')) or '?'}: [workspace] "
                           f"source {ws.source} {why} (a directory or a git repository, "
                           "relative to the job file)")
    if spec.agent.role is not None and spec.agent.role not in spec.roles:
        raise JobError(f"{path}:{_line(text, ('agent', 'role')) or '?'}: [agent] role "
                       f"{spec.agent.role!r} is not one of the job's roles (roles: "
                       f"{', '.join(sorted(spec.roles)) or 'none'})")
    _check_scores(path, text, spec)
    return Job(spec=spec, path=path, text=text)


def _check_scores(path: Path, text: str, spec: JobSpec) -> None:
    """Each ``[[score]]`` named once, taking only its kind's keys; a judge's role the job's."""
    seen: set[str] = set()
    for i, sc in enumerate(spec.score):
        where = f"{path}:{_line(text, ('score', i, 'name')) or _line(text, ('score', i)) or '?'}"
        if sc.name in seen:
            raise JobError(f"{where}: two [[score]] tables are named {sc.name!r}")
        seen.add(sc.name)
        bad = check_score(sc)
        if bad is not None:
            raise JobError(f"{path}:{_line(text, ('score', i, bad[0])) or '?'}: [[score]] "
                           f"{sc.name}: {bad[1]}")
        if sc.role is not None and sc.role not in spec.roles:
            raise JobError(f"{path}:{_line(text, ('score', i, 'role')) or '?'}: [[score]] "
                           f"{sc.name}: role {sc.role!r} is not one of the job's roles (roles: "
                           f"{', '.join(sorted(spec.roles)) or 'none'})")


def _explain(path: Path, text: str, message: str) -> str:
    """msgspec's message (``Object contains unknown field `x` - at `$.agent```) as
    ``job.toml:7: unknown key 'x' in [agent]``."""
    m = _AT.search(message)
    where = _parts(m.group(1)) if m else []
    what = message.split(" - at ")[0]
    unknown = _UNKNOWN.search(message)
    if unknown:
        key = unknown.group(1)
        line = _line(text, (*where, key))
        table = _table_name(where)
        return f"{path}:{line or '?'}: unknown key {key!r} in {table}"
    line = _line(text, tuple(where))
    return f"{path}:{line or '?'}: {_key_name(where)}: {what}"


def _parts(dotted: str) -> list[str | int]:
    out: list[str | int] = []
    for tok in re.findall(r"\.([A-Za-z0-9_-]+)|\[(\d+)\]", dotted):
        out.append(tok[0] if tok[0] else int(tok[1]))
    return out


def _table_name(where: list[str | int]) -> str:
    if not where:
        return "the top level"
    names = [p for p in where if isinstance(p, str)]
    if where and isinstance(where[-1], int):
        return f"[[{'.'.join(names)}]] number {where[-1] + 1}"
    return f"[{'.'.join(names)}]"


def _key_name(where: list[str | int]) -> str:
    if not where:
        return "the job"
    out = ""
    for p in where:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)\s*[=.]""")


def _line(text: str, where: tuple[str | int, ...]) -> int | None:
    """The 1-based line of a key (or a table) in the TOML text: a best-effort scan of table
    headers and ``key =`` lines, good for the layouts people write; None if not found."""
    where = tuple(where)
    if not where:
        return None
    # split the path into the table it lives in and the key inside it
    table: list[str] = []
    index: int | None = None
    key: str | None = None
    parts = list(where)
    while parts:
        p = parts.pop(0)
        if isinstance(p, int):
            index = p
            continue
        if (parts and isinstance(parts[0], int)) or _is_table(text, [*table, p]):
            table.append(p)
        else:
            key = p
            break
    want = ".".join(table)
    seen: dict[str, int] = {}
    current = ""
    occurrence = 0
    header_line: int | None = None
    for n, raw in enumerate(text.splitlines(), start=1):
        h = _HEADER.match(raw)
        if h and not raw.lstrip().startswith("#"):
            current = h.group(2).replace(" ", "")
            seen[current] = seen.get(current, -1) + 1
            occurrence = seen[current]
            if current == want and (index is None or occurrence == index):
                header_line = n
                if key is None:
                    return n
            continue
        if current != want or (index is not None and occurrence != index):
            continue
        k = _KEY.match(raw)
        if k and key is not None and k.group(1).strip("\"'") == key:
            return n
    return header_line


def _is_table(text: str, table: list[str]) -> bool:
    name = ".".join(table)
    return any((h := _HEADER.match(line)) and h.group(2).replace(" ", "") == name
               for line in text.splitlines())


def spec_json(spec: JobSpec) -> Any:
    return msgspec.to_builtins(spec)
