"""What the fork server of a LocalCluster's workers imports (``forks.PRELOAD``), with the
collector off and the result frozen (``gctune.warming``, decision 0264): a worker forked from it
starts with Dask and mnemon's chunk modules imported and out of every collection's sight.

Imported only by the fork server (``multiprocessing`` preloads this one module); never by the
driver, which imports what it needs itself.
"""

from __future__ import annotations

import importlib

from ..gctune import warming
from .forks import OPTIONAL, PRELOAD, numpy_deferred

with warming():
    _missed = []
    # NumPy, jinja2, rich: imported by a chunk's tool that needs them (decisions 0470, 0471)
    with numpy_deferred(*OPTIONAL):
        for _name in PRELOAD:
            try:
                importlib.import_module(_name)
            except ImportError:
                _missed.append(_name)
    for _name in _missed:  # again with NumPy (a Dask that needs it); as ``multiprocessing``
        try:  # would: what still cannot be imported, a worker imports itself
            importlib.import_module(_name)
        except ImportError:
            pass
