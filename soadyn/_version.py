"""The package version (also the code generator's version, written into every generated header)."""

__version__ = "0.1.0"
