"""The sandbox's settings: read from a table with one line naming a bad key, and narrowed from
parent to child — a child never gets wider than its parent."""

from __future__ import annotations

import msgspec
import pytest

from mnemon.errors import ConfigError
from mnemon.orchestrator.sandbox import SandboxSettings, narrowed, parse_sandbox
from mnemon.orchestrator.settings import Settings


def test_the_defaults_confine():
    s = SandboxSettings()
    assert (s.kind, s.network, s.timeout_s, s.max_timeout_s, s.memory_mb, s.processes,
            s.cpu_s, s.output_bytes, s.read_only, s.env) == (
        "bwrap", False, 120.0, 3600.0, 2048, 256, None, 65536, (), ())


def test_a_table_is_read():
    s = parse_sandbox({"kind": "none", "network": True, "timeout_s": 30, "memory_mb": 512,
                       "processes": 64, "cpu_s": 10, "output_bytes": 4096,
                       "read_only": ["/opt/tools"], "env": ["PIP_INDEX_URL"]})
    assert s == SandboxSettings(kind="none", network=True, timeout_s=30.0, memory_mb=512,
                                processes=64, cpu_s=10.0, output_bytes=4096,
                                read_only=("/opt/tools",), env=("PIP_INDEX_URL",))
    assert isinstance(s.timeout_s, float)


@pytest.mark.parametrize("table, said", [
    ({"kind": "docker"}, "sandbox.kind must be one of bwrap, none, not 'docker'"),
    ({"network": "yes"}, "sandbox.network must be true or false"),
    ({"timeout_s": "1m"}, "sandbox.timeout_s must be a number of seconds"),
    ({"timeout_s": 0}, "sandbox.timeout_s must be seconds between 0 and"),
    ({"timeout_s": 7200}, "sandbox.timeout_s (7200) must not exceed max_timeout_s (3600)"),
    ({"memory_mb": 1.5}, "sandbox.memory_mb must be a whole number"),
    ({"memory_mb": 4}, "sandbox.memory_mb must be at least 16"),
    ({"processes": True}, "sandbox.processes must be a whole number"),
    ({"output_bytes": 10}, "sandbox.output_bytes must be at least 1024"),
    ({"read_only": "/opt"}, "sandbox.read_only must be a list of strings"),
    ({"read_only": ["opt"]}, "sandbox.read_only must hold absolute paths"),
    ({"read_only": ["/"]}, "sandbox.read_only cannot show '/'"),
    ({"read_only": ["/proc/1"]}, "sandbox.read_only cannot show '/proc/1'"),
    ({"read_only": ["/workspace"]}, "sandbox.read_only cannot show '/workspace'"),
    ({"env": ["A B"]}, "sandbox.env must hold variable names"),
    ({"env": ["PATH"]}, "sandbox.env cannot pass on PATH"),
    ({"netwrok": False}, "sandbox.netwrok is not a sandbox setting"),
])
def test_a_bad_table_is_one_line_naming_the_key(table, said):
    with pytest.raises(ConfigError) as e:
        parse_sandbox(table, file="job.toml")
    msg = str(e.value)
    assert msg.startswith("job.toml: " + said) and "\n" not in msg
    assert e.value.key == said.split()[0]
    assert e.value.exit_code == 2


def test_a_role_names_its_own_table():
    with pytest.raises(ConfigError, match=r"^roles\.coder\.sandbox\.processes must be"):
        parse_sandbox({"processes": "many"}, where="roles.coder.sandbox")
    with pytest.raises(ConfigError, match="sandbox must be a table, not str"):
        parse_sandbox("bwrap")


def test_json_decodes_into_checked_settings():
    """``POST /v1/agents`` carries ``"sandbox"`` as JSON: msgspec runs the same checks."""
    s = msgspec.json.decode(b'{"sandbox": {"network": true, "memory_mb": 256}}', type=Settings)
    assert s.sandbox == SandboxSettings(network=True, memory_mb=256)
    with pytest.raises(msgspec.ValidationError, match="memory_mb must be at least 16"):
        msgspec.json.decode(b'{"sandbox": {"memory_mb": 1}}', type=Settings)
    assert msgspec.json.decode(msgspec.json.encode(s), type=Settings) == s


