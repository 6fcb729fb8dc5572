"""From a validated job to what the supervisor needs: ``Settings``, the provider, user tools.

The job's ``[provider]``, ``[agent]`` and ``[budget]`` go, as plain values, through the same
builder as the CLI's ``--provider/--model/--base-url/--context-window/...``
(``orchestrator/configure.py``), so a job and ``mnemon ask`` with the same values build the
same provider and settings; neither knows the CLI. Import paths (``module:callable``) resolve
with the job file's folder first on ``sys.path``.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

import msgspec

from ..configure import provider_from, settings_from
from ..engines import Engine, engine_for
from ..importpath import ImportPathError, resolve
from ..policy import PolicyError, ToolPolicy, combine, load_policy, parse_policy
from ..roles.book import check_providers
from ..roles.load import roles_from
from ..workspace.life import source_tree
from ..workspace.store import StoreError, store_of
from ..roles.spec import Roles, RolesError, check_tools
from ..settings import Settings
from ..tools.base import Tool
from ..tools.function import as_tool
from ..workspace.spec import WorkspaceSpec
from ..sandbox.spec import parse_sandbox
from ...errors import ConfigError
from .outputs import outputs_for
from .scoring import scoring_for
from .spec import Job, JobError, _line


def _provider_values(job: Job) -> dict[str, Any]:
    """``[provider]`` as ``configure.provider_from``'s values (the CLI's flags, by name)."""
    p = job.spec.provider
    return dict(provider=p.name, model=p.model, base_url=p.base_url, max_tokens=p.max_tokens,
                script=str(job.resolve(p.script)) if p.script else None,
                cache_ttl=p.cache_ttl, store=p.store)


def settings_for(job: Job) -> Settings:
    spec = job.spec
    width = spec.synod.n + 1 if spec.synod is not None else 1
    own: dict[str, Any] = {}
    from ..mcp.config import McpConfigError, load_config

    if spec.agent.mcp is not None:  # each task's agent starts these for itself
        try:
            own["agent_mcp_servers"] = load_config(job.resolve(spec.agent.mcp))
        except McpConfigError as e:
            raise JobError(f"{job.path}:{_line(job.text, ('agent', 'mcp')) or '?'}: "
                           f"[agent] mcp: {e}") from None
    policy = policy_for(job)
    if policy is not None:
        own["tool_policy"] = policy
    roles = roles_for(job)
    if roles is not None:
        own["roles"] = roles
    if spec.mcp is not None:  # every task's agents share these, for the whole run
        try:
            own["mcp_servers"] = load_config(job.resolve(spec.mcp))
        except McpConfigError as e:
            raise JobError(e, file=job.path, key="mcp") from None
    if spec.workspace is not None:  # each task a copy of the source (or an empty workspace)
        src = spec.workspace.source
        own["workspace"] = WorkspaceSpec(
            source=str(job.resolve(src).resolve()) if src is not None else None,
            inherit=spec.workspace.inherit)
    if spec.sandbox is not None:  # ``[sandbox]``: its keys judged, each refusal naming its line
        try:
            own["sandbox"] = parse_sandbox(spec.sandbox, where="[sandbox]")
        except ConfigError as e:
            key = (getattr(e, "key", None) or "").rpartition(".")[2]
            line = _line(job.text, ("sandbox", key)) if key else None
            raise JobError(f"{job.path}:{line or _line(job.text, ('sandbox',)) or '?'}: "
                           f"{e}") from None
    a, b = spec.agent, spec.budget
    return settings_from(
        dict(provider=spec.provider.name, model=spec.provider.model,
             max_tokens=spec.provider.max_tokens, cache_ttl=spec.provider.cache_ttl,
             context_window=a.context_window, keep=a.keep, keep_floor_tokens=a.keep_floor_tokens,
             max_turns=a.max_turns, system=job.system(), budget_usd=b.usd,
             budget_tokens=b.tokens, **own, task_budget_tokens=b.task_tokens,
             task_budget_usd=b.task_usd, price_model=spec.provider.price_as,
             child_budget_usd=a.child_budget_usd, child_budget_tokens=a.child_budget_tokens,
             child_max_turns=a.child_max_turns,
             concurrency=spec.concurrency * width,
             max_agents=spec.concurrency * width + 64),  # finished tasks leave the table
        file=job.path)


_ROLE = re.compile(r": role ([A-Za-z][A-Za-z0-9_-]*)")


def roles_for(job: Job) -> Roles | None:
    """The job's ``[roles.NAME]`` tables, the root's ``[agent] role``; refused naming the
    role and its line."""
    spec = job.spec
    if not spec.roles:
        return None
    try:
        roles = roles_from(spec.roles, f"{job.path} [roles]", base=job.folder,
                           root=spec.agent.role, provider=spec.provider.name)
        check_providers(roles, spec.provider.name)
        check_tools(roles, frozenset(t.name for t in user_tools_for(job)))
    except RolesError as e:
        m = _ROLE.search(str(e))
        line = _line(job.text, (f"roles.{m.group(1)}",)) if m else None  # its header
        text = str(e).replace(f"{job.path} [roles]: ", "", 1)
        raise JobError(f"{job.path}:{line or '?'}: [roles] {text}") from None
    return roles


def _with_roles(job: Job, settings: Settings, roles: Roles | None,
                role: str | None) -> Settings:
    if roles is not None and settings.roles is not None:
        raise JobError(f"{job.path}: the job has [roles]; give roles there or with --roles, "
                       "not both")
    roles = roles if roles is not None else settings.roles
    if roles is None:
        raise JobError(f"{job.path}: --role {role} needs roles ([roles.NAME] or --roles FILE)")
    try:
        roles = roles.with_root(role) if role is not None else roles
        check_tools(roles, frozenset(t.name for t in user_tools_for(job)))
    except RolesError as e:
        raise JobError(str(e)) from None
    return msgspec.structs.replace(settings, roles=roles)


def policy_for(job: Job) -> ToolPolicy | None:
    """The job's ``[policy]``: its file, or its inline rules; refused naming the rule."""
    pol = job.spec.policy
    if pol is None or (pol.file is None and pol.default is None and not pol.rule):
        return None
    try:
        if pol.file is not None:
            loaded = load_policy(job.resolve(pol.file))
            if pol.ask_timeout is not None:
                loaded = dataclasses.replace(loaded, ask_timeout_s=pol.ask_timeout)
            return loaded
        data: dict[str, Any] = {"default": pol.default or "allow",
                                "rule": [{k: v for k, v in (("tool", r.tool),
                                                            ("action", r.action),
                                                            ("when", r.when),
                                                            ("reason", r.reason))
                                          if v is not None} for r in pol.rule]}
        if pol.ask_timeout is not None:
            data["ask_timeout"] = pol.ask_timeout
        return parse_policy(data, f"{job.path} [policy]")
    except PolicyError as e:
        raise JobError(f"{job.path}:{_line(job.text, ('policy',)) or '?'}: {e}") from None


