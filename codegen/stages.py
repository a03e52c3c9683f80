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

With ``windows`` (:data:`~soadyn.codegen.units.WINDOW_FUNCTIONS`) the work array is laid out so that the
values each segment of a stage names most often lie side by side, and the printed stage reaches them
through a few base pointers ``w0 = w + k`` (opaque to the compiler: an empty ``asm``) as ``w0[-16]`` ..
``w0[15]``: an x86 instruction then carries a one-byte displacement instead of four (8 -> 5 bytes for a
VEX ``vmulsd``), and the time of the long FD derivatives follows their code bytes.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field

import soadyn.codegen.cprogram as cp
from soadyn.codegen.cprogram import Expr, Stmt
from soadyn.codegen.printer import CPrinter
from soadyn.codegen.trig import fuse_trig

#: target operations per stage function (a function at most 1.5x this long is not split)
STAGE_OPS = 2500

#: base pointers into the work array per stage function of the :data:`~soadyn.codegen.units.WINDOW_FUNCTIONS`
#: (:func:`split_stages`, ``windows``; 0: every value read as ``w[k]``).  TALOS's FD derivatives, code bytes
#: of the single call's stages (fast build, nm -S): 370,826 without, 4 / 8 pointers with 128 / 256 values
#: per stage 354,747 / 349,200, 8 with segments (:data:`SEGMENT_WINDOWS`) 339,300 (benchmarks/README.md)
WINDOWS = 8
#: the doubles a base pointer reaches with a one-byte displacement (x86 VEX: -128..127 bytes, so
#: ``p[-16]`` .. ``p[15]``; an EVEX-encoded instruction, xmm16-31, reaches 128 doubles either side)
WINDOW = 32
#: values of a segment placed in its own region of the work array (:func:`_hot_layout`): at most this many
HOT_PER_SEGMENT = WINDOWS * WINDOW
#: a stage's statements cut into segments that name at most this many windows' worth of distinct
#: work-array values (:func:`_segments`), each segment with base pointers of its own (0: one segment per
#: stage).  TALOS's FD derivatives, stage bytes: one segment 349,200, 1 (256 values) 339,300, 0.5 337,027
SEGMENT_WINDOWS = 1
#: a window is worth its base pointer above this many accesses in the segment
WINDOW_MIN = 8
#: a value goes to a segment's region when the segment names it at least this often
HOT_MIN = 2
#: output stores (``da_dq[k] = ...``; a product loop's operand arrays too) of a windowed stage are written
#: through a base pointer of their array (:func:`_output_bases`) where at least this many consecutive
#: stores to that array fit one window of :data:`WINDOW` entries (0: never)
OUTPUT_RUN = 3

#: a printed stage of a :data:`~soadyn.codegen.units.JUMP_FUNCTIONS` function takes a jump to the next
#: instruction (:data:`~soadyn.codegen.cprogram.JUMP`) after every this many statements (:func:`_jumps`;
#: 0: none): code placement only, the same instructions otherwise.  The long straight-line stages (TALOS's
#: FD derivatives: 328 KB) are fetched from L2 on every call; with a taken branch every ~140 bytes (2,100
#: jumps) the front end of this machine (Zen 5) runs faster, and the same bytes with 2-byte nops in place
#: of the jumps do not.  FD derivatives, ns (C loop, fresh copies alternating, 6 rounds, load 9.3-9.6):
#: TALOS 7,224-7,355 -> 6,794-7,006, B1+Z1 3,182-3,225 -> 3,022-3,061, xArm7 free 1,432-1,485 ->
#: 1,282-1,302; TALOS's stage bytes +1.8 %, callgrind instructions +2.4 %; every 5, 12, 16 or 20
#: statements within the noise of 8 (benchmarks/README.md, thirteenth session)
JUMP_EVERY = 8

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
                 printed: bool = True, load_once: bool = False, windows: int = 0,
                 jumps: bool = False) -> Staged | None:
    """Split a straight-line body into stage functions (None when it is short or not straight-line).

    ``params``: the function's parameters as (C type, name), e.g. ``("const double *", "q")``;
    ``printer``: the statement printer of the stages (:class:`~soadyn.codegen.printer.CPrinter`, the
    default, or the flight library's ``FloatPrinter``: its scalar type is the work array's too);
    ``printed``: False when only the stages' statements are needed (a SIMD batch prints its own), not
    their scalar C (``Staged.stages`` then empty); ``load_once``: the printed stages read each value
    from the work array once, into a local before its first use (:func:`_loaded_once`; the statements
    of ``Staged.stage_bodies`` keep reading ``w[k]`` at each use); ``windows`` > 0 (printed stages only):
    the work array laid out so that the values each stretch of a stage names most lie together, and the
    printed stages reach them through up to ``windows`` base pointers with one-byte displacements
    (:func:`_windowed`; ``Staged.stage_bodies`` read ``w[k]`` of the same layout); ``jumps``: the printed
    stages take a jump to the next instruction after every :data:`JUMP_EVERY` statements (:func:`_jumps`).
    """
    if not _straight(body):
        return None
    chunks = _cut(body, max_ops)
    if len(chunks) < 2:
        return None
    staged = _chunk_functions(params, body, chunks, [f"{cname}_stage{k}" for k in range(len(chunks))],
                              printer, printed, load_once, windows, jumps)
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


