"""Tool policies: which tool calls an agent may make, may not make, or must ask a person about.

A policy is an ordered list of rules and a default; the first rule that matches a call decides
(docs/policy.md)::

    default = "allow"                 # allow | deny | ask | ask_parent, for calls no rule matches
    ask_timeout = 600                 # optional: seconds an ask waits before it is a rejection
    [[rule]]
    tool = "fs__write_*"              # a glob over tool names (built-in, user, MCP "<server>__<tool>")
    when = { path = "^/etc/" }        # optional: a regex per top-level argument, all must match
    action = "deny"                   # allow | deny | ask | ask_parent
    reason = "no writes under /etc"   # shown to the model (deny) or to the person (ask)

Pure: no I/O but ``load_policy`` reading its one file. A policy is judged whole before anything
runs — a malformed one is a ``PolicyError`` naming the file and the rule — and every ``when``
regex is probed at load for runaway backtracking (refused), then bounded at match time (a match
that runs out of time fails closed: the call is denied, naming the rule).

Children only narrow: ``combine(parent, child)`` answers, for every call, the stricter of the
two verdicts (deny > ask > allow), so a call the parent denies or asks about is never allowed
below it — whatever the child's own rules say.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .. import _toml as toml
from ..session.records import compact
from ..session.runaway import (MATCH_TIMEOUT_S, PATTERN_MAX_CHARS, PROBE_TIMEOUT_S,
                               RunawayPattern, compile_bounded, search)

from ..errors import ConfigError

__all__ = ["ACTIONS", "PolicyError", "Rule", "ToolPolicy", "Verdict", "combine", "load_policy",
           "parse_policy", "policy_from_record", "policy_record", "says_ask_parent", "strictest"]

ACTIONS = ("allow", "ask", "deny", "ask_parent")
# ``ask_parent`` (the agent's parent decides; a root's is an ``ask``) is stricter than allow and
# laxer than ask: a person outranks an agent (decision 0443)
_RANK = {"allow": 0, "ask_parent": 1, "ask": 2, "deny": 3}

# PATTERN_MAX_CHARS, PROBE_TIMEOUT_S, MATCH_TIMEOUT_S: the bounds of ``session.runaway``
_RULE_KEYS = {"tool", "when", "action", "reason"}
_TOP_KEYS = {"default", "rule", "ask_timeout"}


class PolicyError(ConfigError, ValueError):
    """A policy that cannot be used: the message is one line naming the file and the rule."""


@dataclass(frozen=True)
class Rule:
    """One rule: ``tool`` glob, ``when`` (argument → compiled regex), ``action``, ``reason``;
    ``name`` says where it was written (``policy.toml rule 2``), for the log and the person."""

    tool: str
    action: str
    reason: str | None = None
    when: tuple[tuple[str, Any], ...] = ()
    name: str = ""

    def matches(self, tool: str, args: Any) -> bool:
        """Whether the rule applies to a call; raises ``TimeoutError`` when a ``when`` regex
        runs past ``MATCH_TIMEOUT_S``."""
        if not fnmatch.fnmatchcase(tool, self.tool):
            return False
        if not self.when:
            return True
        if not isinstance(args, dict):
            return False  # a cut-off input (not an object) is never run anyway
        for arg, rx in self.when:
            if arg not in args:
                return False
            value = args[arg]
            text = value if isinstance(value, str) else compact(value).decode("utf-8")
            if not search(rx, text, MATCH_TIMEOUT_S):
                return False
        return True


@dataclass(frozen=True)
class Verdict:
    """What a policy says of one call: ``action``, the ``reason`` to show, the ``rule`` that
    decided (its name, or ``default``)."""

    action: str
    reason: str | None = None
    rule: str | None = None

    def text(self, tool: str) -> str:
        """The refusal the model reads for a denied call: the tool, the rule, the reason."""
        why = f": {self.reason}" if self.reason else ""
        return f"the tool call {tool} was denied by the policy ({self.rule}){why}"


@dataclass(frozen=True)
class ToolPolicy:
    """An ordered rule list and its default; ``within``: the policies it narrows (a parent's,
    outermost first), each of which must also allow a call for it to be allowed."""

    default: str = "allow"
    rules: tuple[Rule, ...] = ()
    source: str = "policy"
    ask_timeout_s: float | None = None
    within: tuple["ToolPolicy", ...] = field(default=(), compare=False)

    def own(self, tool: str, args: Any) -> Verdict:
        """This policy's own verdict, first matching rule or the default."""
        for rule in self.rules:
            try:
                hit = rule.matches(tool, args)
            except TimeoutError:
                return Verdict("deny", f"the policy could not judge this call in time "
                               f"({rule.name}'s pattern ran longer than {MATCH_TIMEOUT_S:g} s)",
                               rule.name)
            if hit:
                return Verdict(rule.action, rule.reason, rule.name)
        return Verdict(self.default, None, f"{self.source} default")

    def matches_text(self, tool: str) -> bool:
        """Whether judging a call of ``tool`` may run a ``when`` regex (of this policy or one
        it narrows): such a call is judged in a worker thread (``gate``), the others here."""
        return any(r.when and fnmatch.fnmatchcase(tool, r.tool)
                   for p in (*self.within, self) for r in p.rules)

    def decide(self, tool: str, args: Any) -> Verdict:
        """The verdict on a call: the strictest of this policy's and every policy it narrows."""
        return strictest([p.own(tool, args) for p in (*self.within, self)])

    @property
    def timeout_s(self) -> float | None:
        """The shortest ``ask_timeout`` of this policy and those it narrows."""
        ts = [p.ask_timeout_s for p in (*self.within, self) if p.ask_timeout_s is not None]
        return min(ts) if ts else None


