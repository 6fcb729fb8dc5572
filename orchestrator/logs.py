"""structlog, configured once at entry: JSON lines to ``<run root>/mnemon.log``; with ``-v`` also
to stderr (console renderer on a terminal, JSON otherwise). Per-agent fields are bound through
``structlog.contextvars``, which Trio tasks inherit at spawn.

The level is ``info`` unless ``MNEMON_LOG_LEVEL`` says otherwise (``debug``, ``info``,
``warning``, ``error``). Per-turn events (each turn, each provider call) are ``debug``: the log
records hold all of it already, and a line per turn was a measurable part of a turn's cost.
Below the level an event is dropped before any processor runs (decision 0260)."""

from __future__ import annotations

import atexit
import logging
import os
import sys
from pathlib import Path
from typing import Any, TextIO

import msgspec
import structlog

from ..lineage.runroot import now_iso
from .terminal import shown


class _Tee:
    """Writes each event as a JSON line to the log file and, with ``-v``, to stderr — rendered
    for people when stderr is a terminal (its terminal controls escaped, ``terminal.shown``),
    as JSON otherwise."""

    def __init__(self, file: TextIO | None, echo: TextIO | None):
        self.file, self.echo = file, echo
        self.console = (structlog.dev.ConsoleRenderer(colors=False)
                        if echo is not None and echo.isatty() else None)

    def msg(self, message: str, event_dict: dict | None = None) -> None:
        if self.file is not None:  # buffered: flushed when full and at shutdown, not per line
            self.file.write(message + "\n")
        if self.echo is not None:
            if self.console is not None and event_dict is not None:
                # an event's fields may hold a model's text: a person reads this, escaped
                self.echo.write(shown(self.console(None, "", dict(event_dict))) + "\n")
            else:
                self.echo.write(message + "\n")

    log = debug = info = warning = warn = error = critical = exception = fatal = msg


_open: list[TextIO] = []
_flushed_at_exit = False  # ``flush`` registered with ``atexit``
_encode = msgspec.json.Encoder(enc_hook=str).encode  # a value JSON cannot hold is written as str


def _render(logger: Any, name: str, event_dict: dict) -> tuple[tuple, dict]:
    """JSON for the file (msgspec: several times cheaper than ``json.dumps`` per line); the
    event itself rides along for a terminal's console rendering."""
    return (_encode(event_dict).decode(),), {"event_dict": event_dict}


LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "error": logging.ERROR}


def level_from_env() -> int:
    """``MNEMON_LOG_LEVEL`` as a logging level; an unknown name is refused by name."""
    name = os.environ.get("MNEMON_LOG_LEVEL", "info").strip().lower()
    if name not in LEVELS:
        raise ValueError(f"MNEMON_LOG_LEVEL={name!r} is not one of {', '.join(LEVELS)}")
    return LEVELS[name]


DEBUG = True
"""Whether debug lines may be written: ``configure`` and ``quiet`` set it from the level. The
per-turn lines test it before building their fields, since a filtered ``log.debug`` through
structlog's lazy proxy still costs ~2 µs (and the fields more); True until configured, so an
unconfigured structlog decides as before."""


def configure(run_root: Path | None, *, verbose: bool = False, level: int | None = None,
              path: Path | None = None) -> None:
    """JSON lines to ``<run_root>/mnemon.log``, or to ``path`` (a Dask chunk's own file in
    ``mnemon.log.d``: one writer per file, decision 0254); none without either."""
    global DEBUG, _flushed_at_exit
    for f in _open:
        f.close()
    _open.clear()
    file = None
    if path is None and run_root is not None:
        path = Path(run_root) / "mnemon.log"
    if path is not None:
        file = open(path, "a", encoding="utf-8")
        if not _flushed_at_exit:  # written out at any exit, however the command ended
            atexit.register(flush)
            _flushed_at_exit = True
        _open.append(file)
    tee = _Tee(file, sys.stderr if verbose else None)
    if level is None:
        try:
            level = level_from_env()
        except ValueError as e:
            tee.msg(_encode({"event": "bad log level", "error": str(e),
                             "level": "warning"}).decode())
            level = logging.INFO
    DEBUG = level <= logging.DEBUG
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(level),
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _stamp,
            structlog.processors.dict_tracebacks,
            _render,
        ],
        logger_factory=lambda *a: tee,
        cache_logger_on_first_use=False,
    )


def _stamp(_logger: Any, _name: str, event_dict: dict) -> dict:
    """The same ISO-8601 UTC ``timestamp`` as ``structlog.processors.TimeStamper(fmt="iso",
    utc=True)``, at the records' cheaper clock (``now_iso``)."""
    event_dict["timestamp"] = now_iso()
    return event_dict


def _drop(_logger: Any, _name: str, _event: Any) -> Any:
    raise structlog.DropEvent


def quiet() -> None:
    """No output at all (tests and library use before configure)."""
    global DEBUG
    DEBUG = False
    structlog.configure(processors=[_drop], logger_factory=lambda *a: _Tee(None, None),
                        wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))


def flush() -> None:
    """Write out what the log file holds in its buffer (a run's end, a service's stop)."""
    for f in _open:
        f.flush()


def shutdown() -> None:
    """Close the log file and leave logging quiet: a later event in the same process (a test,
    a library caller, a Dask worker's next task) is dropped, never written to a closed file."""
    for f in _open:
        f.close()
    _open.clear()
    quiet()


def bind(**kw: Any) -> None:
    structlog.contextvars.bind_contextvars(**kw)


def unbind(*keys: str) -> None:
    structlog.contextvars.unbind_contextvars(*keys)
