"""soadyn.structure: operations that return a new robot model (lock joints, invert / re-root, fix or free the
base, close a loop, add a body, change of base body), and the state maps between a model and the one derived
from it (seed 004 section III, seed 000 Appendix A).  Like Pinocchio's ``buildReducedModel``, every operation
is a free function; the input model is never changed.
"""

from soadyn.structure.operations import (
    ConnectivityRow,
    StructureError,
    add_body,
    close_loop,
    connectivity_table,
    fix_base,
    format_connectivity,
    free_base,
    invert,
    lock_joints,
    map_state,
)
from soadyn.structure.rebase import RebaseMap, rebase, rebase_transform

__all__ = [
    "ConnectivityRow",
    "RebaseMap",
    "StructureError",
    "add_body",
    "close_loop",
    "connectivity_table",
    "fix_base",
    "format_connectivity",
    "free_base",
    "invert",
    "lock_joints",
    "map_state",
    "rebase",
    "rebase_transform",
]