def import_source(root: Path, spec: WorkspaceSpec | None) -> None:
    """The job's ``[workspace] source`` imported into the run's store once per process,
    before any task starts (``workspace.life.source_tree`` remembers it): a source that cannot
    be read is refused before an agent runs, and the Dask chunks, each a process of its own,
    import it one at a time under a lock on the store — git cannot fetch into one repository
    from two processes at once (its ``shallow.lock``)."""
    if spec is None or spec.source is None:
        return
    try:
        source_tree(store_of(root), spec.source)  # one process at a time (its lock)
    except StoreError as e:  # not a repository git can read, say: the user's to fix
        raise JobError(f"[workspace] source {spec.source}: {e}") from None


def provider_for(job: Job):
    p = job.spec.provider
    kw: dict[str, Any] = {}
    if p.policy is not None:
        kw["policy"] = load_object(job, p.policy, ("provider", "policy"))
    provider = provider_from(_provider_values(job), **kw)
    if p.latency_s and hasattr(provider, "latency_s"):
        provider.latency_s = p.latency_s
    return provider


def user_tools_for(job: Job) -> list[Tool]:
    tools = []
    for ref in job.spec.agent.tools:
        obj = load_object(job, ref, ("agent", "tools"))
        try:
            tools.append(as_tool(obj))
        except TypeError as e:
            raise JobError(f"{job.path}:{_line(job.text, ('agent', 'tools')) or '?'}: tool "
                           f"{ref!r}: {e}") from None
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise JobError(f"{job.path}: two [agent] tools have the same name")
    return tools