def _slots(chunks: list[list[Stmt]], own: list[set[str]],
           apart: frozenset[str] = frozenset()) -> tuple[dict[str, int], int]:
    """Work-array slots of the values used outside every chunk that defines them: a value lives from the
    end of its stage to the start of its last user; freed slots are reused (lowest first).  The values of
    ``apart`` get no slot here (:func:`_hot_layout` places them)."""
    defined = set().union(*own) - apart
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


def _named(s: Stmt, mine: set[str], crossing: set[str]) -> list[str]:
    """The values of ``crossing`` (they live in the work array) that statement ``s`` of a stage whose own
    values are ``mine`` names there: each read of a value from an earlier stage (a use in the expression
    text; not a sine's argument: :func:`_windowed`), and the store of a value it defines."""
    if s.kind == cp.LOAD or s.expr is None:
        return []
    out = [s.target] if s.kind in (cp.TRIG, cp.ARITH) and s.target in crossing and s.target in mine else []
    if s.kind != cp.TRIG:
        out += [t for t in s.expr.tokens if t in crossing and t not in mine]
    return out


def _segments(chunk: list[Stmt], mine: set[str], crossing: set[str], limit: int) -> list[int]:
    """A segment number per statement of ``chunk``: consecutive statements that name at most ``limit``
    distinct work-array values (:func:`_named`) share one (0 for all: ``limit`` 0)."""
    seg, seen, out = 0, set(), []
    for s in chunk:
        named = set(_named(s, mine, crossing)) if limit else set()
        if seen and len(seen | named) > limit:
            seg, seen = seg + 1, set()
        seen |= named
        out.append(seg)
    return out


def _hot_layout(chunks: list[list[Stmt]], own: list[set[str]], counts: list[Counter],
                per_segment: int) -> tuple[dict[str, int], int]:
    """Work-array slots (:func:`_slots`) with the values each segment of a stage (``counts``: how often
    each names each value) names most often side by side: each value named at least :data:`HOT_MIN`
    times in some segment goes with the segment that names it most (the first of equals), each segment
    keeps its ``per_segment`` most named ones, in decreasing order, in a region of its own after the other
    values, so that a few base pointers (:func:`_windows`) reach them with short displacements."""
    best: dict[str, tuple[int, int]] = {}
    for k, n in enumerate(counts):
        for u, c in n.items():
            if c >= HOT_MIN and (u not in best or c > best[u][0]):
                best[u] = (c, k)
    regions: list[list[str]] = [[] for _ in counts]
    for u, (_, k) in best.items():
        regions[k].append(u)
    hot: list[str] = []
    for k, region in enumerate(regions):
        region.sort(key=lambda u: (-counts[k][u], u))
        hot += region[:per_segment]
    slot, n_slots = _slots(chunks, own, frozenset(hot))
    for u in hot:
        slot[u] = n_slots
        n_slots += 1
    return slot, n_slots


