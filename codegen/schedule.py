"""Statement order of a long straight-line body: few intermediates live at once.

The staged program lists its assignments stage by stage (all velocities, then all inertias, ...), and the
output stores after all of them.  In a long function (the forward-dynamics derivatives: 10,000 statements)
that order keeps hundreds of intermediates live between their definition and their last use, far more
than the 16-32 registers, and gcc spills them: in the Panda forward-dynamics derivatives compiled with
``-O3 -march=native``, 6,281 of its 17,024 instructions read or wrote the stack.

:func:`pressure_order` is greedy list scheduling for register pressure (as in Sethi-Ullman / the
"minimise live values" heuristic of compiler schedulers): among the statements whose operands are all
computed, take the one that ends the most live ranges (it is the last use of its operands) minus the one
it starts, ties in the original order.  Each output entry is stored as soon as it is best to.  The order
is a topological order of the same statements, so the values are unchanged, bit for bit; stages
interleave, so the C prints each stage's comment where the stage first appears.

Which functions: the wide ones (:func:`worth_scheduling`), whose outputs are a matrix of many independent
entries (M, M^-1, derivative matrices); a recursion with a few outputs (inverse and forward dynamics) is
limited by the latency of its chains, and measured slower reordered.  Measured on this machine (2-core AMD
EPYC), ns per call, the process CPU time, best of 6 alternating runs, stage order -> this order:

============================================  =============  ==============
function (fast profile unless said)           Panda, nv = 13  four-arm, nv = 37
============================================  =============  ==============
mass_matrix                                   180 -> 151     1,100 -> 971
mass_matrix_inverse                           600 -> 526     2,775 -> 2,516
forward_dynamics (not reordered)              437 -> 497     2,038 -> 2,022
inverse_dynamics (not reordered)              198 -> 210     1,056 -> 1,043
forward_dynamics_derivatives (-O3 -march)     2,210 -> 2,065 -
============================================  =============  ==============

In the forward-dynamics derivatives the stack operands went from 6,281 to 5,109 of 17,024 -> 16,073
instructions.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence

#: a function is reordered when its outputs have at least this many entries per entry of its inputs
WIDE = 4


def worth_scheduling(input_sizes: Sequence[int], output_sizes: Sequence[int]) -> bool:
    """A wide function (outputs at least :data:`WIDE` times its inputs, in entries): its statement order is
    :func:`pressure_order`'s; others keep the stage order (see the module docstring)."""
    return sum(output_sizes) >= WIDE * sum(input_sizes)


def pressure_order(deps: Sequence[frozenset[int] | set[int]], defines: Sequence[bool]) -> list[int]:
    """A topological order of statements ``0..n-1`` keeping few values live.

    ``deps[i]``: the statements whose values statement ``i`` reads (each earlier than ``i``);
    ``defines[i]``: statement ``i`` defines a value (an assignment) rather than storing one (an output).
    Greedy: the ready statement with the most operands it is the last reader of, less one if it defines
    a value that is read later; ties go to the lower index (the original order)."""
    n = len(deps)
    users: list[list[int]] = [[] for _ in range(n)]
    for i, d in enumerate(deps):
        for j in d:
            if j >= i:
                raise ValueError(f"statement {i} reads statement {j}, which is not earlier")
            users[j].append(i)
    remaining = [len(u) for u in users]          # unscheduled readers of each value
    waiting = [len(d) for d in deps]             # operands not yet computed
    # score: live ranges started (1 for a value read later) less those ended (operands it reads last)
    score = [(1 if defines[i] and users[i] else 0) - sum(1 for j in deps[i] if remaining[j] == 1)
             for i in range(n)]
    done = [False] * n
    heap: list[tuple[int, int]] = [(score[i], i) for i in range(n) if waiting[i] == 0]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        s, i = heapq.heappop(heap)
        if done[i] or s != score[i]:               # scheduled, or a stale entry (its score improved)
            continue
        done[i] = True
        order.append(i)
        for j in deps[i]:
            remaining[j] -= 1
            if remaining[j] == 1:                  # its one unscheduled reader now ends its live range
                last = next(u for u in users[j] if not done[u])
                score[last] -= 1
                if waiting[last] == 0:
                    heapq.heappush(heap, (score[last], last))
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(heap, (score[u], u))
    if len(order) != n:
        raise ValueError("the statements' dependencies have a cycle")
    return order


def statement_deps(reads: Sequence[set[Hashable]],
                   defined: Sequence[Hashable | None]) -> list[frozenset[int]]:
    """``deps`` for :func:`pressure_order`: statement ``i`` reads the names ``reads[i]``; ``defined[i]``
    is the name statement ``i`` defines (None for a store).  Names defined by no statement (inputs) are
    ignored."""
    where = {name: i for i, name in enumerate(defined) if name is not None}
    return [frozenset(where[r] for r in rs if r in where) for rs in reads]
