"""Stage functions: a long straight-line function cut into functions the C compiler handles in linear time.

A generated function is one long straight-line block.  gcc's register allocator (LRA hard-register
assignment) and combiner are superlinear in the block length: measured with ``gcc -O1 -ftime-report`` on
the forward dynamics of ``examples/seed004_four_arm_37dof.yaml`` (9,541 operations) LRA alone takes 64 %
of 6.2 s, 650 us per operation, against 290 us per operation for the 4,083-operation inverse dynamics.

:func:`split_stages` therefore cuts a function's statements (:mod:`soadyn.codegen.cprogram`) into
**stage functions** of about :data:`STAGE_OPS` operations each, in the algorithm's own statement order.
A value that a later stage needs crosses the boundary through a work array ``w`` on the caller's stack
(one store, one load); the loads of the inputs (``q_3 = q[3]``) are repeated in each stage that uses them
instead.  Each stage is an external function (``SOADYN_STAGE`` = ``noinline`` under GCC/Clang so that a
single-file build keeps them apart), so a build can compile the stages in parallel and a stage's cost no
longer depends on the length of the whole function.  The statements, and so every floating-point
operation and its rounding, are unchanged; only where the intermediate values live changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import soadyn.codegen.cprogram as cp
from soadyn.codegen.cprogram import Stmt
from soadyn.codegen.printer import CPrinter
from soadyn.codegen.trig import fuse_trig

#: target operations per stage function (a function at most 1.5x this long is not split)
STAGE_OPS = 2500

#: the kinds a straight-line body may hold to be cut into stages
_STRAIGHT = frozenset({cp.LOAD, cp.TRIG, cp.ARITH, cp.STORE, cp.ZEROS, cp.COMMENT})


@dataclass
class Staged:
    """A function split into stages: their C text and statements, and the body of the calling function."""

    stages: list[str] = field(default_factory=list)   # full C definitions of the stage functions
    prototypes: list[str] = field(default_factory=list)
    body: list[Stmt] = field(default_factory=list)    # the caller's new body
    work: int = 0                                     # doubles of the work array
    costs: list[int] = field(default_factory=list)
    stage_bodies: list[list[Stmt]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)


def _straight(body: list[Stmt]) -> bool:
    return all(s.kind in _STRAIGHT for s in body)


def _cut(stmts: list[Stmt], max_ops: int) -> list[list[Stmt]]:
    costs = [s.cost() for s in stmts]
    total = sum(costs)
    n = max(1, round(total / max_ops))
    if n == 1 or total <= 1.5 * max_ops:
        return [stmts]
    target = total / n
    chunks: list[list[Stmt]] = [[]]
    acc = 0
    for s, c in zip(stmts, costs):
        if acc >= target * len(chunks) and len(chunks) < n and c:
            chunks.append([])
        chunks[-1].append(s)
        acc += c
    return [c for c in chunks if c]


def _calls(names: list[str], params: list[tuple[str, str]]) -> list[Stmt]:
    args = [p for _, p in params] + ["w"]
    return [cp.call(n, args) for n in names]


def split_stages(cname: str, params: list[tuple[str, str]], body: list[Stmt],
                 max_ops: int = STAGE_OPS, printer: CPrinter | None = None,
                 printed: bool = True, load_once: bool = False) -> Staged | None:
    """Split a straight-line body into stage functions (None when it is short or not straight-line).

    ``params``: the function's parameters as (C type, name), e.g. ``("const double *", "q")``;
    ``printer``: the statement printer of the stages (:class:`~soadyn.codegen.printer.CPrinter`, the
    default, or the flight library's ``FloatPrinter``: its scalar type is the work array's too);
    ``printed``: False when only the stages' statements are needed (a SIMD batch prints its own), not
    their scalar C (``Staged.stages`` then empty); ``load_once``: the printed stages read each value
    from the work array once, into a local before its first use (:func:`_loaded_once`; the statements
    of ``Staged.stage_bodies`` keep reading ``w[k]`` at each use).
    """
    if not _straight(body):
        return None
    chunks = _cut(body, max_ops)
    if len(chunks) < 2:
        return None
    staged = _chunk_functions(params, body, chunks, [f"{cname}_stage{k}" for k in range(len(chunks))],
                              printer, printed, load_once)
    staged.body = [Stmt(cp.SCRATCH, "w", index=max(staged.work, 1))] + _calls(staged.names, params)
    return staged


def split_family(cname: str, params: list[tuple[str, str]], body: list[Stmt],
                 max_ops: int = STAGE_OPS, printer: CPrinter | None = None) -> Staged | None:
    """A frame family (shared prefix, then its switch over the frames) as prefix stages plus one function
    per frame case, all reading the prefix's values from the work array (None when it is short;
    ``printer`` as in :func:`split_stages`)."""
    at = next((i for i, s in enumerate(body) if s.kind == cp.SWITCH), None)
    if at is None:
        return None
    prefix = body[:at]
    cases = body[at].cases
    if not _straight(prefix) or not all(_straight(c.body) for c in cases):
        return None
    total = sum(s.cost() for s in prefix) + sum(s.cost() for c in cases for s in c.body)
    if not cases or total <= 1.5 * max_ops:
        return None
    # a prefix of input loads only (every quantity copied into the cases that need it) is no stage
    pre = [c for c in _cut(prefix, max_ops) if any(s.kind in (cp.TRIG, cp.ARITH) for s in c)]
    chunks = pre + [c.body for c in cases]
    n_pre = len(chunks) - len(cases)
    names = [f"{cname}_stage{k}" for k in range(n_pre)] + [f"{cname}_case{j}" for j in range(len(cases))]
    stmts = prefix + [s for c in cases for s in c.body]
    staged = _chunk_functions(params, stmts, chunks, names, printer)
    calls = _calls(names, params)
    staged.body = [Stmt(cp.SCRATCH, "w", index=max(staged.work, 1)), *calls[:n_pre],
                   Stmt(cp.SWITCH, cases=[cp.Case(c.enumerator, None, [k])
                                          for c, k in zip(cases, calls[n_pre:])])]
    return staged


def _slots(chunks: list[list[Stmt]], own: list[set[str]]) -> tuple[dict[str, int], int]:
    """Work-array slots of the values used outside every chunk that defines them: a value lives from the
    end of its stage to the start of its last user; freed slots are reused (lowest first)."""
    defined = set().union(*own)
    last_use: dict[str, int] = {}
    for k, chunk in enumerate(chunks):
        for s in chunk:
            for u in s.reads():
                if u in defined and u not in own[k]:
                    last_use[u] = k
    slot: dict[str, int] = {}
    free: list[int] = []
    n_slots = 0
    releasing: dict[int, list[int]] = {}
    for k, chunk in enumerate(chunks):
        free.extend(releasing.pop(k - 1, []))
        free.sort(reverse=True)
        for s in chunk:
            if s.target in last_use and s.defines is not None:
                if free:
                    slot[s.target] = free.pop()
                else:
                    slot[s.target] = n_slots
                    n_slots += 1
                releasing.setdefault(last_use[s.target], []).append(slot[s.target])
    return slot, n_slots


def _chunk_functions(params: list[tuple[str, str]], stmts: list[Stmt], chunks: list[list[Stmt]],
                     names: list[str], printer: CPrinter | None = None, printed: bool = True,
                     load_once: bool = False) -> Staged:
    """The C functions of ``chunks`` (consecutive statements), passing values through a work array,
    printed by ``printer`` (default :class:`~soadyn.codegen.printer.CPrinter`; ``printed``: their C text
    too)."""
    loads = {s.target: s for s in stmts if s.kind == cp.LOAD}
    # a value is defined in one chunk, or (frame families) copied into several cases that each use
    # their own copy: only a use outside every chunk that defines it crosses a boundary
    own = [{s.target for s in chunk if s.kind in (cp.TRIG, cp.ARITH)} for chunk in chunks]
    slot, n_slots = _slots(chunks, own)
    staged = Staged(work=n_slots)
    pnames = [p for _, p in params]
    printer = CPrinter() if printer is None else printer
    decl = ", ".join(f"{t}{p}" for t, p in params) + f", {printer.real} *w"
    for name, chunk, mine in zip(names, chunks, own):
        used: set[str] = set()
        for s in chunk:
            used.update(s.reads())
        needed_loads = {u for u in used if u in loads}
        touched = used.union(*(set(loads[u].reads()) for u in needed_loads))
        lines: list[Stmt] = [Stmt(cp.VOID, p) for p in pnames if p not in touched]
        # values from other stages and inputs are read where they are used: nothing is kept live
        # across the whole stage (a preamble of loads would be, as the stores to w may alias them)
        remote = {u: f"{loads[u].array}[{loads[u].index}]" for u in needed_loads}
        remote.update({u: f"w[{slot[u]}]" for u in used - mine - needed_loads if u in slot})
        uses_w = any(u in slot for u in used - mine - needed_loads)
        for s in chunk:
            if s.kind == cp.LOAD:
                continue
            lines.append(cp.renamed(s, remote) if remote and not remote.keys().isdisjoint(s.reads()) else s)
            if s.target in slot and s.defines is not None:
                lines.append(Stmt(cp.WORK, s.target, index=slot[s.target]))
                uses_w = True
        if not uses_w:     # (a frame's case that reads nothing from the prefix: -Wunused-parameter)
            lines.append(Stmt(cp.VOID, "w"))
        from_w = {u: r for u, r in remote.items() if r.startswith("w[")}
        shown = _loaded_once(lines, from_w) if load_once else lines
        proto = f"void {name}({decl})"
        staged.names.append(name)
        staged.stage_bodies.append(lines)
        staged.prototypes.append(f"SOADYN_STAGE {proto};")
        if printed:
            staged.stages.append(f"SOADYN_STAGE {proto}\n{{\n"
                                 + "".join(f"    {x}\n" for x in printer.lines(fuse_trig(shown))) + "}\n")
        staged.costs.append(sum(s.cost() for s in chunk))
    return staged


def _loaded_once(lines: list[Stmt], from_w: dict[str, str]) -> list[Stmt]:
    """A stage's statements with each work-array value of ``from_w`` (name -> ``w[k]``, as the statements
    read it) read into a local ``const`` once, just before the first statement that reads it, and that
    local read after: one load per value and stage instead of one per use (the output stores between
    two uses may alias ``w``, so the compiler reloads at every use).  Within a stage a slot holds one
    value (:func:`_slots` frees a slot at the next stage), so ``w[k]`` names one value here."""
    back = {r: u for u, r in from_w.items()}
    out: list[Stmt] = []
    loaded: set[str] = set()
    for s in lines:
        if s.expr is not None and s.kind != cp.LOAD:
            hit = [t for t in s.expr.tokens if t in back]
            if hit:
                for r in dict.fromkeys(hit):
                    if r not in loaded:
                        loaded.add(r)
                        out.append(cp.load(back[r], "w", int(r[2:-1])))
                s = cp.renamed(s, back)
        out.append(s)
    return out
