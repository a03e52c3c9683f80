"""Stage functions and translation units: generated C that the C compiler handles in linear time.

A generated function is one long straight-line block.  gcc's register allocator (LRA hard-register
assignment) and combiner are superlinear in the block length: measured with ``gcc -O1 -ftime-report`` on
the forward dynamics of ``examples/seed004_four_arm_37dof.yaml`` (9,541 operations) LRA alone takes 64 %
of 6.2 s, 650 us per operation, against 290 us per operation for the 4,083-operation inverse dynamics.

:func:`split_stages` therefore cuts a long function body into **stage functions** of about
:data:`STAGE_OPS` operations each, in the algorithm's own statement order.  A value that a later stage
needs crosses the boundary through a work array ``w`` on the caller's stack (one store, one load); the
loads of the inputs (``q_3 = q[3]``) are repeated in each stage that uses them instead.  Each stage is
an external function (``SOADYN_STAGE`` = ``noinline`` under GCC/Clang so that a single-file build keeps
them apart), so a build can compile the stages in parallel and a stage's cost no longer depends on the
length of the whole function.  The statements, and so every floating-point operation and its rounding,
are unchanged; only where the intermediate values live changes.

:func:`translation_units` packs the emitted functions (and stages) into translation units for a
parallel build: the pieces of one function only in a unit, so that an unchanged function keeps its object
files (:mod:`soadyn.codegen.objcache`), consecutive stages together up to :data:`UNIT_OPS` operations.
A unit costs a compiler process (~25 ms of CPU) and the parsing of the headers and SIMD prelude: the
four-arm robot's 315 units of one stage each took 80 s of gcc CPU, its 50 packed units 62-64 s, the same
functions (issue 11).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from soadyn.codegen.trig import C_COS, C_SIN, PRELUDE, fuse_pairs

#: target operations per stage function (a function at most 1.5x this long is not split)
STAGE_OPS = 2500
#: operations per translation unit: a function's stages are packed into units of about this size (each
#: unit costs a compiler process, ~25 ms of CPU before any code; issue 11)
UNIT_OPS = 10000
#: a lanes transposition with more computed entries than this is a loop over a table of them
UNROLLED_STORES = 32
#: functions whose batched entry points get SIMD lanes (C names without the robot prefix): the dynamics
#: that batches are made of (simulation, rollouts, sampling).  The lanes version of a function costs as
#: much compile time as the scalar one again (all 29 functions of the four-arm robot: 114 s of compiler
#: CPU instead of ~60 s); the other functions' batches loop over the scalar function.
SIMD_FUNCTIONS = frozenset({"forward_dynamics", "forward_dynamics_fext", "inverse_dynamics",
                            "inverse_dynamics_fext", "mass_matrix", "mass_matrix_inverse", "bias_forces"})

_ASSIGN = re.compile(r"^const double (\w+) = (.*);$")
#: an output store of a generated body, ``name[k] = expr;``
OUTPUT_STORE = re.compile(r"^(\w+)\[(\d+)\] = (.*);$")
_LOAD = re.compile(r"^\w+\[\d+\]$")
_ZEROS = re.compile(r"^for \(int k = \d+; k < \d+; \+\+k\) (\w+)\[k\] = 0\.0;$")
_IDENT = re.compile(r"(?<![\w.])[A-Za-z_]\w*")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_OPS = re.compile(r"[-+*/]|\b(?:soadyn_sin|soadyn_cos|sin|cos|sqrt|pow)\(")

#: lines placed before the first stage function of a source file
STAGE_MACRO = ("#ifndef SOADYN_STAGE",
               "#if defined(__GNUC__) || defined(__clang__)",
               "#define SOADYN_STAGE __attribute__((noinline))",
               "#else",
               "#define SOADYN_STAGE",
               "#endif",
               "#endif")


@dataclass
class Stmt:
    line: str
    target: str | None        # the local it defines (assignments), None for output stores and comments
    uses: set[str]
    cost: int
    load: bool = False        # ``const double x = in[k];``: repeated in each stage that needs it


def _names_and_cost(expr: str) -> tuple[set[str], int]:
    """The identifiers of a C expression and its operations (numbers blanked out first)."""
    text = _NUMBER.sub(" ", expr)
    return set(_IDENT.findall(text)), len(_OPS.findall(text))


def parse_body(body: list[str]) -> list[Stmt] | None:
    """Statements of a straight-line function body, or None if it has other control flow (a switch)."""
    out: list[Stmt] = []
    for line in body:
        s = line.strip()
        m = _ASSIGN.match(s)
        if m:
            expr = m.group(2)
            names, cost = _names_and_cost(expr)
            out.append(Stmt(s, m.group(1), names, cost, bool(_LOAD.match(expr))))
            continue
        m = OUTPUT_STORE.match(s)
        if m:
            names, cost = _names_and_cost(m.group(3))
            names.add(m.group(1))
            out.append(Stmt(s, None, names, cost + 1))
            continue
        m = _ZEROS.match(s)
        if m:                 # a run of zeros stored into an output (frame families)
            out.append(Stmt(s, None, {m.group(1)}, 1))
            continue
        if s.startswith("/*") and s.endswith("*/") or not s:
            out.append(Stmt(s, None, set(), 0))
            continue
        return None
    return out


@dataclass
class Staged:
    """A function split into stages: their C text, and the body of the calling function."""

    stages: list[str] = field(default_factory=list)   # full C definitions of the stage functions
    prototypes: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)     # the caller's new body
    work: int = 0                                     # doubles of the work array
    costs: list[int] = field(default_factory=list)
    stage_bodies: list[list[str]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)


def _cut(stmts: list[Stmt], max_ops: int) -> list[list[Stmt]]:
    total = sum(s.cost for s in stmts)
    n = max(1, round(total / max_ops))
    if n == 1 or total <= 1.5 * max_ops:
        return [stmts]
    target = total / n
    chunks: list[list[Stmt]] = [[]]
    acc = 0
    for s in stmts:
        if acc >= target * len(chunks) and len(chunks) < n and s.cost:
            chunks.append([])
        chunks[-1].append(s)
        acc += s.cost
    return [c for c in chunks if c]


def split_stages(cname: str, params: list[tuple[str, str]], body: list[str],
                 max_ops: int = STAGE_OPS) -> Staged | None:
    """Split a straight-line body into stage functions (None when it is short or not straight-line).

    ``params``: the function's parameters as (C type, name), e.g. ``("const double *", "q")``.
    """
    stmts = parse_body(body)
    if stmts is None:
        return None
    chunks = _cut(stmts, max_ops)
    if len(chunks) < 2:
        return None
    staged = _chunk_functions(cname, params, stmts, chunks, [f"{cname}_stage{k}" for k in range(len(chunks))])
    args = ", ".join([p for _, p in params] + ["w"])
    staged.body = [f"double w[{max(staged.work, 1)}];"] + [f"{n}({args});" for n in staged.names]
    return staged


_CASE = re.compile(r"^case (\w+): \{")


def split_family(cname: str, params: list[tuple[str, str]], body: list[str],
                 max_ops: int = STAGE_OPS) -> Staged | None:
    """A frame family (shared prefix, then ``switch (frame)``) as prefix stages plus one function per
    frame case, all reading the prefix's values from the work array (None when it is short)."""
    try:
        at = next(i for i, line in enumerate(body) if line.strip() == "switch (frame) {")
    except StopIteration:
        return None
    prefix = parse_body(body[:at])
    if prefix is None:
        return None
    cases: list[tuple[str, list[Stmt]]] = []
    current: list[str] | None = None
    for line in body[at + 1:]:
        s = line.strip()
        m = _CASE.match(s)
        if m:
            cases.append((m.group(1), []))
            current = []
        elif current is not None and s == "break;":
            stmts = parse_body(current)
            if stmts is None:
                return None
            cases[-1] = (cases[-1][0], stmts)
            current = None
        elif current is not None:
            current.append(s)
    total = sum(s.cost for s in prefix) + sum(s.cost for _, c in cases for s in c)
    if not cases or total <= 1.5 * max_ops:
        return None
    # a prefix of input loads only (every quantity copied into the cases that need it) is no stage
    pre = [c for c in _cut(prefix, max_ops) if any(s.target is not None and not s.load for s in c)]
    chunks = pre + [c for _, c in cases]
    n_pre = len(chunks) - len(cases)
    names = [f"{cname}_stage{k}" for k in range(n_pre)] + [f"{cname}_case{j}" for j in range(len(cases))]
    stmts = prefix + [s for _, c in cases for s in c]
    staged = _chunk_functions(cname, params, stmts, chunks, names)
    args = ", ".join([p for _, p in params] + ["w"])
    staged.body = [f"double w[{max(staged.work, 1)}];"] + [f"{n}({args});" for n in names[:n_pre]]
    staged.body += ["switch (frame) {"]
    staged.body += [f"case {enum}: {name}({args}); break;" for (enum, _), name in zip(cases, names[n_pre:])]
    staged.body += ["default:", "    return 1;", "}", "return 0;"]
    return staged


