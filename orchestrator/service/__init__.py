"""The service: ``mnemon serve`` — an HTTP JSON API with server-sent events and a page to watch
a run live, over one run root (see docs/service.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    "Run": ".runs",
    "create_app": ".app",
    "openapi": ".app",
    "ROUTES": ".app",
    "serve": ".server",
})

if TYPE_CHECKING:
    from .app import ROUTES, create_app, openapi
    from .runs import Run
    from .server import serve
