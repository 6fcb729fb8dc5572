"""The Starlette app: routes, auth, body limits, errors, the OpenAPI document, the page.

Every route is declared once in ``ROUTES`` with its request and response Structs; the router
and ``/v1/openapi.json`` are both built from that table, so the document cannot drift from what
is served. Handlers that read logs run in a worker thread: a fold of a large log never stalls
the event loop that drives the agents."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Awaitable, Callable

import msgspec
import structlog
import trio
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from ...lineage.runroot import RunRootError, agent_dir, agent_source
from ...session.constants import GREP_TIMEOUT_S
from ...session.errors import LogRefused, Refusal, SessionError
from . import control as C
from . import files as F
from . import schema as S
from .auth import guard, is_open
from .events import BadEventId, parse_positions, stream
from ..delegation import MESSAGE_MAX_BYTES
from ..typed.load import OutputError
from .runs import Conflict, NotFound, Run
from .jobs import job_results, job_scores
from .transcript import LIMIT, MAX_LIMIT, transcript
from ...errors import ConfigError, UserError
from ..sandbox.spec import SandboxSettings
from ..workspace.handle import WorkspaceBusy

log = structlog.get_logger("mnemon.service")

MAX_BODY = 1 << 20  # bytes of JSON a request may carry

#: on every answer: the page's policy as a header too (a ``<meta>`` cannot say
#: ``frame-ancestors``: no other site frames the page to click its buttons), and no sniffing a
#: JSON or script answer into something else (decision 0323)
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'")
SECURITY_HEADERS = ((b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"no-referrer"))


class HTTPError(UserError):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = " ".join(message.split())[:500]  # one line


def _json(obj: Any, status: int = 200) -> Response:
    return Response(msgspec.json.encode(obj), status_code=status, media_type="application/json")


async def _body(request: Request, struct: type) -> Any:
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
        raise HTTPError(413, f"the body is larger than {MAX_BODY} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise HTTPError(413, f"the body is larger than {MAX_BODY} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks) or b"{}"
    try:
        return msgspec.json.decode(raw, type=struct)
    except msgspec.ValidationError as e:
        raise HTTPError(422, f"invalid request: {e}") from None
    except msgspec.DecodeError as e:
        raise HTTPError(400, f"malformed JSON: {e}") from None


@dataclass(frozen=True)
class Spec:
    method: str
    path: str
    name: str
    summary: str
    body: type | None = None
    out: type | None = None
    status: int = 200
    query: tuple[tuple[str, str, bool], ...] = ()  # (name, description, required)
    stream: bool = False
    media: tuple[str, ...] = ()  # an answer that is not JSON: its media types (raw bytes, a diff)


class Handlers:
    """The route handlers over one ``Run``."""

    def __init__(self, run: Run, *, version: str, provider: str | None, model: str | None):
        self.run = run
        self.version = version
        self.provider = provider
        self.model = model
        self._doors: dict[str, tuple[tuple[int, int], Any]] = {}
        self._door_lock = trio.Lock()

    # --------------------------------------------------------------- helpers

    def _aid(self, request: Request) -> str:
        aid = request.path_params["id"]
        if aid not in self.run.agent_ids():
            raise HTTPError(404, f"no agent {aid!r} in this run")
        return aid

    async def _door(self, aid: str):
        """The door of an agent: its live table where it runs here, else its log folded (once
        per size of the file) in a worker thread."""
        from ...session.door import Door

        sup = self.run.sup
        node = sup.agents.get(aid) if sup is not None else None
        if node is not None:
            return Door.of_agent(self.run.root, node.log, own=False)
        path = self.run.root / agent_source(aid)
        st = path.stat()
        key = (st.st_size, st.st_mtime_ns)
        async with self._door_lock:
            hit = self._doors.get(aid)
            if hit is not None and hit[0] == key:
                return hit[1]
            from ...lineage.view import open_door

            door = await trio.to_thread.run_sync(open_door, agent_dir(self.run.root, aid))
            self._doors[aid] = (key, door)
            return door

    # --------------------------------------------------------------- routes

    async def health(self, request: Request) -> Any:
        return S.Health(ok=True)

    async def run_info(self, request: Request) -> Any:
        return S.RunOut(run_root=str(self.run.root), read_only=self.run.read_only,
                        provider=self.provider, model=self.model,
                        agents=len(self.run.agent_ids()), version=self.version,
                        sandbox=None if self.run.read_only else msgspec.to_builtins(
                            self.run.settings.sandbox or SandboxSettings()),
                        workspace=self.run.settings.workspace is not None)

    async def list_agents(self, request: Request) -> Any:
        q = request.query_params
        after = q.get("after") or None
        try:
            limit = int(q["limit"]) if "limit" in q else None
        except ValueError:
            raise HTTPError(400, "limit is a whole number") from None
        if limit is not None and limit < 1:
            raise HTTPError(400, "limit is at least 1")
        views, nxt = await trio.to_thread.run_sync(functools.partial(
            self.run.views, after, limit, self.run.live()))
        return S.AgentList(agents=views, read_only=self.run.read_only, next=nxt)

    async def create_agent(self, request: Request) -> Any:
        body = await _body(request, S.AgentCreate)
        try:
            return self.run.start_root(body)
        except ConfigError as e:  # a workspace that cannot be used (not a directory, the run
            # root), a sandbox wider than the service's or without a workspace
            raise HTTPError(422, str(e)) from None

    async def get_agent(self, request: Request) -> Any:
        aid = self._aid(request)
        return await trio.to_thread.run_sync(functools.partial(
            self.run.view, aid, live=self.run.live()))

    async def steer(self, request: Request) -> Any:
        aid = self._aid(request)
        body = await _body(request, S.SteerIn)
        if not body.text.strip():
            raise HTTPError(422, "invalid request: a message may not be empty")
        size = len(body.text.encode("utf-8", "surrogatepass"))
        if size > MESSAGE_MAX_BYTES:
            raise HTTPError(422, f"invalid request: a message is at most {MESSAGE_MAX_BYTES} "
                            f"bytes — this one has {size}")
        return S.SteerOut(**self.run.steer(aid, body.text))

    async def prompt(self, request: Request) -> Any:
        aid = self._aid(request)
        body = await _body(request, S.PromptIn)
        return self.run.prompt(aid, body.prompt)

    async def clear(self, request: Request) -> Any:
        return self.run.clear(self._aid(request))

    async def rewind(self, request: Request) -> Any:
        aid = self._aid(request)
        body = await _body(request, S.RewindIn)
        return self.run.rewind(aid, body.to)

    async def cancel(self, request: Request) -> Any:
        return self.run.cancel(self._aid(request))

    async def fork(self, request: Request) -> Any:
        aid = self._aid(request)
        body = await _body(request, S.ForkIn)
        return self.run.fork(aid, body.task, body.kind)

    async def index(self, request: Request) -> Any:
        aid = self._aid(request)
        door = await self._door(aid)
        rows = await door.aindex() if door.seam is not None else await trio.to_thread.run_sync(door.index)
        turns = request.query_params.get("turns")
        if turns:
            keep = {t.id for t in door.select(turns)}
            rows = [r for r in rows if r["id"] in keep]
        return S.DoorRows(agent=aid, rows=rows)

    async def read(self, request: Request) -> Any:
        aid = self._aid(request)
        turns = request.query_params.get("turns")
        if not turns:
            raise HTTPError(400, "read needs ?turns= (ids and ranges, e.g. 3,5-9)")
        door = await self._door(aid)
        if door.seam is not None:
            rows = await door.aread(turns)
        else:
            rows = await trio.to_thread.run_sync(door.read, turns)
        return S.DoorRows(agent=aid, rows=rows)

    async def grep(self, request: Request) -> Any:
        aid = self._aid(request)
        q = request.query_params
        pattern = q.get("pattern")
        if not pattern:
            raise HTTPError(400, "grep needs ?pattern= (a regex)")
        try:
            timeout = float(q.get("timeout_s", GREP_TIMEOUT_S))
        except ValueError:
            raise HTTPError(400, "timeout_s must be a number of seconds") from None
        if not 0 < timeout <= 60:
            raise HTTPError(400, "timeout_s must be in (0, 60]")
        door = await self._door(aid)
        turns = q.get("turns") or None
        if door.seam is not None:
            out = await door.agrep(pattern, turns, timeout_s=timeout)
        else:
            out = await trio.to_thread.run_sync(
                functools.partial(door.grep, pattern, turns, timeout_s=timeout))
        return S.GrepOut(agent=aid, hits=out["hits"], total=out["total"])

    async def context(self, request: Request) -> Any:
        aid = self._aid(request)
        door = await self._door(aid)
        return await trio.to_thread.run_sync(_survey, aid, door.ctx)

    async def transcript(self, request: Request) -> Any:
        aid = self._aid(request)
        q = request.query_params
        try:
            after = int(q.get("after", "0"))
            limit = int(q.get("limit", str(LIMIT)))
        except ValueError:
            raise HTTPError(400, "after and limit are whole numbers") from None
        if after < 0 or not 0 < limit <= MAX_LIMIT:
            raise HTTPError(400, f"after is >= 0 and limit in 1..{MAX_LIMIT}")
        try:
            out = await trio.to_thread.run_sync(functools.partial(
                transcript, self.run.root / agent_source(aid), after=after, limit=limit))
        except ValueError as e:
            raise HTTPError(400, str(e)) from None
        return S.TranscriptOut(agent=aid, **out)

    async def tree(self, request: Request) -> Any:
        from ...lineage.tree import tree_json

        return S.TreeOut(tree=await trio.to_thread.run_sync(tree_json, self.run.root))

    async def cost(self, request: Request) -> Any:
        from ..costs import as_json, run_cost

        rows = await trio.to_thread.run_sync(
            functools.partial(run_cost, self.run.root, ttl=self.run.settings.cache_ttl))
        return S.CostOut(**as_json(rows))

    async def agent_events(self, request: Request) -> Any:
        aid = self._aid(request)
        return self._events(request, aid)

    async def run_events(self, request: Request) -> Any:
        return self._events(request, None)

    def _events(self, request: Request, aid: str | None) -> StreamingResponse:
        last = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
        try:
            positions = parse_positions(last, agent=aid)
            for a, off in positions.items():
                if a not in self.run.agent_ids():
                    raise BadEventId(f"Last-Event-ID names agent {a}, which this run does not have")
                if off > (self.run.root / agent_source(a)).stat().st_size:
                    raise BadEventId(f"Last-Event-ID position {off} is past the end of {a}'s log")
        except BadEventId as e:
            raise HTTPError(400, str(e)) from None
        follow = request.query_params.get("follow", "1") != "0"
        run = self.run

        async def gen():
            from .runs import Previews

            previews = Previews(aid)
            run.previews.add(previews)
            try:
                async for chunk in stream(run.hub, agent=aid, positions=positions,
                                          follow=follow, closing=lambda: run.closing,
                                          previews=previews if follow else None):
                    yield chunk
            finally:
                run.previews.discard(previews)

        return StreamingResponse(gen(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def list_approvals(self, request: Request) -> Any:
        return C.list_approvals(self.run)

    async def decide(self, request: Request) -> Any:
        aid = self._aid(request)
        body = await _body(request, C.DecisionIn)
        call_id = request.path_params["call_id"]
        try:
            return C.decide(self.run, aid, call_id, body)
        except NotFound:
            # this process's registry knows the requests its agents wait on; an agent that is
            # not running here (stopped, or recorded before this service started) may still
            # hold one in its log, which waits for a resume: that is a 409, not a 404
            door = await self._door(aid)
            C.refuse_recorded(aid, call_id, door.ctx.approvals.get(call_id))
            raise

    async def decide_in_job(self, request: Request) -> Any:
        body = await _body(request, C.DecisionIn)
        p = request.path_params
        return C.decide_in_job(self.run, p["id"], p["agent"], p["call_id"], body)

    async def resume(self, request: Request) -> Any:
        return C.resume(self.run, self._aid(request))

    async def workspace(self, request: Request) -> Any:
        aid = self._aid(request)
        turn = F.parse_turn(request.query_params.get("turn"))
        return await trio.to_thread.run_sync(F.listing, self.run.root, aid, turn)

    async def workspace_file(self, request: Request) -> Any:
        aid = self._aid(request)
        turn = F.parse_turn(request.query_params.get("turn"))
        data = await trio.to_thread.run_sync(F.content, self.run.root, aid,
                                             request.path_params["path"], turn)
        return Response(data, media_type=F.media_type(data))

    async def workspace_diff(self, request: Request) -> Any:
        aid = self._aid(request)
        q = request.query_params
        text = await trio.to_thread.run_sync(F.diff, self.run.root, aid, q.get("from"), q.get("to"))
        return Response(text.encode("utf-8"), media_type="text/x-diff; charset=utf-8")

    async def workspace_changes(self, request: Request) -> Any:
        aid = self._aid(request)
        return await trio.to_thread.run_sync(F.changes, self.run.root, aid)

    async def page(self, request: Request) -> Any:
        return Response(_static("index.html"), media_type="text/html; charset=utf-8")

    async def static(self, request: Request) -> Any:
        name = request.path_params["name"]
        types = {".js": "text/javascript", ".css": "text/css", ".txt": "text/plain"}
        kind = types.get(Path(name).suffix) if name in _static_names() else None
        if kind is None:  # (a name is looked up among the package's files, never opened)
            raise HTTPError(404, f"no static file {name!r}")
        return Response(_static(name), media_type=kind + "; charset=utf-8")

    async def favicon(self, request: Request) -> Any:
        # no icon: 204 and no token asked, so a browser's own request is not a 401 each load
        return Response(status_code=204, headers={"Cache-Control": "max-age=86400"})

    async def create_job(self, request: Request) -> Any:
        from .jobs import JobError

        if self.run.read_only:
            raise HTTPError(409, "this service is read-only: it runs no jobs")
        body = await _body(request, S.JobIn)
        try:
            return self.run.jobs.start(body).out()
        except JobError as e:
            raise HTTPError(422, str(e)) from None

    async def list_jobs(self, request: Request) -> Any:
        return S.JobList(jobs=[j.out() for j in self.run.jobs.jobs.values()])

    def _job(self, request: Request):
        jid = request.path_params["id"]
        job = self.run.jobs.jobs.get(jid)
        if job is None:
            raise HTTPError(404, f"no job {jid!r}")
        return job

    async def get_job(self, request: Request) -> Any:
        return self._job(request).out()

    async def job_results(self, request: Request) -> Any:
        job = self._job(request)
        return await trio.to_thread.run_sync(job_results, job)

    async def job_scores(self, request: Request) -> Any:
        job = self._job(request)
        return await trio.to_thread.run_sync(job_scores, job)

    async def cancel_job(self, request: Request) -> Any:
        job = self._job(request)
        if job.state != "running":
            raise HTTPError(409, f"job {job.id} is not running ({job.state})")
        job.scope.cancel()
        return job.out()

    async def openapi(self, request: Request) -> Any:
        return Response(openapi_bytes(self.version), media_type="application/json")


def _survey(aid: str, ctx) -> S.Survey:
    from ...session.survey import survey

    return S.Survey(agent=aid, **survey(ctx))


@functools.lru_cache(maxsize=1)
def _static_names() -> frozenset[str]:
    return frozenset(f.name for f in (resources.files(__package__) / "static").iterdir()
                     if f.is_file())


@functools.lru_cache(maxsize=None)
def _static(name: str) -> bytes:
    return (resources.files(__package__) / "static" / name).read_bytes()


_TURNS = ("turns", "ids and ranges, e.g. 3,5-9", False)
_TURN = ("turn", "the files as they stood after this turn's tools (default: the latest)", False)
ROUTES: tuple[Spec, ...] = (
    Spec("GET", "/v1/health", "health", "Liveness; the one API route without a token",
         out=S.Health),
    Spec("GET", "/v1/openapi.json", "openapi", "This document"),
    Spec("GET", "/v1/run", "run_info", "The run root served, its provider and mode", out=S.RunOut),
    Spec("GET", "/v1/agents", "list_agents", "Every agent of the run, in id order (paged with "
         "limit and after)", out=S.AgentList,
         query=(("limit", "at most this many agents (default: all)", False),
                ("after", "the agents after this id (a page's next)", False))),
    Spec("POST", "/v1/agents", "create_agent", "Start a root agent on a prompt",
         body=S.AgentCreate, out=S.AgentOut, status=201),
    Spec("GET", "/v1/agents/{id}", "get_agent", "One agent: state, reason, usage, cost, "
         "lineage, its caps beside its tree's spend, the messages sent to it, the tools it is in",
         out=S.AgentOut),
    Spec("POST", "/v1/agents/{id}/prompt", "prompt", "A new prompt to an ended agent",
         body=S.PromptIn, out=S.AgentOut, status=202),
    Spec("POST", "/v1/agents/{id}/clear", "clear", "/clear: withdraw every turn", out=S.AgentOut),
    Spec("POST", "/v1/agents/{id}/rewind", "rewind", "/rewind: withdraw turns after `to`",
         body=S.RewindIn, out=S.AgentOut),
    Spec("POST", "/v1/agents/{id}/cancel", "cancel", "Cancel a running agent and its descendants",
         out=S.AgentOut),
    Spec("POST", "/v1/agents/{id}/steer", "steer", "A message to a running agent, carried by "
         "its next request (recorded as Steering by user; docs/orchestrator.md, "
         "\"Delegation\"); an agent not running is a 409 naming its state",
         body=S.SteerIn, out=S.SteerOut),
    Spec("POST", "/v1/agents/{id}/fork", "fork", "Fork a child of a running agent",
         body=S.ForkIn, out=S.AgentOut, status=201),
    Spec("GET", "/v1/agents/{id}/index", "index", "The door: every turn, oldest first",
         out=S.DoorRows, query=(_TURNS,)),
    Spec("GET", "/v1/agents/{id}/read", "read", "The door: each named turn's own records",
         out=S.DoorRows, query=(("turns", "ids and ranges, e.g. 3,5-9", True),)),
    Spec("GET", "/v1/agents/{id}/grep", "grep", "The door: a regex over the transcript, per line",
         out=S.GrepOut, query=(("pattern", "a regex (the Python regex module's dialect)", True),
                               _TURNS, ("timeout_s", "cap on regex time, seconds", False))),
    Spec("GET", "/v1/agents/{id}/context", "context", "The survey of an agent's context",
         out=S.Survey),
    Spec("GET", "/v1/agents/{id}/transcript", "transcript", "An agent's log records in order "
         "from a byte offset, long strings clipped: the conversation as a person reads it",
         out=S.TranscriptOut, query=(("after", "a byte offset where a record starts (the "
                                      "previous answer's next); default 0", False),
                                     ("limit", f"records at most (default {LIMIT})", False))),
    Spec("GET", "/v1/agents/{id}/events", "agent_events", "One agent's events (SSE)",
         stream=True),
    Spec("GET", "/v1/events", "run_events", "The whole run's events (SSE)", stream=True),
    Spec("POST", "/v1/jobs", "create_job", "Run a job file (as `mnemon run`) in its own run root",
         body=S.JobIn, out=S.JobOut, status=202),
    Spec("GET", "/v1/jobs", "list_jobs", "The jobs this service runs, with their progress",
         out=S.JobList),
    Spec("GET", "/v1/jobs/{id}", "get_job", "One job's progress: tasks done, failed, running, "
         "cost, ETA", out=S.JobOut),
    Spec("GET", "/v1/jobs/{id}/results", "job_results", "A job's results as a table (typed "
         "outputs as columns) and its failed tasks with their reasons", out=S.JobResults),
    Spec("GET", "/v1/jobs/{id}/scores", "job_scores", "A job's scores (docs/scores.md): per "
         "scorer the mean, its standard error and 95 % interval, cost per correct answer; "
         "each task's scores", out=S.JobScores),
    Spec("POST", "/v1/jobs/{id}/cancel", "cancel_job", "Cancel a running job (it resumes when "
         "run again)", out=S.JobOut),
    Spec("GET", "/v1/approvals", "list_approvals", "The tool calls waiting for a decision "
         "(docs/policy.md)", out=C.ApprovalList),
    Spec("POST", "/v1/agents/{id}/approvals/{call_id}", "decide", "Approve (optionally with "
         "an edited input) or reject a waiting tool call", body=C.DecisionIn, out=C.DecisionOut),
    Spec("POST", "/v1/jobs/{id}/approvals/{agent}/{call_id}", "decide_in_job", "Decide a "
         "waiting tool call of a job's agent (a job whose on_ask is wait)", body=C.DecisionIn,
         out=C.DecisionOut),
    Spec("POST", "/v1/agents/{id}/resume", "resume", "Resume an agent a crash or a stop left "
         "unfinished, from its log", out=S.AgentOut, status=202),
    Spec("GET", "/v1/agents/{id}/workspace", "workspace", "An agent's files at a turn "
         "(docs/workspace.md): the snapshot, each file with its size, and every workspace "
         "record of its log", out=S.WorkspaceOut, query=(_TURN,)),
    Spec("GET", "/v1/agents/{id}/workspace/files/{path:path}", "workspace_file", "One file of "
         "an agent's workspace at a turn, its bytes as they were (text/plain when they decode "
         "as UTF-8)", query=(_TURN,), media=("text/plain", "application/octet-stream")),
    Spec("GET", "/v1/agents/{id}/workspace/diff", "workspace_diff", "The unified diff of an "
         "agent's files between two turns or snapshots (default: from its start to its "
         "latest)", media=("text/x-diff",),
         query=(("from", "a turn id, or a snapshot the agent's log names (default: its "
                 "start)", False),
                ("to", "a turn id, or a snapshot the agent's log names (default: its "
                 "latest)", False))),
    Spec("GET", "/v1/agents/{id}/workspace/changes", "workspace_changes", "Per recorded "
         "change of an agent's files (each turn whose tools changed them, a rewind, a "
         "resume), the paths changed", out=S.WorkspaceChanges),
    Spec("GET", "/v1/tree", "tree", "The lineage tree (as `mnemon tree --json`)", out=S.TreeOut),
    Spec("GET", "/v1/cost", "cost", "Tokens, cache and price (as `mnemon cost --json`)",
         out=S.CostOut),
)
PAGES: tuple[Spec, ...] = (
    Spec("GET", "/", "page", "The page: the run live"),
    Spec("GET", "/static/{name}", "static", "The page's script and style"),
    Spec("GET", "/favicon.ico", "favicon", "No icon (204), asked without a token"),
)


def _wrap(fn: Callable[[Request], Awaitable[Any]], spec: Spec):
    async def endpoint(request: Request) -> Response:
        try:
            out = await fn(request)
        except HTTPError as e:
            return _json(S.ErrorOut(error=e.message), e.status)
        except C.BadRequest as e:
            return _json(S.ErrorOut(error=str(e)), 400)
        except NotFound as e:
            return _json(S.ErrorOut(error=str(e)), 404)
        except OutputError as e:  # an output type that cannot be used
            return _json(S.ErrorOut(error=" ".join(str(e).split())), 422)
        except (Conflict, WorkspaceBusy) as e:  # busy: a directory another agent works in
            return _json(S.ErrorOut(error=" ".join(str(e).split())), 409)
        except LogRefused as e:
            return _json(S.ErrorOut(error=f"the log does not fold: {e}"), 500)
        except (Refusal, RunRootError) as e:
            return _json(S.ErrorOut(error=" ".join(str(e).split())), 409 if spec.method == "POST" else 400)
        except SessionError as e:
            return _json(S.ErrorOut(error=" ".join(str(e).split())), 500)
        except ClientDisconnect:
            raise  # (no one to answer)
        except Exception as e:  # noqa: BLE001 - a fault of ours: still one JSON line, logged
            log.exception("request failed", route=spec.name)
            return _json(S.ErrorOut(error=f"internal error ({type(e).__name__})"), 500)
        if isinstance(out, Response):
            return out
        return _json(out, spec.status)
    return endpoint


def create_app(run: Run, *, token: str, version: str = "0", provider: str | None = None,
               model: str | None = None):
    """The ASGI app serving ``run``, every route but the open ones behind ``token``."""
    h = Handlers(run, version=version, provider=provider, model=model)
    routes = [Route(s.path, _wrap(getattr(h, s.name), s), methods=[s.method], name=s.name)
              for s in (*ROUTES, *PAGES)]
    app = Starlette(routes=routes)

    async def not_found(request, exc):
        status = getattr(exc, "status_code", 404)
        msg = "no such route" if status == 404 else "method not allowed" if status == 405 else "error"
        return _json(S.ErrorOut(error=msg), status)

    app.add_exception_handler(404, not_found)
    app.add_exception_handler(405, not_found)
    return guard(app, token, open_path=is_open, headers=SECURITY_HEADERS)


@functools.lru_cache(maxsize=4)
def openapi_bytes(version: str) -> bytes:
    return msgspec.json.encode(openapi(version))


def doc_path(path: str) -> str:
    """A route's path as OpenAPI writes it: ``{path:path}`` (Starlette's convertor) → ``{path}``."""
    return re.sub(r"\{(\w{1,40}):\w{1,40}\}", r"{\1}", path)


def openapi(version: str) -> dict:
    """OpenAPI 3.1 for ``ROUTES``, the schemas generated from the Structs."""
    structs = sorted({t for s in ROUTES for t in (s.body, s.out) if t is not None} | {S.ErrorOut},
                     key=lambda t: t.__name__)
    (_, components) = msgspec.json.schema_components(structs,
                                                     ref_template="#/components/schemas/{name}")
    ref = lambda t: {"$ref": f"#/components/schemas/{t.__name__}"}  # noqa: E731
    err = {"description": "a one-line error", "content": {"application/json": {"schema": ref(S.ErrorOut)}}}
    paths: dict[str, dict] = {}
    for s in ROUTES:
        op: dict[str, Any] = {"operationId": s.name, "summary": s.summary, "responses": {}}
        params = []
        if "{id}" in s.path:
            params.append({"name": "id", "in": "path", "required": True,
                           "schema": {"type": "string"},
                           "description": "a job id" if "/jobs/" in s.path else "an agent id"})
        if "{agent}" in s.path:
            params.append({"name": "agent", "in": "path", "required": True,
                           "schema": {"type": "string"}, "description": "an agent id of the job"})
        if "{path:path}" in s.path:
            params.append({"name": "path", "in": "path", "required": True,
                           "schema": {"type": "string"},
                           "description": "a file's path in the workspace, relative to it"})
        if "{call_id}" in s.path:
            params.append({"name": "call_id", "in": "path", "required": True,
                           "schema": {"type": "string"}, "description": "a tool call's id"})
        for name, desc, required in s.query:
            params.append({"name": name, "in": "query", "required": required,
                           "description": desc, "schema": {"type": "string"}})
        if s.stream:
            params.append({"name": "Last-Event-ID", "in": "header", "required": False,
                           "schema": {"type": "string"},
                           "description": "resume after this event: <agent>:<offset>,…"})
        if params:
            op["parameters"] = params
        if s.body is not None:
            op["requestBody"] = {"required": True,
                                 "content": {"application/json": {"schema": ref(s.body)}}}
        if s.stream:
            op["responses"][str(s.status)] = {"description": "server-sent events",
                                              "content": {"text/event-stream": {"schema": {"type": "string"}}}}
        elif s.media:
            op["responses"][str(s.status)] = {"description": "OK", "content": {
                m: {"schema": {"type": "string"}} for m in s.media}}
        elif s.out is not None:
            op["responses"][str(s.status)] = {"description": "OK", "content": {
                "application/json": {"schema": ref(s.out)}}}
        else:
            op["responses"][str(s.status)] = {"description": "OK", "content": {
                "application/json": {"schema": {"type": "object"}}}}
        if s.path != "/v1/health":
            op["security"] = [{"bearer": []}]
            op["responses"]["401"] = err
        for code in (("400", "404", "409", "413", "422") if s.body or "{id}" in s.path else ()):
            op["responses"][code] = err
        paths.setdefault(doc_path(s.path), {})[s.method.lower()] = op
    return {"openapi": "3.1.0",
            "info": {"title": "mnemon", "version": version,
                     "description": "Multi-agent orchestration: agents, their transcripts and "
                                    "their events."},
            "paths": paths,
            "components": {"schemas": components,
                           "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}}}
