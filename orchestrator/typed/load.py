"""Where an output type comes from: a JSON Schema file, a dict, or a Python type (a msgspec
``Struct``, a dataclass, a ``TypedDict`` — anything ``msgspec.json.schema`` describes), given
as the object itself or as ``module:Type``; and the check, per provider, that the provider can
ask for it. Every refusal is an ``OutputError`` of one line naming the file (or the import
path) and the reason, raised before anything runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from ...providers.typed import (OUTPUT_RETRIES, OutputType, SchemaError, StrictError)
from ...errors import ConfigError
from ..importpath import ImportPathError, resolve

__all__ = ["OutputError", "as_output_type", "load_output", "from_python", "check_for"]


class OutputError(ConfigError, ValueError):
    """An output type that cannot be used: one line naming where it came from and why."""


def from_python(obj: Any, *, retries: int = OUTPUT_RETRIES, where: str | None = None
                ) -> OutputType:
    """An output type from a Python type (its JSON Schema, by ``msgspec.json.schema``; named
    after the type) or from a schema given as a dict."""
    label = where or (getattr(obj, "__name__", None) or "the output type")
    if isinstance(obj, OutputType):
        return obj
    if isinstance(obj, dict):
        try:
            return OutputType(obj, retries=retries)
        except SchemaError as e:
            raise OutputError(f"{label}: {e}") from None
    if not isinstance(obj, type):
        raise OutputError(f"{label}: {obj!r} is not a type (give a msgspec Struct, a dataclass, "
                          "a TypedDict or a JSON Schema)")
    try:
        schema = msgspec.json.schema(obj)
    except (TypeError, ValueError) as e:
        raise OutputError(f"{label}: {obj.__name__} has no JSON Schema ({e})") from None
    try:
        return OutputType(schema, name=obj.__name__, retries=retries)
    except SchemaError as e:
        raise OutputError(f"{label}: {e}") from None


def load_output(ref: str, *, base: Path | None = None, retries: int = OUTPUT_RETRIES,
                where: str | None = None) -> OutputType:
    """``ref`` is a JSON Schema file (a path; relative to ``base``) or ``module:Type`` (imported
    with ``base`` first on ``sys.path``). ``where`` prefixes messages (a job file's line)."""
    base = base or Path.cwd()
    path = Path(ref).expanduser()
    if not path.is_absolute():
        path = base / path
    module, sep, attr = ref.partition(":")
    if path.suffix.lower() == ".json" or path.exists() or not sep:
        label = f"{where}: {path}" if where else str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise OutputError(f"{label}: {e.strerror or e}") from None
        try:
            schema = json.loads(text)
        except ValueError as e:
            raise OutputError(f"{label}: not JSON ({e})") from None
        try:
            title = schema.get("title") if isinstance(schema, dict) else None
            return OutputType(schema, name=title if isinstance(title, str) else path.stem,
                              retries=retries)
        except SchemaError as e:
            raise OutputError(f"{label}: not a usable JSON Schema: {e}") from None
    label = f"{where}: {ref}" if where else ref
    if not module or not attr:
        raise OutputError(f"{label}: {ref!r} is not a file or an import path 'module:Type'")
    try:
        obj = resolve(ref, base)
    except ImportPathError as e:
        raise OutputError(f"{label}: {e}") from None
    return from_python(obj, retries=retries, where=label)


def as_output_type(value: Any, *, retries: int | None = None) -> OutputType | None:
    """What ``Supervisor.ask``/``new_root``/``new_child`` and the synod take as ``output``:
    None, an ``OutputType``, a schema dict, or a Python type."""
    if value is None:
        return None
    if isinstance(value, OutputType):
        if retries is None or retries == value.retries:
            return value
        return OutputType(value.schema, name=value.name, retries=retries)
    return from_python(value, retries=OUTPUT_RETRIES if retries is None else retries)


def check_for(output: OutputType | None, provider: str | None, *, where: str = "") -> None:
    """Refuse an output type the provider cannot ask for: OpenAI-style providers send it in
    strict mode, so a schema strict mode cannot express is refused here (``StrictError``'s
    message names what), before anything runs. Anthropic (the final-answer tool) and the
    scripted provider take every schema of the subset; so does Gemini (the final-answer tool
    too). Azure OpenAI's providers are OpenAI's adapters: strict as theirs."""
    if output is None or not provider or not (provider.startswith("openai")
                                              or provider.startswith("azure-openai")):
        return
    try:
        output.strict()
    except StrictError as e:
        prefix = f"{where}: " if where else ""
        raise OutputError(f"{prefix}{e}") from None
