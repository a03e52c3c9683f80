"""soadyn.cli: the ``soadyn`` command (info, compile, verify, simulate, campaign; :mod:`soadyn.cli.main`) and
``python -m soadyn.cli.regenerate`` (the committed ``generated/`` C of the example robots)."""

from soadyn.cli.main import main

__all__ = ["main"]
