"""The optional surfaces and the extra that installs each.

The core install is the engine (trio, httpx, blake3, msgspec, regex, structlog): running agents,
jobs, replays and reading transcripts. The service, MCP, chat, Dask, plots and the OpenTelemetry SDK bridge are extras, so a
library user does not get a web server, a terminal UI and a JWT stack for the engine alone. A
surface whose extra is missing is refused *before* anything is written, with one line naming the
install command — found with ``find_spec``, never by importing (an import is what costs).
"""

from __future__ import annotations

from importlib.util import find_spec

from ..errors import UserError

#: extra → the top-level modules it installs that mnemon imports
EXTRAS: dict[str, tuple[str, ...]] = {
    "serve": ("hypercorn", "starlette"),
    "mcp": ("mcp", "hypercorn"),
    "chat": ("prompt_toolkit", "rich"),
    "dask": ("distributed",),
    "plot": ("matplotlib",),
    # a dotted name where the distribution is a part of a namespace package (the name with
    # dots for dashes is the distribution's)
    "otel": ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"),
    # --provider bedrock signs with its own SigV4 and needs botocore only for the credential
    # chain beyond the environment; --provider vertex (Claude or Gemini) needs google-auth only
    # for Application Default Credentials
    "bedrock": ("botocore",),
    "vertex": ("google.auth",),
    # signed chain heads (session/chain.py imports it only when a key is given)
    "sign": ("cryptography",),
}


class MissingExtra(UserError, ImportError):
    """A surface asked for without its extra installed: the CLI answers it in one line, exit 2;
    from Python it is an ``ImportError`` whose message names the install command."""

    def __init__(self, extra: str, what: str) -> None:
        super().__init__(f"{what} needs the {extra} extra: pip install 'mnemon[{extra}]'")
        self.extra = extra


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that are not installed."""
    return [m for m in EXTRAS[extra] if _absent(m)]


def _absent(module: str) -> bool:
    try:
        return find_spec(module) is None
    except (ModuleNotFoundError, ValueError):  # a dotted name whose parent is not installed
        return True


def require(extra: str, what: str) -> None:
    """Refuse ``what`` (a command or a feature, as the user named it) unless ``extra`` is
    installed."""
    if missing(extra):
        raise MissingExtra(extra, what)