def _chunk_functions(cname: str, params: list[tuple[str, str]], stmts: list[Stmt], chunks: list[list[Stmt]],
                     names: list[str]) -> Staged:
    """The C functions of ``chunks`` (consecutive statements), passing values through a work array."""
    loads = {s.target: s for s in stmts if s.load}
    # a value is defined in one chunk, or (frame families) copied into several cases that each use
    # their own copy: only a use outside every chunk that defines it crosses a boundary
    own = [{s.target for s in chunk if s.target is not None and not s.load} for chunk in chunks]
    defined = set().union(*own)
    last_use: dict[str, int] = {}
    for k, chunk in enumerate(chunks):
        for s in chunk:
            for u in s.uses:
                if u in defined and u not in own[k]:
                    last_use[u] = k
    # work-array slots: a value lives from the end of its stage to the start of its last user
    slot: dict[str, int] = {}
    free: list[int] = []
    n_slots = 0
    releasing: dict[int, list[int]] = {}
    for k, chunk in enumerate(chunks):
        free.extend(releasing.pop(k - 1, []))
        free.sort(reverse=True)
        for s in chunk:
            if s.target in last_use:
                if free:
                    slot[s.target] = free.pop()
                else:
                    slot[s.target] = n_slots
                    n_slots += 1
                releasing.setdefault(last_use[s.target], []).append(slot[s.target])
    staged = Staged(work=n_slots)
    pnames = [p for _, p in params]
    decl = ", ".join(f"{t}{p}" for t, p in params) + ", double *w"
    for name, chunk, mine in zip(names, chunks, own):
        used = set().union(*(s.uses for s in chunk))
        needed_loads = {u for u in used if u in loads}
        touched = used.union(*(loads[u].uses for u in needed_loads))
        lines: list[str] = [f"(void){p};" for p in pnames if p not in touched]
        # values from other stages and inputs are read where they are used: nothing is kept live
        # across the whole stage (a preamble of loads would be, as the stores to w may alias them)
        remote = {u: loads[u].line.split(" = ", 1)[1][:-1] for u in needed_loads}
        remote.update({u: f"w[{slot[u]}]" for u in used - mine - needed_loads if u in slot})
        for s in chunk:
            if s.load:
                continue
            lines.append(_rewrite(s.line, remote) if remote and s.uses & remote.keys() else s.line)
            if s.target in slot:
                lines.append(f"w[{slot[s.target]}] = {s.target};")
        if n_slots == 0:
            lines.append("(void)w;")
        proto = f"void {name}({decl})"
        staged.names.append(name)
        staged.stage_bodies.append(lines)
        staged.prototypes.append(f"SOADYN_STAGE {proto};")
        staged.stages.append(f"SOADYN_STAGE {proto}\n{{\n" + "".join(f"    {x}\n" for x in fuse_pairs(lines))
                             + "}\n")
        staged.costs.append(sum(s.cost for s in chunk))
    return staged