def says_ask_parent(policy: "ToolPolicy | None") -> bool:
    """Whether a policy (or one it narrows) can answer ``ask_parent``: its default or a rule.
    The run offers ``approvals_decide`` only where one can (``tools.definitions``)."""
    if policy is None:
        return False
    return any(p.default == "ask_parent" or any(r.action == "ask_parent" for r in p.rules)
               for p in (*policy.within, policy))


def strictest(verdicts: Iterable[Verdict]) -> Verdict:
    """The strictest verdict (deny > ask > allow); among equals, the first (the outermost)."""
    best: Verdict | None = None
    for v in verdicts:
        if best is None or _RANK[v.action] > _RANK[best.action]:
            best = v
    return best if best is not None else Verdict("allow")


def combine(parent: ToolPolicy | None, child: ToolPolicy | None) -> ToolPolicy | None:
    """A child's effective policy: its own narrowed by its parent's (either may be None)."""
    if parent is None:
        return child
    if child is None or child is parent:
        return parent
    outer = (*parent.within, parent)
    if any(p is child for p in outer):
        return parent
    return ToolPolicy(child.default, child.rules, child.source, child.ask_timeout_s,
                      within=(*outer, *[p for p in child.within if all(p is not q for q in outer)]))


# --------------------------------------------------------------------------- the record


def policy_record(policy: ToolPolicy) -> list[dict[str, Any]]:
    """An effective policy as ``SessionStarted.policy`` records it (docs/format.md): its
    layers, outermost first, each ``{source, default, rules, ask_timeout?}``, a rule
    ``{tool, action, name, reason?, when?}`` with ``when`` as pattern text. Written when an
    agent starts, so that whatever process reopens it judges its calls as they were judged
    (decision 0305), with or without the roles and policy files it was started under."""
    out = []
    for p in (*policy.within, policy):
        layer: dict[str, Any] = {"source": p.source, "default": p.default, "rules": [
            _rule_record(r) for r in p.rules]}
        if p.ask_timeout_s is not None:
            layer["ask_timeout"] = p.ask_timeout_s
        out.append(layer)
    return out


def _rule_record(r: Rule) -> dict[str, Any]:
    d: dict[str, Any] = {"tool": r.tool, "action": r.action, "name": r.name}
    if r.reason is not None:
        d["reason"] = r.reason
    if r.when:
        d["when"] = {arg: rx.pattern for arg, rx in r.when}
    return d


