"""The version, for every layer: the constant ``setup.py`` writes at build time
(``_version.py``), or ``0+unknown`` in a tree that was never built or installed. A module of
its own below the layers, so the CLI and the service name the version without importing the
package's face (which sits above them all)."""

try:
    from ._version import __version__
except ImportError:  # a tree that was never built or installed
    __version__ = "0+unknown"
