"""``module:attr`` import paths, as job files, roles and ``--output`` name Python objects.

One resolver for every file that names code by import path — a job's ``[agent] tools``,
``[policy]`` and ``[provider] policy``, a role's ``tools``, an ``output`` type — so that a
reference means the same thing, and fails with the same words, wherever it is written
(decision 0342). The folder of the file that wrote the reference goes first on ``sys.path``, so
a module beside a job file is found without installing it.

The error says what went wrong and nothing of where: the caller knows the file and line and
prefixes them, in its own error class (``JobError``, ``RolesError``, ``OutputError``).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

__all__ = ["ImportPathError", "resolve"]


class ImportPathError(ValueError):
    """A reference that does not resolve: malformed, not importable, no such attribute, or not
    callable when a callable was asked for. One line, without the place it was written."""


def resolve(ref: str, base: Path, *, want_callable: bool = False) -> Any:
    """The object ``ref`` (``module:attr``, ``attr`` may be dotted) names, imported with
    ``base`` first on ``sys.path``. A module that raises anything while it loads is refused
    like one that is missing: the reference is the user's, so is the failure."""
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise ImportPathError(f"{ref!r} is not an import path of the form 'module:name'")
    folder = str(Path(base).resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        obj: Any = importlib.import_module(module)
    except Exception as e:  # an import error, or whatever the module raises as it loads
        raise ImportPathError(f"cannot import {module!r} ({type(e).__name__}: {e})") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImportPathError(f"{module!r} has no {attr!r}") from None
    if want_callable and not callable(obj):
        raise ImportPathError(f"{ref!r} is not callable")
    return obj
