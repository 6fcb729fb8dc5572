"""One TOML reader (``mnemon._toml``): a job file, a policy, a roles file, an MCP configuration
and a price table that are not TOML are refused with the same line — file, line, column and
what the parser found (decision 0343)."""

from __future__ import annotations

import pytest

from mnemon import _toml as toml

BAD = 'name = "ok"\nmodel = = 1\n'


def test_the_one_line_names_the_file_line_and_column(tmp_path):
    p = tmp_path / "x.toml"
    p.write_text(BAD)
    with pytest.raises(toml.TomlError) as e:
        toml.load(p)
    assert (e.value.path, e.value.line, e.value.column) == (str(p), 2, 9)
    assert str(e.value) == f"{p}: not valid TOML at line 2, column 9: invalid value"
    p.write_text('a = "unterminated')
    with pytest.raises(toml.TomlError, match=r"at line 1, column \d+: "):
        toml.load(p)
    p.write_bytes(b'a = 1\nb = "\xff"\n')
    with pytest.raises(toml.TomlError) as e:
        toml.load(p)
    assert str(e.value) == f"{p}: not valid TOML at line 2, column 6: not UTF-8 (byte 0xff)"
    p.write_text('[t]\nk = 1\n')
    assert toml.load(p) == {"t": {"k": 1}}
    with pytest.raises(OSError):
        toml.load(tmp_path / "missing.toml")


def test_every_reader_of_toml_says_it_the_same_way(tmp_path):
    from mnemon.orchestrator.jobs.spec import JobError, load_job
    from mnemon.orchestrator.policy import PolicyError, load_policy
    from mnemon.orchestrator.roles.load import load_roles
    from mnemon.orchestrator.roles.spec import RolesError
    from mnemon.providers.prices import load_prices

    p = tmp_path / "bad.toml"
    p.write_text(BAD)
    line = f"{p}: not valid TOML at line 2, column 9: invalid value"
    for load, error in [(load_job, JobError), (load_policy, PolicyError), (load_roles, RolesError),
                        (load_prices, ValueError)]:
        with pytest.raises(error) as e:
            load(p)
        assert str(e.value).endswith(line) and "\n" not in str(e.value), load.__name__


def test_an_mcp_configuration_says_it_the_same_way(tmp_path):
    pytest.importorskip("mcp")
    from mnemon.orchestrator.mcp.config import McpConfigError, load_config

    p = tmp_path / "servers.toml"
    p.write_text(BAD)
    with pytest.raises(McpConfigError) as e:
        load_config(p)
    assert str(e.value) == f"{p}: not valid TOML at line 2, column 9: invalid value"