def _windows(n: Counter, slot: dict[str, int], count: int) -> list[int]:
    """The first slots of at most ``count`` disjoint windows of :data:`WINDOW` slots that hold the most
    of a segment's accesses ``n`` (value -> how often), greedily (the lowest first slot of the best), each
    window taken only for more than :data:`WINDOW_MIN` accesses.  The lowest first slot of a best window
    is 0 or has an accessed slot at its end (one slot lower it would lose that one, or gain one), so only
    those are tried."""
    per: Counter = Counter()
    for u, c in n.items():
        per[slot[u]] += c
    starts: list[int] = []
    for _ in range(count):
        xs = sorted(per)
        acc = [0]
        for x in xs:
            acc.append(acc[-1] + per[x])
        best, at = WINDOW_MIN, None
        for first in sorted({0} | {x - WINDOW + 1 for x in xs if x >= WINDOW - 1}):
            cover = acc[bisect_left(xs, first + WINDOW)] - acc[bisect_left(xs, first)]
            if cover > best:
                best, at = cover, first
        if at is None:
            break
        starts.append(at)
        for x in xs[bisect_left(xs, at):bisect_left(xs, at + WINDOW)]:
            del per[x]
    return sorted(starts)


def _chunk_functions(params: list[tuple[str, str]], stmts: list[Stmt], chunks: list[list[Stmt]],
                     names: list[str], printer: CPrinter | None = None, printed: bool = True,
                     load_once: bool = False, windows: int = 0, jumps: bool = False) -> Staged:
    """The C functions of ``chunks`` (consecutive statements), passing values through a work array,
    printed by ``printer`` (default :class:`~soadyn.codegen.printer.CPrinter`; ``printed``: their C text
    too).  ``windows`` > 0: the work array laid out so that each stage's most used values lie together
    (:func:`_hot_layout`), and the printed stages read and write those through up to ``windows`` base
    pointers into it (:func:`_windows`), within a one-byte displacement of one of them; ``jumps``: a
    jump to the next instruction every :data:`JUMP_EVERY` statements (:func:`_jumps`)."""
    loads = {s.target: s for s in stmts if s.kind == cp.LOAD}
    # a value is defined in one chunk, or (frame families) copied into several cases that each use
    # their own copy: only a use outside every chunk that defines it crosses a boundary
    own = [{s.target for s in chunk if s.kind in (cp.TRIG, cp.ARITH)} for chunk in chunks]
    slot, n_slots = _slots(chunks, own)
    counts: list[Counter] = []
    segs: list[list[int]] = []       # per chunk: the segment of each statement
    first: list[int] = []            # per chunk: its first segment's index in counts
    if windows > 0 and printed:
        crossing = set(slot)
        for chunk, mine in zip(chunks, own):
            # (load once reads a value into a local by its element's text: one window per stage)
            seg = _segments(chunk, mine, crossing, 0 if load_once else SEGMENT_WINDOWS * windows * WINDOW)
            first.append(len(counts))
            counts += [Counter() for _ in range(seg[-1] + 1 if seg else 1)]
            for g, x in zip(seg, chunk):
                counts[first[-1] + g].update(_named(x, mine, crossing))
            segs.append(seg)
        slot, n_slots = _hot_layout(chunks, own, counts, HOT_PER_SEGMENT)
    staged = Staged(work=n_slots)
    pnames = [p for _, p in params]
    printer = CPrinter() if printer is None else printer
    decl = ", ".join(f"{t}{p}" for t, p in params) + f", {printer.real} *w"
    for k, (name, chunk, mine) in enumerate(zip(names, chunks, own)):
        used: set[str] = set()
        for s in chunk:
            used.update(s.reads())
        needed_loads = {u for u in used if u in loads}
        touched = used.union(*(set(loads[u].reads()) for u in needed_loads))
        lines: list[Stmt] = [Stmt(cp.VOID, p) for p in pnames if p not in touched]
        at = [0] * len(lines)              # the segment of each line
        # values from other stages and inputs are read where they are used: nothing is kept live
        # across the whole stage (a preamble of loads would be, as the stores to w may alias them)
        remote = {u: f"{loads[u].array}[{loads[u].index}]" for u in needed_loads}
        remote.update({u: f"w[{slot[u]}]" for u in used - mine - needed_loads if u in slot})
        uses_w = any(u in slot for u in used - mine - needed_loads)
        for i, s in enumerate(chunk):
            if s.kind == cp.LOAD:
                continue
            lines.append(cp.renamed(s, remote) if remote and not remote.keys().isdisjoint(s.reads()) else s)
            if s.target in slot and s.defines is not None:
                lines.append(Stmt(cp.WORK, s.target, index=slot[s.target]))
                uses_w = True
            at += [segs[k][i] if segs else 0] * (len(lines) - len(at))
        if not uses_w:     # (a frame's case that reads nothing from the prefix: -Wunused-parameter)
            lines.append(Stmt(cp.VOID, "w"))
            at.append(at[-1] if at else 0)
        from_w = {u: ("w", slot[u]) for u in used - mine - needed_loads if u in slot}
        shown = lines
        if counts and uses_w:
            starts = [_windows(counts[first[k] + g], slot, windows) for g in range(max(at) + 1)]
            if any(starts):
                staged.work = max(staged.work, max(x[-1] for x in starts if x) + WINDOW)
                shown, from_w = _windowed(lines, at, starts, slot)
            if OUTPUT_RUN:
                shown = _output_bases(shown, frozenset(pnames))
            shown = _zero_runs(shown)
        shown = _loaded_once(shown, from_w) if load_once else shown
        if jumps and JUMP_EVERY:
            shown = _jumps(shown)
        proto = f"void {name}({decl})"
        staged.names.append(name)
        staged.stage_bodies.append(lines)
        staged.prototypes.append(f"SOADYN_STAGE {proto};")
        if printed:
            staged.stages.append(f"SOADYN_STAGE {proto}\n{{\n"
                                 + "".join(f"    {x}\n" for x in printer.lines(fuse_trig(shown))) + "}\n")
        staged.costs.append(sum(s.cost() for s in chunk))
    return staged