def policy_from_record(layers: Any, where: str) -> ToolPolicy | None:
    """The policy ``policy_record`` wrote, rebuilt layer by layer (each judged as a policy
    file is, its patterns probed again; ``[]``: none was in force); ``PolicyError`` naming
    ``where`` for one that is not in that shape — a damaged record is never read as no
    policy."""
    if not isinstance(layers, list):
        raise PolicyError(f"{where}: a recorded policy is a list of layers")
    out: ToolPolicy | None = None
    for i, layer in enumerate(layers, 1):
        if not isinstance(layer, dict) or not isinstance(layer.get("source"), str):
            raise PolicyError(f"{where}: recorded policy layer {i} is not a policy")
        rules = layer.get("rules", [])
        if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
            raise PolicyError(f"{where}: recorded policy layer {i}: rules are a list of tables")
        table = {k: layer[k] for k in ("default", "ask_timeout") if k in layer}
        table["rule"] = [{k: v for k, v in r.items() if k != "name"} for r in rules]
        try:
            p = parse_policy(table, layer["source"])
        except PolicyError as e:
            raise PolicyError(f"{where}: recorded {e}") from None
        names = [r.get("name") for r in rules]
        if all(isinstance(n, str) and n for n in names):  # as the live agent named them
            p = ToolPolicy(p.default, tuple(
                Rule(r.tool, r.action, r.reason, r.when, n) for r, n in zip(p.rules, names)),
                p.source, p.ask_timeout_s)
        out = combine(out, p)
    return out


# --------------------------------------------------------------------------- loading


def load_policy(path: str | Path) -> ToolPolicy:
    """Read and judge a policy file; ``PolicyError`` (one line naming the file) otherwise."""
    p = Path(path)
    try:
        data = toml.load(p)
    except OSError as e:
        raise PolicyError(f"policy {p}: cannot be read ({e.strerror or e})") from None
    except toml.TomlError as e:
        raise PolicyError(f"policy {e}") from None
    return parse_policy(data, str(p))


def parse_policy(data: Any, source: str) -> ToolPolicy:
    """A policy from its TOML shape (a job's inline ``[policy]`` too); ``source`` names it in
    every message and rule name."""
    if not isinstance(data, dict):
        raise PolicyError(f"policy {source}: a table of default and [[rule]] entries")
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise PolicyError(f"policy {source}: unknown key {unknown[0]!r} (known: default, "
                          "ask_timeout, rule)")
    default = data.get("default", "allow")
    if default not in ACTIONS:
        raise PolicyError(f"policy {source}: default must be allow, deny, ask or ask_parent, "
                          f"not {default!r}")
    timeout = data.get("ask_timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not timeout > 0):
        raise PolicyError(f"policy {source}: ask_timeout must be a positive number of seconds, "
                          f"not {timeout!r}")
    raw = data.get("rule", [])
    if not isinstance(raw, list):
        raise PolicyError(f"policy {source}: rules are [[rule]] tables")
    rules = tuple(_rule(r, source, i) for i, r in enumerate(raw, 1))
    return ToolPolicy(default, rules, source, float(timeout) if timeout is not None else None)


def _rule(r: Any, source: str, n: int) -> Rule:
    name = f"{source} rule {n}"
    if not isinstance(r, dict):
        raise PolicyError(f"policy {name}: a rule is a table")
    unknown = sorted(set(r) - _RULE_KEYS)
    if unknown:
        raise PolicyError(f"policy {name}: unknown key {unknown[0]!r} (known: tool, when, "
                          "action, reason)")
    tool = r.get("tool")
    if not isinstance(tool, str) or not tool:
        raise PolicyError(f"policy {name}: tool must be a glob over tool names, such as "
                          "\"fs__write_*\"")
    action = r.get("action")
    if action not in ACTIONS:
        raise PolicyError(f"policy {name}: action must be allow, deny, ask or ask_parent, "
                          f"not {action!r}")
    reason = r.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise PolicyError(f"policy {name}: reason must be a string")
    when = r.get("when", {})
    if not isinstance(when, dict):
        raise PolicyError(f"policy {name}: when is a table of argument = regex")
    compiled = []
    for arg, pattern in when.items():
        if not isinstance(pattern, str):
            raise PolicyError(f"policy {name}: when.{arg} must be a regex string")
        compiled.append((arg, bounded_regex(pattern, f"policy {name}: when.{arg}")))
    return Rule(tool=tool, action=action, reason=reason, when=tuple(compiled), name=name)


def bounded_regex(pattern: str, where: str) -> Any:
    """Compile ``pattern`` (the ``regex`` module's dialect, as the door's grep) and refuse it
    (``PolicyError`` naming ``where``) when it could run away: too long, a repetition nested in
    another that can take what follows it, or slower than PROBE_TIMEOUT_S on a probe built from
    the pattern (``session.runaway``, decision 0309)."""
    try:
        return compile_bounded(pattern)
    except RunawayPattern as e:
        raise PolicyError(f"{where}: {e}") from None