def _rewrite(line: str, remote: dict[str, str]) -> str:
    """Replace the names in ``remote`` by their expressions (only on the right-hand side)."""
    lhs, rhs = line.split(" = ", 1)
    return lhs + " = " + _IDENT.sub(lambda m: remote.get(m.group(0), m.group(0)), rhs)


def stored_entries(body: list[str], outputs: list[str]) -> dict[str, list[tuple[int, str | None]]]:
    """The entries of each output array that a straight-line body stores, in order: (index, the constant
    stored there, or None for a computed value)."""
    out: dict[str, list[tuple[int, str | None]]] = {name: [] for name in outputs}
    for line in body:
        m = OUTPUT_STORE.match(line.strip())
        if m and m.group(1) in out:
            expr = m.group(3).strip()
            out[m.group(1)].append((int(m.group(2)), expr if _is_constant(expr) else None))
    return out


def _natural(name: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


# --------------------------------------------------------------------------------------------------
# SIMD lanes: the batched entry point evaluates `lanes` states at once
# --------------------------------------------------------------------------------------------------
_VFUNCS = {"sin": "soadyn_vsin", "cos": "soadyn_vcos", "sqrt": "soadyn_vsqrt", "pow": "soadyn_vpow",
           C_SIN: "soadyn_vsin", C_COS: "soadyn_vcos"}
_CALL = re.compile(r"\b(soadyn_sin|soadyn_cos|sin|cos|sqrt|pow)\(")
_INDEXED = re.compile(r"\b(\w+)\[(\d+)\]")
_SIN = re.compile(r"\b(?:soadyn_)?sin\(([A-Za-z_]\w*(?:\[\d+\])?)\)")
_COS = re.compile(r"\b(?:soadyn_)?cos\(([A-Za-z_]\w*(?:\[\d+\])?)\)")


def vector_type(lanes: int) -> str:
    return f"soadyn_v{lanes}d"


def simd_prelude(lanes: int) -> str:
    """Type, per-lane math and gather/scatter macros of the SIMD batch code (GCC/Clang vector extensions;
    other compilers get the scalar loop).  Every lane computes exactly what the scalar code computes:
    the same IEEE operations in the same order (``-ffp-contract=off``), the inline ``sin``/``cos`` of
    :mod:`soadyn.codegen.trig` per lane."""
    vd = vector_type(lanes)
    lanes_list = range(lanes)
    ld = ", ".join(f"(p)[{i}*(s)+(k)]" if i else "(p)[k]" for i in lanes_list)

    def lanewise(name: str, f: str) -> str:
        return (f"static inline {vd} {name}({vd} x)\n{{\n    {vd} r;\n    int l;\n"
                f"    for (l = 0; l < {lanes}; ++l) r[l] = {f}(x[l]);\n    return r;\n}}\n")

    return "\n".join([
        "#if (defined(__GNUC__) || defined(__clang__)) && !defined(SOADYN_NO_SIMD) \\",
        f"    && !defined({vd.upper()})",
        f"#define {vd.upper()} 1",
        f"typedef double {vd} __attribute__((vector_size({8 * lanes})));",
        lanewise("soadyn_vsin", C_SIN) + lanewise("soadyn_vcos", C_COS) + lanewise("soadyn_vsqrt", "sqrt"),
        f"static inline {vd} soadyn_vpow({vd} x, double e)\n{{\n    {vd} r;\n    int l;\n"
        "    if (e == 2.0) return x*x;\n"
        f"    for (l = 0; l < {lanes}; ++l) r[l] = pow(x[l], e);\n    return r;\n}}",
        f"static inline void soadyn_vsincos({vd} x, {vd} *s, {vd} *c)\n{{\n"
        + ("    soadyn_sincos4(&x, s, c);\n}" if lanes == 4 else
           f"    int l;\n    for (l = 0; l < {lanes}; ++l) soadyn_sincos(x[l], &(*s)[l], &(*c)[l]);\n}}"),
        f"#define SOADYN_LD(p, k, s) (({vd}){{{ld}}})",
        "#endif",
    ]) + "\n"


def _is_constant(expr: str) -> bool:
    """Whether a C expression of a generated body is a constant: numbers and math calls only (``0``,
    ``-0.5``, ``1.0/2.0``, ``sqrt(2.0)``): a ``double`` even in the SIMD code, where it must be broadcast."""
    names, _ = _names_and_cost(expr)
    return names <= _VFUNCS.keys()


def _vcalls(expr: str) -> str:
    """Math calls -> their vector versions, except a call whose argument is a constant (it stays a scalar
    ``double``, which GCC/Clang broadcast in an operation with a vector)."""
    out, pos = [], 0
    for m in _CALL.finditer(expr):
        if m.start() < pos:
            continue
        depth, end = 1, m.end()
        while depth and end < len(expr):
            depth += {"(": 1, ")": -1}.get(expr[end], 0)
            end += 1
        args = expr[m.end():end - 1]
        if _is_constant(args):
            out.append(expr[pos:end])
        else:
            out.append(expr[pos:m.start()] + _VFUNCS[m.group(1)] + "(" + _vcalls(args) + ")")
        pos = end
    return "".join(out) + expr[pos:]


def _vexpr(expr: str, inputs: dict[str, int], lanes: int = 0) -> str:
    if lanes and _is_constant(expr):
        # a constant: broadcast (x - 0.0 == x exactly for every x, signed zeros included)
        return f"({expr}) - ({vector_type(lanes)}){{0}}"
    expr = _INDEXED.sub(lambda m: (f"SOADYN_LD({m.group(1)}, {m.group(2)}, {inputs[m.group(1)]})"
                                   if m.group(1) in inputs else m.group(0)), expr)
    return _vcalls(expr)


def vectorise_lines(lines: list[str], inputs: dict[str, int], outputs: dict[str, int], lanes: int,
                    rename: dict[str, str],
                    slots: dict[str, dict[int, int]] | None = None) -> list[str] | None:
    """The statements of a straight-line body for ``lanes`` states at once (None if a line is not one
    of the generated forms).  ``inputs``/``outputs``: array parameters and their sizes (state strides);
    ``rename``: called functions (stages) -> their vector versions; ``slots``: output entry -> its slot in
    the lane-major buffer (an entry without a slot, a constant, is not stored there)."""
    vd = vector_type(lanes)
    # sin(x) and cos(x) of one argument: one sincos per lane (what gcc does for the scalar code)
    sins = {a for line in lines for a in _SIN.findall(line)}
    coss = {a for line in lines for a in _COS.findall(line)}
    pairs = {a: k for k, a in enumerate(sorted(sins & coss, key=_natural))}
    done: set[str] = set()
    out = []
    for line in lines:
        s = line.strip()
        m = _ASSIGN.match(s)
        if m:
            expr = m.group(2)
            for a in sorted(set(_SIN.findall(expr) + _COS.findall(expr)) & pairs.keys(), key=_natural):
                k = pairs[a]
                if a not in done:
                    done.add(a)
                    out.append(f"{vd} sc_s{k}, sc_c{k};")
                    out.append(f"soadyn_vsincos({_vexpr(a, inputs)}, &sc_s{k}, &sc_c{k});")
                expr = re.sub(rf"\b(?:soadyn_)?sin\({re.escape(a)}\)", f"sc_s{k}", expr)
                expr = re.sub(rf"\b(?:soadyn_)?cos\({re.escape(a)}\)", f"sc_c{k}", expr)
            out.append(f"const {vd} {m.group(1)} = {_vexpr(expr, inputs, lanes)};")
            continue
        m = OUTPUT_STORE.match(s)
        if m and m.group(1) in outputs:   # into the lane-major output buffer (transposed at the end)
            k = int(m.group(2))
            if slots is not None:
                if k not in slots[m.group(1)]:
                    continue
                k = slots[m.group(1)][k]
            out.append(f"o_{m.group(1)}[{k}] = {_vexpr(m.group(3), inputs, lanes)};")
            continue
        if m and m.group(1) == "w":   # a value crossing stages (a vector work array)
            out.append(f"w[{m.group(2)}] = {_vexpr(m.group(3), inputs, lanes)};")
            continue
        mw = re.match(r"^double w\[(\d+)\];$", s)
        if mw:
            out.append(f"{vd} w[{mw.group(1)}];")
            continue
        mc = re.match(r"^(\w+)\((.*)\);$", s)
        if mc and mc.group(1) in rename:
            args = ", ".join(f"o_{a}" if a in outputs else a for a in mc.group(2).split(", "))
            out.append(f"{rename[mc.group(1)]}({args});")
            continue
        if s.startswith("(void)"):
            name = s[6:-1]
            out.append(f"(void)o_{name};" if name in outputs else s)
            continue
        if (s.startswith("/*") and s.endswith("*/")) or not s:
            out.append(s)
            continue
        return None
    return out


# --------------------------------------------------------------------------------------------------
# a generated function, finished: stages, SIMD lanes, batch loop; translation units
# --------------------------------------------------------------------------------------------------
@dataclass
class Extra:
    """What :func:`finish_function` adds to a generated function (printed before it in the source)."""

    pieces: list[str] = field(default_factory=list)       # C definitions: stages, vector stages, lanes driver
    prototypes: list[str] = field(default_factory=list)
    lanes: int = 1
    vectorised: bool = False
    #: the SIMD computation as a function of its own (``<name>_lanes_core(inputs, o_outputs)``) that a
    #: delegating function reuses: (its name, its parameter list, {output: (slots, [(entry, constant or
    #: None, slot)])})
    core: tuple[str, str, dict[str, tuple[int, list[tuple[int, str | None, int]]]]] | None = None

    @property
    def text(self) -> str:
        if not self.pieces:
            return ""
        return "\n".join(self.prototypes) + "\n\n" + "\n".join(self.pieces)


def _block(signature: str, lines: list[str]) -> str:
    return f"{signature}\n{{\n" + "".join(f"    {x}\n" for x in lines) + "}\n"


def _guarded(lanes: int, text: str) -> str:
    return f"#ifdef {vector_type(lanes).upper()}\n{text}#endif\n"


def finish_function(f, stage_ops: int, lanes: int, finished: dict | None = None) -> None:
    """Split ``f`` (an :class:`~soadyn.codegen.emit.EmittedFunction`) into stages when it is long
    (``stage_ops`` > 0) and give its batch entry a ``lanes``-wide SIMD path (``lanes`` > 1); in place.
    Frame families keep their body and scalar batch loop.  A function with ``f.delegate`` gets its SIMD
    batch from its nonzero-only variant's vector computation (``finished``: the functions by C name, the
    variant already finished)."""
    extra = Extra(lanes=lanes)
    f.extra = extra
    params = [("const double *", a.name) for a in f.inputs] + [("double *", a.name) for a in f.outputs]
    stored = stored_entries(f.body, [a.name for a in f.outputs])
    if f.is_family:
        staged = split_family(f.cname, params, f.body, stage_ops) if stage_ops > 0 else None
        if staged is not None:
            f.body = staged.body
            extra.prototypes += staged.prototypes
            extra.pieces += staged.stages
        return
    # product loops (the body's last lines) run after the statements, staged or not; scalar batches.
    # The scratch arrays of their factors (declared first) are filled by the stages like outputs.
    n_epi = len(f.epilogue)
    scratch = getattr(f, "scratch", [])
    decls = f.body[:len(scratch)]
    statements = f.body[len(scratch):len(f.body) - n_epi]
    staged = split_stages(f.cname, params + [("double *", n) for n, _ in scratch], statements,
                          stage_ops) if stage_ops > 0 else None
    if staged is not None:
        f.body = decls + staged.body + f.body[len(f.body) - n_epi:]
        extra.prototypes += staged.prototypes
        extra.pieces += staged.stages
    main = f.body
    if n_epi:
        # the SIMD batch of a function with general products: from its statements with the products as
        # expressions (the same roundings), staged on their own
        lanes_body = getattr(f, "lanes_body", None)
        if lanes_body is None or lanes <= 1:
            return
        staged = split_stages(f.cname, params, lanes_body, stage_ops) if stage_ops > 0 else None
        main = staged.body if staged is not None else lanes_body
        stored = stored_entries(lanes_body, [a.name for a in f.outputs])
    if getattr(f, "delegate", None) is not None:
        _finish_delegate(f, extra, lanes, (finished or {})[f.delegate[0]])
        return
    if lanes <= 1:
        return
    inputs = {a.name: a.size for a in f.inputs}
    outputs = {a.name: a.size for a in f.outputs}
    # outputs stored whole with computed values (in any order) keep slot = entry and are copied back by
    # one loop; the others are packed
    packed = {a.name: sorted(k for k, _ in stored[a.name]) != list(range(a.size))
              or any(c is not None for _, c in stored[a.name]) for a in f.outputs}
    slots: dict[str, dict[int, int]] = {}
    for a in f.outputs:
        computed = [k for k, c in stored[a.name] if c is None]
        slots[a.name] = {k: j for j, k in enumerate(computed)} if packed[a.name] else {k: k for k in computed}
    vname = f"{f.cname}_lanes"
    vd = vector_type(lanes)
    decl = ", ".join(f"{t}{p}" for t, p in params)
    vdecl = ", ".join([f"const double *{a.name}" for a in f.inputs]
                      + [f"{vd} *o_{a.name}" for a in f.outputs])
    rename = {}
    vpieces, vprotos = [], []
    if staged is not None:
        for name, body in zip(staged.names, staged.stage_bodies):
            vstage = name.replace(f.cname + "_stage", vname + "_stage")
            rename[name] = vstage
            vbody = vectorise_lines(body, inputs, outputs, lanes, {}, slots)
            if vbody is None:
                return
            sig = f"void {vstage}({vdecl}, {vd} *w)"
            vprotos.append(f"SOADYN_STAGE {sig};")
            vpieces.append(_guarded(lanes, _block(f"SOADYN_STAGE {sig}", vbody)))
    vbody = vectorise_lines(main, inputs, outputs, lanes, rename, slots)
    if vbody is None:
        return
    if getattr(f, "core", False):   # a function whose SIMD computation a delegating function reuses
        core = f"{vname}_core"
        vprotos.append(f"void {core}({vdecl});")
        vpieces.append(_guarded(lanes, _block(f"void {core}({vdecl})", vbody)))
        vbody = [f"{core}({', '.join([a.name for a in f.inputs] + [f'o_{a.name}' for a in f.outputs])});"]
        extra.core = (core, vdecl, {a.name: (len(slots[a.name]), [(k, c, slots[a.name].get(k, -1))
                                                                  for k, c in stored[a.name]])
                                    for a in f.outputs})
    # lane-major buffers, transposed into the callers' arrays at the end: measured 185 vs 347 ns per
    # state for the Panda's mass matrix against extracting each lane at every output store.  An output
    # with constant entries (the mass matrix's structural zeros) or entries left alone (its variants for a
    # zeroed output) keeps only its computed entries there, in slots, and the transposition writes each
    # stored entry by name, the constants directly
    plain = [a for a in f.outputs if not packed[a.name]]
    vbody = ([f"{vd} o_{a.name}[{max(len(slots[a.name]), 1)}];" for a in f.outputs] + vbody
             + ["int k, l;" if plain else "int l;"])
    for a in f.outputs:
        if not packed[a.name]:
            vbody.append(f"for (k = 0; k < {a.size}; ++k) for (l = 0; l < {lanes}; ++l) "
                         f"{a.name}[l * {a.size} + k] = o_{a.name}[k][l];")
            continue
        vbody += _transposition(a.name, a.size, lanes, [(k, c, slots[a.name].get(k, -1))
                                                         for k, c in stored[a.name]], zeroed=False)
    sig = f"void {vname}({decl})"
    vprotos.append(f"{sig};")
    vpieces.append(_guarded(lanes, _block(sig, vbody)))
    extra.prototypes += [_guarded(lanes, "\n".join(vprotos) + "\n")]
    extra.pieces += vpieces
    extra.vectorised = True
    f.batch_body = _lanes_batch_body(f, vname, lanes)


def _lanes_batch_body(f, vname: str, lanes: int) -> list[str]:
    """The batched entry of ``f``: ``lanes`` states at a time through ``vname``, the rest one by one."""
    vd = vector_type(lanes)
    lane_args = ", ".join(f"{a.name} + (long)i * {a.size}" for a in [*f.inputs, *f.outputs])
    return ["int i = 0;", f"#ifdef {vd.upper()}",
            f"for (; i + {lanes} <= n; i += {lanes}) {{",
            f"    {vname}({lane_args});", "}", "#endif",
            "for (; i < n; ++i) {", f"    {f.cname}({f.batch_args});", "}"]


def _transposition(name: str, size: int, lanes: int, entries: list[tuple[int, str | None, int]],
                   zeroed: bool = True) -> list[str]:
    """Lines copying the lane-major buffer ``o_<name>`` into the callers' arrays: ``entries`` (entry,
    constant or None, slot); a constant is stored directly.  With ``zeroed``, zeros (``"0"``) are left
    out: a delegating function clears its states' rows with one memset first (a thousand unrolled zero
    stores cost gcc seconds of alias analysis); any other function stores them like the other constants.
    More than :data:`UNROLLED_STORES` computed entries are copied by a loop over a table of their entries
    in slot order, one vector load and ``lanes`` stores per entry: written out one store per line, gcc's
    alias walkers (DSE, PRE) take time quadratic in their number (4.4 s of gcc CPU for the 37-DOF mass
    matrix inverse's 1,369 entries, 0.06 s as a loop; the batched entries of the mass matrix family run
    as fast or faster, measured in issue 11)."""
    consts = [(k, c) for k, c, _ in entries if c is not None and not (zeroed and c == "0")]
    vd = vector_type(lanes)
    computed = sorted((slot, k) for k, c, slot in entries if c is None)
    if len(computed) <= UNROLLED_STORES:
        lines = [f"    {name}[l * {size} + {k}] = {c};" if c is not None else
                 f"    {name}[l * {size} + {k}] = o_{name}[{slot}][l];" for k, c, slot in entries
                 if not (zeroed and c == "0")]
        return [f"for (l = 0; l < {lanes}; ++l) {{", *lines, "}"]
    n = len(computed)
    if [slot for slot, _ in computed] == list(range(n)):     # slots 0 .. n-1: a table of the entries
        table = ", ".join(str(k) for _, k in computed)
        out = [f"static const int tr_{name}[{n}] = {{{table}}};",
               f"for (j = 0; j < {n}; ++j) {{", f"    const {vd} t = o_{name}[j];",
               f"    const int e = tr_{name}[j];"]
    else:                                                      # a subset of the slots: (entry, slot) pairs
        table = ", ".join(f"{{{k}, {slot}}}" for slot, k in computed)
        out = [f"static const int tr_{name}[{n}][2] = {{{table}}};",
               f"for (j = 0; j < {n}; ++j) {{", f"    const {vd} t = o_{name}[tr_{name}[j][1]];",
               f"    const int e = tr_{name}[j][0];"]
    out += [f"    for (l = 0; l < {lanes}; ++l) {name}[l * {size} + e] = t[l];", "}"]
    if consts:
        out += [f"for (l = 0; l < {lanes}; ++l) {{",
                *(f"    {name}[l * {size} + {k}] = {c};" for k, c in consts), "}"]
    return ["{", "int j;", *out, "}"]


def _finish_delegate(f, extra: Extra, lanes: int, target) -> None:
    """SIMD batch of a full-writing function from its nonzero-only variant ``target``: the variant's SIMD
    computation (its ``_lanes_core``), one memset of the lanes' rows, then the transposition of the
    computed entries and the variant's constants."""
    t_extra = getattr(target, "extra", None)
    if lanes <= 1 or t_extra is None or t_extra.core is None:
        return
    core, vdecl, layout = t_extra.core
    vd = vector_type(lanes)
    params = [("const double *", a.name) for a in f.inputs] + [("double *", a.name) for a in f.outputs]
    decl = ", ".join(f"{t}{p}" for t, p in params)
    vname = f"{f.cname}_lanes"
    body = [f"{vd} o_{a.name}[{max(layout[a.name][0], 1)}];" for a in f.outputs]
    args = ", ".join([a.name for a in f.inputs] + [f"o_{a.name}" for a in f.outputs])
    body += [f"{core}({args});", "int l;"]
    _, keep, zero = f.delegate
    for a in f.outputs:
        if zero:
            body.append(f"memset({a.name}, 0, sizeof(double) * {lanes * a.size});")
        body += _transposition(a.name, a.size, lanes, [e for e in layout[a.name][1] if e[0] in keep[a.name]])
    extra.prototypes.append(_guarded(lanes, f"void {core}({vdecl});\nvoid {vname}({decl});\n"))
    extra.pieces.append(_guarded(lanes, _block(f"void {vname}({decl})", body)))
    extra.vectorised = True
    f.batch_body = _lanes_batch_body(f, vname, lanes)


def prelude(lanes: int) -> str:
    """Lines that every source file with finished functions needs after its includes."""
    text = "\n".join(STAGE_MACRO) + "\n"
    return text + PRELUDE + (simd_prelude(lanes) if lanes > 1 else "")


def translation_units(funcs: list, header_text: str) -> list[tuple[str, str]]:
    """``(file stem, C text)`` per translation unit: the pieces of one function
    (its stages, scalar and SIMD, in order, then the function with its batch entry), consecutive pieces
    packed into units of about :data:`UNIT_OPS` operations.  A unit holds pieces of one function only
    and is self-contained: the function's prototypes and, for a frame family, the frame enum taken from
    ``header_text`` (the module header, or the header of a module holding just that function) stand in
    for the module header, so its text alone is the object-cache key (:mod:`soadyn.codegen.objcache`) and
    an unchanged function keeps its objects."""
    units: list[tuple[str, str]] = []
    for f in funcs:
        extra: Extra | None = getattr(f, "extra", None)
        lanes = extra.lanes if extra else 1
        memset = extra is not None and extra.vectorised and (getattr(f, "delegate", None) or (0, 0, False))[2]
        strings = "#include <string.h>\n" if memset else ""
        # self-contained: the function's own declarations (and a family's frame enum) instead of the module
        # header, so that a unit compiles before the other functions exist (units are compiled while the
        # rest of the module is derived) and its text alone decides its object
        enum = _enum_block(header_text) if f.is_family else ""
        head = (f"#include <math.h>\n{strings}{enum}{f.prototype}\n{f.batch_prototype}\n" + prelude(lanes))
        protos = "\n".join(extra.prototypes) + "\n" if extra and extra.prototypes else ""
        pieces = list(extra.pieces) if extra else []
        per = f.ops.get("total", 0) // max(1, len(pieces))
        own = pieces[-1:] if extra and extra.vectorised else []    # the SIMD driver goes with the function
        rest = pieces[:len(pieces) - len(own)]
        groups = _pack(rest, per)
        for k, group in enumerate(groups[:-1]):
            units.append((f"{f.cname}_{k}", head + protos + "\n".join(group)))
        last = groups[-1] if groups else []
        text = head + protos + "\n".join(last + own) + _function_text(f)
        units.append((f.cname, text))
    return units


_ENUM = re.compile(r"^enum \w+ \{\n.*?^\};\n#define \w+_N_FRAMES \d+\n", re.S | re.M)


def _enum_block(header_text: str) -> str:
    """The frame enum of a module header and the number of frames (as the header writes them)."""
    m = _ENUM.search(header_text)
    if m is None:
        raise ValueError("a frame family's unit needs the header's frame enum; none found")
    return m.group(0)


def _pack(pieces: list[str], per: int) -> list[list[str]]:
    """Consecutive ``pieces`` (``per`` operations each) in as few groups of at most :data:`UNIT_OPS`
    operations as there can be (at least one piece each), of equal sizes."""
    if not pieces:
        return []
    groups = -(-len(pieces) // max(1, UNIT_OPS // max(per, 1)))
    size = -(-len(pieces) // groups)
    return [pieces[i:i + size] for i in range(0, len(pieces), size)]


def _function_text(f) -> str:
    helpers = "".join(f"\n{h}" for h in f.helpers)
    unused = "".join(f"    (void){a};\n" for a in f.unused)
    body = "".join(f"    {x}\n" if not x.startswith("#") else f"{x}\n" for x in fuse_pairs(f.body))
    batch = "".join(f"    {x}\n" if not x.startswith("#") else f"{x}\n" for x in f.batch_body)
    return f"{helpers}\n{f.signature}\n{{\n{unused}{body}}}\n\n{f.batch_signature}\n{{\n{batch}}}\n"