class TestNarrowed:
    def test_a_child_cannot_turn_the_network_on_or_the_sandbox_off(self):
        parent = SandboxSettings()
        child = SandboxSettings(kind="none", network=True)
        got = narrowed(parent, child)
        assert got is not None and (got.kind, got.network) == ("bwrap", False)

    def test_each_limit_is_the_smaller(self):
        parent = SandboxSettings(timeout_s=60, max_timeout_s=600, memory_mb=512, processes=100,
                                 cpu_s=30, output_bytes=8192)
        child = SandboxSettings(timeout_s=300, max_timeout_s=3600, memory_mb=4096, processes=50,
                                output_bytes=65536)
        got = narrowed(parent, child)
        assert got == SandboxSettings(timeout_s=60, max_timeout_s=600, memory_mb=512,
                                      processes=50, cpu_s=30, output_bytes=8192)

    def test_a_child_keeps_what_it_narrows(self):
        parent = SandboxSettings(kind="none", network=True, read_only=("/opt", "/srv/data"),
                                 env=("A", "B"))
        child = SandboxSettings(kind="none", network=True,
                                read_only=("/opt/tools", "/etc", "/srv/data/../../etc",
                                           "/srv/data"),
                                env=("B", "C"), timeout_s=10)
        got = narrowed(parent, child)
        assert got == SandboxSettings(kind="none", network=True,
                                      read_only=("/opt/tools", "/srv/data"), env=("B",),
                                      timeout_s=10)
        assert narrowed(parent, SandboxSettings()) == SandboxSettings()

    def test_none_takes_the_other(self):
        s = SandboxSettings(network=True)
        assert narrowed(None, s) is s and narrowed(s, None) is s and narrowed(None, None) is None

    def test_the_timeout_keeps_under_the_narrowed_cap(self):
        got = narrowed(SandboxSettings(timeout_s=100, max_timeout_s=100),
                       SandboxSettings(timeout_s=120, max_timeout_s=3600))
        assert got is not None and (got.timeout_s, got.max_timeout_s) == (100, 100)


class TestParseNarrowing:
    """``parse_narrowing``: a table read over its parent, refused where it would widen it."""

    PARENT = SandboxSettings(memory_mb=512, max_timeout_s=600, timeout_s=60,
                             read_only=("/opt",), env=("PIP_INDEX_URL",))

    def test_keys_left_out_are_the_parents_not_the_defaults(self):
        from mnemon.orchestrator.sandbox import parse_narrowing

        got = parse_narrowing(self.PARENT, {"processes": 32})
        assert got == msgspec.structs.replace(self.PARENT, processes=32)
        assert parse_narrowing(None, {}) == SandboxSettings()
        # a lower cap lowers the default wall time with it
        got = parse_narrowing(SandboxSettings(), {"max_timeout_s": 30})
        assert (got.timeout_s, got.max_timeout_s) == (30, 30)
        got = parse_narrowing(self.PARENT, {"read_only": ["/opt/tools"], "env": []})
        assert got.read_only == ("/opt/tools",) and got.env == ()

    @pytest.mark.parametrize("table, line", [
        ({"network": True}, "sandbox.network true is wider than the parent (network = false)"),
        ({"kind": "none"}, 'sandbox.kind "none" is wider than the parent (kind = "bwrap")'),
        ({"memory_mb": 513}, "sandbox.memory_mb 513 is wider than the parent (memory_mb = 512)"),
        ({"cpu_s": 5000}, None),  # the parent's cpu_s is unset: the wall time, 60 s
        ({"timeout_s": 61}, "sandbox.timeout_s 61 is wider than the parent (timeout_s = 60)"),
        ({"read_only": ["/opt", "/srv"]},
         "sandbox.read_only '/srv' is not within the read_only of the parent ('/opt')"),
        ({"env": ["AWS_SECRET_ACCESS_KEY"]},
         "sandbox.env 'AWS_SECRET_ACCESS_KEY' is not within the env of the parent "
         "('PIP_INDEX_URL')"),
    ])
    def test_a_wider_ask_is_one_line_naming_the_key(self, table, line):
        from mnemon.orchestrator.sandbox import SandboxConfigError, parse_narrowing

        if line is None:  # narrowed keeps an unset parent's cpu_s as the child's: allowed
            assert parse_narrowing(self.PARENT, table).cpu_s == 5000
            return
        with pytest.raises(SandboxConfigError) as e:
            parse_narrowing(self.PARENT, table, over="the parent", file=None)
        assert str(e.value).startswith(line) and "\n" not in str(e.value)
        assert e.value.key == f"sandbox.{next(iter(table))}"

    def test_a_bad_table_is_refused_as_parse_sandbox_refuses_it(self):
        from mnemon.orchestrator.sandbox import SandboxConfigError, parse_narrowing

        for table, start in (([], "sandbox must be an object"),
                             ({"nope": 1}, "sandbox.nope is not a sandbox setting"),
                             ({"network": "yes"}, "sandbox.network must be true or false")):
            with pytest.raises(SandboxConfigError) as e:
                parse_narrowing(self.PARENT, table)
            assert str(e.value).startswith(start), str(e.value)
