"""soadyn.symbolic: robot models, spatial operator algorithms (generic over the scalar), reference path."""

from .model import Robot
from .robotfile import load_yaml


def load_robot(path, base=None) -> Robot:
    """Load a robot file (YAML, or URDF by suffix); ``base`` ('free' | 'fixed') overrides the file."""
    return load_yaml(path, base)


__all__ = ["Robot", "load_robot"]
