"""soadyn.cli: the ``soadyn`` command (info, compile, verify, simulate, regenerate)."""

from soadyn.cli.main import main

__all__ = ["main"]
