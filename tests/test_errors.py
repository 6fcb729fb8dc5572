"""One error root: every error mnemon raises to its caller is a ``MnemonError`` carrying the exit
code the CLI gives it, control flow stays apart, and the library builds settings from plain
values without the CLI (decision 0330, 0331)."""

from __future__ import annotations

import pickle

import pytest

import mnemon
from mnemon.errors import ConfigError, Failure, MnemonError, UserError


def _every_error_class():
    from mnemon.lineage.fork import ForkError
    from mnemon.lineage.runroot import RunRootError
    from mnemon.orchestrator.approvals import AlreadyDecided, BadDecision, UnknownApproval
    from mnemon.orchestrator.batch.journal import BatchJournalError as LedgerError
    from mnemon.orchestrator.chat.commands import ChatInputError
    from mnemon.orchestrator.costs import CostError
    from mnemon.orchestrator.extras import MissingExtra
    from mnemon.orchestrator.importers.model import TrajectoryFormatError
    from mnemon.orchestrator.jobs.spec import JobError
    from mnemon.orchestrator.mcp.config import McpConfigError
    from mnemon.orchestrator.mcp.door import DoorError
    from mnemon.orchestrator.policy import PolicyError
    from mnemon.orchestrator.roles.spec import RolesError
    from mnemon.orchestrator.service import jobs as service_jobs
    from mnemon.orchestrator.service.app import HTTPError
    from mnemon.orchestrator.service.auth import AuthConfigError
    from mnemon.orchestrator.service.control import BadRequest
    from mnemon.orchestrator.service.events import BadEventId
    from mnemon.orchestrator.service.listen import BindError
    from mnemon.orchestrator.service.runs import Conflict, NotFound
    from mnemon.orchestrator.tracing.runlogs import TraceError
    from mnemon.orchestrator.tracing.send import SendError
    from mnemon.orchestrator.tracing.ship import ConfigError as TraceConfigError
    from mnemon.orchestrator.typed.load import OutputError
    from mnemon.providers.errors import ProviderConfigError, ProviderError, RateLimited
    from mnemon.providers.typed.instance import NoInstance
    from mnemon.providers.typed.schema import SchemaError
    from mnemon.session.errors import LogRefused, Refusal, SessionError
    from mnemon.session.runaway import RunawayPattern

    two = [SessionError, Refusal, LogRefused, RunRootError, ForkError, ProviderConfigError,
           AlreadyDecided, BadDecision, UnknownApproval, ChatInputError, CostError, MissingExtra,
           TrajectoryFormatError, JobError, McpConfigError, DoorError, PolicyError, RolesError,
           service_jobs.JobError, HTTPError, AuthConfigError, BadRequest, BadEventId, BindError,
           Conflict, NotFound, TraceError, TraceConfigError, OutputError, NoInstance,
           SchemaError, RunawayPattern]
    one = [ProviderError, RateLimited, LedgerError, SendError]
    return two, one


def test_each_error_carries_the_exit_code_the_cli_gives_it():
    two, one = _every_error_class()
    for cls in two:
        assert issubclass(cls, UserError) and cls.exit_code == 2, cls
    for cls in one:
        assert issubclass(cls, Failure) and cls.exit_code == 1, cls
    assert mnemon.MnemonError is MnemonError


def test_older_bases_are_kept():
    from mnemon.orchestrator.extras import MissingExtra
    from mnemon.orchestrator.policy import PolicyError
    from mnemon.providers.errors import ProviderConfigError, ProviderError

    assert issubclass(PolicyError, ValueError) and issubclass(MissingExtra, ImportError)
    assert issubclass(ProviderConfigError, ProviderError)
    assert issubclass(ProviderConfigError, ConfigError) and ProviderConfigError.exit_code == 2


def test_control_flow_stays_apart():
    from mnemon.orchestrator.loop import AgentDone
    from mnemon.orchestrator.usertools import ToolError, ToolInputError
    from mnemon.session.checkpoint.header import Stale

    for cls in (AgentDone, ToolError, ToolInputError, Stale):
        assert not issubclass(cls, MnemonError), cls


def test_the_cli_names_are_the_roots():
    from mnemon.orchestrator import cli

    assert cli.UserError is UserError and cli.Failure is Failure


@pytest.mark.parametrize(("kw", "text"), [
    ({}, "keep must be auto"),
    ({"file": "job.toml"}, "job.toml: keep must be auto"),
    ({"file": "job.toml", "line": 7, "key": "keep"}, "job.toml:7: keep must be auto"),
])
def test_a_config_error_renders_where_in_its_one_line(kw, text):
    e = ConfigError("keep must be auto", **kw)
    assert str(e) == text and e.exit_code == 2
    assert e.key == kw.get("key") and e.line == kw.get("line")
    again = pickle.loads(pickle.dumps(e))  # a Dask chunk's error comes back the same
    assert str(again) == text


def test_settings_from_plain_values():
    from mnemon.orchestrator.configure import settings_from

    s = settings_from({"provider": "anthropic", "keep": "0.4", "max_turns": 9, "system": None})
    assert s.model == "claude-sonnet-4-5" and s.context_window == 200_000
    assert s.keep == 0.4 and s.max_turns == 9 and s.system is None
    assert settings_from({}).keep == "auto"


@pytest.mark.parametrize(("values", "kw", "text", "key"), [
    ({"keep": "most"}, {}, "keep must be auto or a share between 0 and 1, not 'most'", "keep"),
    ({"keep": 2}, {"names": {"keep": "--keep"}}, "--keep must be auto or between 0 and 1, not 2",
     "keep"),
    ({"keep_floor_tokens": -1}, {"file": "j.toml"},
     "j.toml: keep_floor_tokens must be a number of tokens, not -1", "keep_floor_tokens"),
    ({"role": "lead"}, {"names": {"role": "--role", "roles_file": "--roles"}},
     "--role lead needs --roles FILE (the roles it names)", "role"),
    ({"colour": "red"}, {}, "unknown setting colour (not a field of Settings)", "colour"),
])
def test_settings_from_refuses_naming_the_key(values, kw, text, key):
    from mnemon.orchestrator.configure import settings_from

    with pytest.raises(ConfigError) as info:
        settings_from(values, **kw)
    assert str(info.value) == text and info.value.key == key


def test_the_model_windows_are_the_providers():
    assert mnemon.window_for("claude-opus-4") == 200_000
    assert mnemon.window_for("openrouter/gpt-4o-mini") == 128_000
    assert mnemon.window_for("my-model") is None and mnemon.window_for(None) is None