def _windowed(lines: list[Stmt], at: list[int], starts: list[list[int]],
              slot: dict[str, int]) -> tuple[list[Stmt], dict[str, tuple[str, int]]]:
    """A stage's statements (``at``: the segment of each) with the work-array slots in the windows of
    their segment (``starts[g]``: first slots) read and written through base pointers ``w<j>`` = ``w +
    starts[g][j] + WINDOW / 2`` (:data:`~soadyn.codegen.cprogram.BASE` statements where a segment
    begins), as ``w<j>[-16]`` .. ``w<j>[15]``: ``(the statements, value -> (array, index) read for
    load_once, one segment)``.  A sine's or cosine's argument keeps ``w[k]`` (the trig fusion reads
    elements with non-negative indices)."""
    half = WINDOW // 2
    out: list[Stmt] = []
    base: dict[str, int] = {}
    where: dict[int, tuple[str, int]] = {}      # slot -> (pointer, index relative to it)
    back: dict[str, str] = {}
    g = None
    for s, seg in zip(lines, at):
        if seg != g:
            g = seg
            where = {}
            for j, x0 in enumerate(starts[g]):
                p = f"w{j}"
                if base.get(p) != x0 + half:
                    out.append(Stmt(cp.BASE, p, index=x0 + half, zero=p not in base))
                    base[p] = x0 + half
                where.update({x: (p, x - x0 - half) for x in range(x0, x0 + WINDOW)})
            back = {f"w[{x}]": f"{p}[{i}]" for x, (p, i) in where.items()}
        if s.kind == cp.WORK and s.index in where:
            out.append(cp.store(*where[s.index], Expr.of(s.target)))
            continue
        if (s.expr is not None and s.kind not in (cp.LOAD, cp.TRIG)
                and not back.keys().isdisjoint(s.expr.tokens)):
            s = Stmt(s.kind, s.target, s.expr.renamed(back), index=s.index)
        out.append(s)
    return out, {u: where.get(x, ("w", x)) for u, x in slot.items()}


