"""Package faces whose names load on first use (PEP 562).

A package's ``__init__`` declares which module defines each public name; importing the package
imports none of them. So ``mnemon --help`` and the door commands never pay for an HTTP client or
a provider they do not use, while ``from mnemon.providers import OpenAIProvider`` still works.
"""

from __future__ import annotations

from importlib import import_module
TYPE_CHECKING = False  # as typing's, without importing typing (~2 ms of every start)
if TYPE_CHECKING:
    from typing import Any, Callable


def attach(package: str, where: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package``; ``where`` maps each public name to
    the module defining it, relative to the package, with ``:attr`` when the name differs."""
    def __getattr__(name: str) -> Any:
        spec = where.get(name)
        if spec is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attr = spec.partition(":")
        value = getattr(import_module(module, package), attr or name)
        setattr(import_module(package), name, value)  # later look-ups skip the hook
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(import_module(package))) | set(where))

    return __getattr__, __dir__, list(where)