def load_object(job: Job, ref: str, key: tuple[str, ...]) -> Any:
    """``module:attr`` imported with the job's folder first on ``sys.path``."""
    try:
        return resolve(ref, job.folder, want_callable=True)
    except ImportPathError as e:
        raise JobError(f"{job.path}:{_line(job.text, key) or '?'}: {e}") from None


def load(path: str | Path) -> "tuple[Job, list]":
    """The job file, checked, and its tasks, each prompt filled in."""
    from .spec import load_job
    from .tasks import load_tasks

    try:
        job = load_job(path)
    except OSError as e:
        raise JobError(f"{path}: {e.strerror or e}") from None
    return job, load_tasks(job)


def prepare(path: str | Path, *, run_root: str | Path | None = None,
            output: str | Path | None = None, started_by: str = "mnemon run",
            watch_sigint: bool = True, only: "set[str] | None" = None, supervisor=None,
            loaded: "tuple[Job, list] | None" = None, manifest: bool = True,
            policy: ToolPolicy | None = None, engine: "Engine | str | None" = "local",
            roles: Roles | None = None, role: str | None = None):
    """Every check of a job before anything is written or any agent starts, then its run root
    and its runner: ``(runner, provider)``. ``mnemon run`` and the service both start jobs here.
    ``supervisor`` makes the runner's supervisor (a Dask chunk's shares the job's spend).
    ``loaded`` is ``(job, tasks)`` as ``load`` gave them for this file (a Dask chunk is sent
    the driver's: the job, and the chunk's own tasks). ``manifest``: hold the run root for this
    run (``state.hold``; ``runner.release()`` or the end of ``runner.run()`` lets go) and check
    and write its manifest — a Dask chunk does neither: its driver did, and is the one writer.
    ``roles`` and ``role`` (``mnemon run --roles FILE --role NAME``): roles for a job without
    ``[roles]``, and the root agents' role. ``engine`` is the ``Engine`` that runs the job, or
    its name (``None``: the job's own choice, ``engines.engine_for``); it is asked each step
    below, never named, and rides on the runner (``runner.engine``) for the front to run.

    Raises:
        JobError: the job file, its tasks or its run root, named by key, line or path.
    """
    from ...lineage.runroot import RunRootError, create_run_root
    from ..supervisor import Supervisor
    from .runner import JobRunner
    from .state import check_manifest, hold

    job, tasks = loaded if loaded is not None else load(path)
    if job.spec.variants:  # each variant is a job of its own, run in turn (``jobs/variants``)
        raise JobError(f"{job.path}: a job with [variants] runs with `mnemon run` (each "
                       "variant in turn, into one run root)")
    outputs_for(job)  # an output type that cannot be used is refused before anything is written
    scoring_for(job)  # and so is a [[score]] python scorer that does not import
    engine = engine_for(engine, job)  # chosen once, as a provider is: imported only then
    why = engine.refuses_options(policy=policy is not None,
                                 roles=roles is not None or role is not None)
    if why is not None:
        raise JobError(f"{job.path}: {why}")
    engine.check(job)
    job = engine.adjust_job(job, tasks)
    settings = settings_for(job)
    if policy is not None:
        settings = msgspec.structs.replace(
            settings, tool_policy=combine(policy, settings.tool_policy))
    if roles is not None or role is not None:
        settings = _with_roles(job, settings, roles, role)
    settings = engine.adjust(settings, job, tasks)
    tools = user_tools_for(job)
    provider = provider_for(job)
    root = Path(run_root) if run_root else job.run_root
    out = Path(output) if output else job.output(root)
    try:
        create_run_root(root, f"{started_by} {job.path}")
    except RunRootError as e:
        raise JobError(str(e)) from None
    import_source(root, settings.workspace)
    # the run's own checks: the run root held until the run ends (``hold``)
    held = hold(root) if manifest else None
    try:
        if manifest:
            check_manifest(root, job, tasks)
        mine = tasks if only is None else [t for t in tasks if t.id in only]
        provider = engine.attach(provider, root, job)
        runner = JobRunner(job, mine, root=root, output=out, provider=provider,
                           settings=settings, user_tools=tools,
                           provider_name=job.spec.provider.name, watch_sigint=watch_sigint,
                           supervisor=supervisor or Supervisor)
        runner.engine = engine
        engine.bind(provider, runner)
    except BaseException:
        if held is not None:
            os.close(held)
        raise
    runner.held = held
    return runner, provider