def _output_bases(lines: list[Stmt], arrays: frozenset[str]) -> list[Stmt]:
    """A windowed stage's statements with its stores into the parameter ``arrays`` (the outputs and the
    product loops' operand arrays) at indices past a one-byte displacement written through a base pointer
    of their array, ``ob_<array>`` = ``<array> + k`` (an opaque :data:`~soadyn.codegen.cprogram.BASE`
    statement), as ``ob_<array>[-16]`` .. ``ob_<array>[15]``: per array, its stores in statement order
    are cut into runs that fit one window of :data:`WINDOW` entries, and a run of at least
    :data:`OUTPUT_RUN` stores gets the pointer moved just before its first store.  The same stores of
    the same values: only the address's encoding changes (a 4-byte displacement, 3 bytes more, against
    one ``lea`` per run)."""
    half = WINDOW // 2
    runs: dict[str, list[list[int]]] = {}
    for i, s in enumerate(lines):
        if s.kind == cp.STORE and s.target in arrays and s.index >= half:
            rs = runs.setdefault(s.target, [])
            if rs:
                run = rs[-1]
                lo = min(lines[j].index for j in run)
                hi = max(lines[j].index for j in run)
                if max(hi, s.index) - min(lo, s.index) < WINDOW:
                    run.append(i)
                    continue
            rs.append([i])
    move: dict[int, tuple[str, int]] = {}       # statement -> (array, the pointer's offset)
    via: dict[int, tuple[str, int]] = {}        # statement -> (pointer, index relative to it)
    for a, rs in runs.items():
        for run in rs:
            if len(run) < OUTPUT_RUN:
                continue
            at = min(lines[j].index for j in run) + half
            move[run[0]] = (a, at)
            via.update({j: (f"ob_{a}", lines[j].index - at) for j in run})
    if not move:
        return lines
    out: list[Stmt] = []
    declared: set[str] = set()
    for i, s in enumerate(lines):
        if i in move:
            a, at = move[i]
            p = f"ob_{a}"
            out.append(Stmt(cp.BASE, p, index=at, array=a, zero=p not in declared))
            declared.add(p)
        if i in via:
            p, k = via[i]
            s = Stmt(cp.STORE, p, s.expr, index=k)
        out.append(s)
    return out


def _zero_runs(lines: list[Stmt]) -> list[Stmt]:
    """A windowed stage's statements with each run of consecutive stores of exact zeros into consecutive
    entries of one array (the structural zeros of the derivatives: TALOS's FD derivatives store 612, in
    runs of 3-12) as :data:`~soadyn.codegen.cprogram.ZEROS` loops of at most
    :data:`~soadyn.codegen.cprogram.ZERO_CHUNK` entries where a run has at least
    :data:`~soadyn.codegen.cprogram.ZERO_RUN` (the compiler writes such a loop as a few vector stores of
    a zeroed register; one ``movq $0`` of 8-12 bytes per entry otherwise).  The same entries, the same
    values."""
    out: list[Stmt] = []
    i, n = 0, len(lines)
    while i < n:
        s = lines[i]
        j = i + 1
        if s.kind == cp.STORE and s.expr is not None and s.expr.text == "0":
            while (j < n and lines[j].kind == cp.STORE and lines[j].target == s.target
                   and lines[j].expr is not None and lines[j].expr.text == "0"
                   and lines[j].index == s.index + (j - i)):
                j += 1
        out += lines[i:j] if j - i < cp.ZERO_RUN else cp.zero_run(s.target, s.index, s.index + j - i)
        i = j
    return out


def _jumps(lines: list[Stmt]) -> list[Stmt]:
    """A printed stage's statements with a :data:`~soadyn.codegen.cprogram.JUMP` after every
    :data:`JUMP_EVERY` statements that compute or store (none after the last): code placement only."""
    out: list[Stmt] = []
    n = 0
    for i, s in enumerate(lines):
        out.append(s)
        if s.kind in (cp.TRIG, cp.ARITH, cp.STORE, cp.WORK, cp.ZEROS):
            n += 1
            if n % JUMP_EVERY == 0 and i + 1 < len(lines):
                out.append(Stmt(cp.JUMP, ""))
    return out


def _loaded_once(lines: list[Stmt], from_w: dict[str, tuple[str, int]]) -> list[Stmt]:
    """A stage's statements with each work-array value of ``from_w`` (name -> ``(array, index)``, the
    element the statements read it as: ``w[k]`` or a window's ``w0[i]``) read into a local ``const``
    once, just before the first statement that reads it, and that local read after: one load per value
    and stage instead of one per use (the output stores between two uses may alias ``w``, so the compiler
    reloads at every use).  Within a stage a slot holds one value (:func:`_slots` frees a slot at the
    next stage), so ``w[k]`` names one value here."""
    back = {f"{a}[{k}]": u for u, (a, k) in from_w.items()}
    out: list[Stmt] = []
    loaded: set[str] = set()
    for s in lines:
        if s.expr is not None and s.kind != cp.LOAD:
            hit = [t for t in s.expr.tokens if t in back]
            if hit:
                for r in dict.fromkeys(hit):
                    if r not in loaded:
                        loaded.add(r)
                        out.append(cp.load(back[r], *from_w[back[r]]))
                s = cp.renamed(s, back)
        out.append(s)
    return out
