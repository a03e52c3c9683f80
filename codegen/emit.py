"""Optimised programs -> typed statements -> C99 source and header (Jinja templates), plus the cffi
declarations.

:func:`emit_function` turns an optimised program into an :class:`EmittedFunction` whose body is a list of
typed statements (:mod:`soadyn.codegen.cprogram`: input loads, trig, arithmetic, output stores, product
loop calls), the loads sunk to their first reader; the structured variants and zero-wrench calls are
other statement lists from the same program.  The templates print them once, with
:class:`~soadyn.codegen.printer.CPrinter`.

Every generated function is plain C99: ``const double *`` inputs, ``double *`` outputs (row-major), one
``const double`` local per staged quantity (the algorithm's names, e.g. ``V3_4``) or common subexpression
(``t12``), no allocation, no globals, reentrant.  ``<name>_batch(int n, ...)`` loops over ``n`` states
stored contiguously.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

import jinja2
import symengine as se

import soadyn.codegen.cprogram as cp
from soadyn._version import __version__
from soadyn.codegen.cprogram import ZERO_RUN, Stmt, sink_loads
from soadyn.codegen.derive import DerivationError, Program, scratch_size
from soadyn.codegen.functions import FunctionSpec, c_identifier, frame_enum
from soadyn.codegen.optimise import count_ops, eliminate_dead_code, split_cases
from soadyn.codegen.printer import CPrinter, ExpressionPrinter
from soadyn.codegen.products import (
    expanded_products,
    mirrored_entries,
    overwritten_entries,
    shared_functions,
)
from soadyn.codegen.schedule import pressure_order, statement_deps, worth_scheduling
from soadyn.codegen.sections import section_of
from soadyn.codegen.trig import PRELUDE as TRIG_PRELUDE
from soadyn.codegen.trig import fuse_trig
from soadyn.codegen.units import (
    LOAD_ONCE_FUNCTIONS,
    PRIORITY_RA_FUNCTIONS,
    SIMD_FUNCTIONS,
    SLP_FUNCTIONS,
    WINDOW_FUNCTIONS,
    finish_function,
)
from soadyn.model.names import c_comment, py_doc, py_literal
from soadyn.model.robot import Robot


def generator_version() -> str:
    return __version__


@dataclass
class EmittedFunction:
    cname: str
    doc: str
    inputs: list[Any]
    outputs: list[Any]
    ops: dict[str, int]
    signature: str
    batch_signature: str
    batch_args: str
    prototype: str
    batch_prototype: str
    #: the typed statements (:mod:`soadyn.codegen.cprogram`), printed by :mod:`soadyn.codegen.printer`
    body: list[Stmt]
    unused: list[str]
    batch_body: list[str] = field(default_factory=list)
    #: the batch entry's parameters (``int n, const double *q, ..., double *M``): its signature's, which
    #: a variant of the entry (:func:`soadyn.codegen.lanes.batch_checked_text`) extends
    batch_params: str = ""
    #: a frame family: the batch entry's test of the frame id (its first line, :func:`_family_body`),
    #: which its SIMD batch entry keeps (:func:`soadyn.codegen.lanes.finish_lanes`)
    frame_check: str = ""
    #: frame families: ops of the shared prefix and [(frame name, enumerator, ops of its case)]
    prefix_ops: dict[str, int] | None = None
    case_ops: list[tuple[str, str, dict[str, int]]] = field(default_factory=list)
    #: stage functions and SIMD batch code (:func:`soadyn.codegen.units.finish_function`)
    extra: Any = None
    #: the body's last lines, run after its statements: calls of the program's products
    #: (:func:`product_function`), whose definitions are ``helpers`` (printed before the function)
    epilogue: list[Stmt] = field(default_factory=list)
    helpers: list[str] = field(default_factory=list)
    #: scratch arrays (name, size) declared first in the body: the factors of general products, filled by
    #: the statements like outputs
    scratch: list[tuple[str, int]] = field(default_factory=list)
    #: the program's products (:class:`~soadyn.codegen.derive.Product`) that ``epilogue`` calls
    products: list[Any] = field(default_factory=list)
    #: a function with general products: its statements with the products as expressions (the same
    #: operations in the same order as the loops), from which the SIMD batch is made
    lanes_body: list[Stmt] | None = None
    #: output entries the function stores (all of them unless it skips structural zeros)
    stores: int = 0
    #: a function whose SIMD batch reuses the nonzero-only variant's vector computation: (the variant's C
    #: name, {output: the entries this function stores}, whether the lanes' rows are zeroed first)
    delegate: tuple[str, dict[str, set[int]], bool] | None = None
    #: the nonzero-only variant that such a function reuses: its SIMD computation is a function of its own
    core: bool = False
    #: a frame family: the C of the frame enum its self-contained translation unit starts with
    enum_text: str = ""
    #: a function that calls its ``*_fext`` twin with zero wrenches (:func:`emit_zero_fext_call`): the
    #: twin's C name and its inputs (name, size) in order; a SIMD build's batch runs the twin's batch
    #: entry on zero wrenches (:func:`soadyn.codegen.lanes.finish_zero_fext`)
    zero_fext: str = ""
    zero_fext_inputs: tuple[tuple[str, int], ...] = ()
    #: its translation units are compiled with gcc's priority register allocator
    #: (:data:`~soadyn.codegen.units.PRIORITY_RA_FUNCTIONS`)
    priority_ra: bool = False
    #: its translation units let gcc's SLP vectoriser pair its scalar operations, fused multiply-adds
    #: excluded (:data:`~soadyn.codegen.units.SLP_FUNCTIONS`)
    slp: bool = False
    #: its stage functions read each work-array value once (:data:`~soadyn.codegen.units.LOAD_ONCE_FUNCTIONS`)
    load_once: bool = False
    #: its stage functions reach their most used work-array values through base pointers
    #: (:data:`~soadyn.codegen.units.WINDOW_FUNCTIONS`)
    windows: bool = False

    @property
    def is_family(self) -> bool:
        return self.prefix_ops is not None

    def ops_text(self) -> str:
        """One-line operation count: the total, or prefix + per-frame cases for a family."""
        if self.prefix_ops is None:
            return f"operations: {self.ops['total']}"
        cases = ", ".join(f"'{c_comment(name, 60)}' {ops['total']}" for name, _, ops in self.case_ops)
        return (f"operations: shared prefix {self.prefix_ops['total']} + the case of the frame "
                f"({cases}); {self.ops['total']} in all")


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(
            lambda name: resources.files("soadyn.templates").joinpath(name).read_text(encoding="utf-8")),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["c_comment"] = c_comment
    env.filters["pyrepr"] = repr
    env.filters["pystr"] = py_literal
    env.filters["pystrs"] = lambda xs: "[" + ", ".join(py_literal(x) for x in xs) + "]"
    env.filters["pydoc"] = py_doc
    env.filters["print_body"] = lambda body: CPrinter().lines(fuse_trig(body))
    return env


def render(template: str, **kw: Any) -> str:
    """Render one of the package templates (``soadyn/templates/<template>``)."""
    return _environment().get_template(template).render(**kw)


def _used_names(program: Program) -> set[str]:
    used: set[str] = set()
    for _, e in program.assignments:
        used.update(s.name for s in e.free_symbols)
    for _, es in program.outputs:
        for e in es:
            if not e.is_Number:
                used.update(s.name for s in e.free_symbols)
    return used


def _assignments(assigns: list[tuple[se.Basic, se.Basic]], pr: ExpressionPrinter,
                 stages: dict[str, str]) -> list[Stmt]:
    """The assignments, with a section comment (:mod:`soadyn.codegen.sections`) wherever the recursion
    stage changes."""
    out: list[Stmt] = []
    current = None
    for t, e in assigns:
        section = section_of(stages.get(t.name, ""))
        if section is not None and section != current:
            out.append(cp.comment(c_comment(section)))
            current = section
        out.append(cp.value(t.name, pr(e)))
    return out


def _scheduled(program: Program, outs: list[tuple[str, int, se.Basic]], pr: ExpressionPrinter) -> list[Stmt]:
    """The assignments and the output stores ``outs`` in register-pressure order
    (:func:`soadyn.codegen.schedule.pressure_order`), each stage's comment before its first statement."""
    targets = [t for t, _ in program.assignments]
    exprs = [e for _, e in program.assignments] + [e for _, _, e in outs]
    deps = statement_deps([e.free_symbols for e in exprs], [*targets, *([None] * len(outs))])
    order = pressure_order(deps, [True] * len(targets) + [False] * len(outs))
    body = [cp.comment("statements in register-pressure order (codegen/schedule.py): the stages interleave, "
                       "each stage's comment is before its first statement")]
    seen: set[str] = set()
    for k in order:
        if k < len(targets):
            t = targets[k]
            section = section_of(program.stages.get(t.name, ""))
            if section is not None and section not in seen:
                body.append(cp.comment(c_comment(section)))
                seen.add(section)
            body.append(cp.value(t.name, pr(exprs[k])))
        else:
            name, i, _ = outs[k - len(targets)]
            body.append(cp.store(name, i, pr(exprs[k])))
    return body




def _stores(name: str, es: list[se.Basic], pr: ExpressionPrinter) -> list[Stmt]:
    """Stores of every element of the output ``name``; runs of exact zeros as short loops (no element is
    left unwritten: the caller's buffer may hold anything)."""
    out: list[Stmt] = []
    i, n = 0, len(es)
    while i < n:
        j = i
        while j < n and es[j].is_Number and es[j] == 0:
            j += 1
        if j - i >= ZERO_RUN:
            out += cp.zero_run(name, i, j)
            i = j
            continue
        out.append(cp.store(name, i, pr(es[i])))
        i += 1
    return out


def _signatures(spec: FunctionSpec, cname: str) -> tuple[str, str, str, str]:
    """The C signature of the function, of its batch entry, the arguments of the batch's call of state
    ``i``, and the batch entry's parameters."""
    family = spec.is_family
    params_in = [f"const double *{a.name}" for a in spec.inputs] + (["int frame"] if family else [])
    params_out = [f"double *{a.name}" for a in spec.outputs]
    ret = "int" if family else "void"
    signature = f"{ret} {cname}({', '.join(params_in + params_out)})"
    batch_params = ", ".join(["int n"] + params_in + params_out)
    batch_signature = f"{ret} {cname}_batch({batch_params})"
    batch_args = ", ".join([f"{a.name} + (long)i * {a.size}" for a in spec.inputs]
                           + (["frame"] if family else [])
                           + [f"{a.name} + (long)i * {a.size}" for a in spec.outputs])
    return signature, batch_signature, batch_args, batch_params


def emit_zero_fext_call(spec: FunctionSpec, program: Program, prefix: str) -> EmittedFunction:
    """A function without external wrenches that calls its ``*_fext`` variant (``spec.zero_fext_call``,
    whose optimised ``program`` it runs) with a zero ``f_ext`` array on its stack: one compiled body for
    both (:data:`~soadyn.codegen.functions.ZERO_FEXT_CALLS`).  Its operation counts are the variant's."""
    cname = prefix + spec.name
    target = prefix + spec.zero_fext_call
    signature, batch_signature, batch_args, batch_params = _signatures(spec, cname)
    sizes = {name: len(syms) for name, syms in program.inputs}
    if "f_ext" not in sizes or {a.name for a in spec.inputs} != set(sizes) - {"f_ext"}:
        raise DerivationError(f"{cname}: {target} does not take this function's inputs and f_ext")
    params = ([f"const double *{name}" for name, _ in program.inputs]
              + [f"double *{a.name}" for a in spec.outputs])
    args = [name for name, _ in program.inputs] + [a.name for a in spec.outputs]
    body = [Stmt(cp.SCRATCH, "f_ext", index=sizes["f_ext"], zero=True), cp.call(target, args)]
    loop = ["int i;", "for (i = 0; i < n; ++i) {", f"    {cname}({batch_args});", "}"]
    doc = f"{spec.doc}: {target} with zero external wrenches"
    return EmittedFunction(cname, c_comment(doc), list(spec.inputs), list(spec.outputs),
                           dict(program.ops), signature, batch_signature, batch_args, signature + ";",
                           batch_signature + ";", body, [], loop, batch_params,
                           helpers=[f"void {target}({', '.join(params)});"], zero_fext=target,
                           zero_fext_inputs=tuple((name, len(syms)) for name, syms in program.inputs))


def _input_loads(program: Program) -> tuple[list[Stmt], list[str], set[str]]:
    """The loads of the input elements the program reads, the input arrays it does not read, and the
    names an expression may use (inputs and locals)."""
    known: set[str] = {t.name for t, _ in program.assignments}
    used = _used_names(program)
    body: list[Stmt] = []
    unused: list[str] = []
    for name, syms in program.inputs:
        any_used = False
        for i, s in enumerate(syms):
            known.add(s.name)
            if s.name in used:
                body.append(cp.load(s.name, name, i))
                any_used = True
        if not any_used:
            unused.append(name)
    return body, unused, known


def emit_function(spec: FunctionSpec, program: Program, prefix: str,
                  enum: list[tuple[str, str, int]] | None = None,
                  skip_zeros: bool = False) -> EmittedFunction:
    """The typed statements of one optimised program (a frame family needs ``enum``, see
    :func:`frame_enum`): its input loads, assignments and output stores, then its product loops.

    ``skip_zeros``: no store for an output entry that is the exact zero (a structural zero, the same for
    every input): the function then needs a zeroed output (:func:`structured_variants`)."""
    cname = prefix + spec.name
    signature, batch_signature, batch_args, batch_params = _signatures(spec, cname)
    loads, unused, known = _input_loads(program)
    pr = ExpressionPrinter(known, f"{cname}")
    f = EmittedFunction(cname, c_comment(spec.doc), list(spec.inputs), list(spec.outputs),
                        dict(program.ops), signature, batch_signature, batch_args, signature + ";",
                        batch_signature + ";", loads, unused, ["int i;"], batch_params)
    if spec.is_family:
        _family_body(f, spec, program, pr, enum, prefix)
    else:
        _straight_body(f, spec, program, pr, skip_zeros)
    return f


def _straight_body(f: EmittedFunction, spec: FunctionSpec, program: Program, pr: ExpressionPrinter,
                   skip_zeros: bool) -> None:
    """``f``'s statements (after its loads) for a straight-line function, its product loops last."""
    factors = {p.left for p in program.products if p.k}
    overwritten = overwritten_entries(program.products)
    mirrored = mirrored_entries(program.products) | overwritten
    # a factor's entries are all stored, but those a masked product writes there (its results, B of the next)
    outs = [(name, i, e) for name, es in program.outputs for i, e in enumerate(es)
            if (name in factors and (name, i) not in overwritten)
            or ((name, i) not in mirrored and not (skip_zeros and e == 0))]
    f.stores = sum(1 for name, _, _ in outs if name not in factors)
    body = f.body
    if worth_scheduling([a.size for a in spec.inputs], [a.size for a in spec.outputs]):
        body += _scheduled(program, outs, pr)
    else:
        body += _assignments(program.assignments, pr, program.stages)
        body += [cp.store(name, i, pr(e)) for name, i, e in outs]
    body = sink_loads(body)
    f.batch_body += ["for (i = 0; i < n; ++i) {", f"    {f.cname}({f.batch_args});", "}"]
    f.products = list(program.products)
    texts, calls = shared_functions(list(program.products), f.cname)
    f.helpers += texts
    f.epilogue += calls
    for p in program.products:
        if p.k:                        # the scratch array of a general product's factors
            f.scratch.append((p.left, scratch_size(p)))
    if program.products:
        f.lanes_body = expanded_products(body, program.products)
    f.body = [Stmt(cp.SCRATCH, n, index=size) for n, size in f.scratch] + body + f.epilogue


def _family_body(f: EmittedFunction, spec: FunctionSpec, program: Program, pr: ExpressionPrinter,
                 enum: list[tuple[str, str, int]] | None, prefix: str) -> None:
    """``f``'s statements (after its loads) for a frame family: the shared prefix, then a switch with
    the statements of each frame."""
    if program.products:
        raise DerivationError(f"{f.cname}: a frame family cannot have product loops")
    if enum is None or len(enum) != len(spec.frames):
        raise DerivationError(f"{f.cname}: frame family without a matching frame enum")
    split = split_cases(program, len(spec.frames))
    body = f.body + _assignments(split.prefix, pr, program.stages)
    cases = []
    for (assigns, outs), (fname, enumerator, _), ops in zip(split.cases, enum, split.case_ops):
        stmts = _assignments(assigns, pr, program.stages)
        for name, es in outs:
            stmts += _stores(name, es, pr)
        cases.append(cp.Case(enumerator, f"'{c_comment(fname)}': {ops['total']} operations", stmts))
        f.case_ops.append((fname, enumerator, ops))
    body.append(Stmt(cp.SWITCH, cases=cases))
    f.body = sink_loads(body)
    f.prefix_ops = split.prefix_ops
    # what the C holds: quantities copied into several cases count once per copy
    f.ops = {k: f.prefix_ops[k] + sum(o[k] for o in split.case_ops) for k in f.prefix_ops}
    n_frames = f"{prefix.upper()}N_FRAMES"
    f.frame_check = f"if (frame < 0 || frame >= {n_frames}) return 1;"
    f.batch_body += [f.frame_check,
                     "for (i = 0; i < n; ++i) {", f"    (void){f.cname}({f.batch_args});", "}", "return 0;"]


#: functions that also get structured variants (:func:`structured_variants`): the square output's name
STRUCTURED = {"mass_matrix": "M"}
#: what the variants' documentation says about the output buffer
ZEROED = "needs a zeroed output: the entries not written are the exact zeros of every state"
#: a new result of the Python ``mass_matrix(triangle="full")`` is ``numpy.zeros`` + the nonzero-only variant
#: when at least this fraction of the entries are structural zeros, else ``numpy.empty`` + the full-writing
#: function.  Measured from Python over 20,000 states (``benchmarks/README.md``, issue 11 item 3): with 59 %
#: zeros (the four-arm robot) zeros + nonzero stores was 3-5 % faster per state, with 8 % zeros (the Panda)
#: 5-52 % slower.
SPARSE_NEW_RESULT = 0.5


def _masked(program: Program, keep) -> Program:
    """``program`` with the output entries that ``keep(name, i)`` rejects set to zero, dead code removed and
    the operations counted again."""
    outputs = [(n, [e if keep(n, i) else se.Integer(0) for i, e in enumerate(es)])
               for n, es in program.outputs]
    p = eliminate_dead_code(Program(program.name, program.inputs, program.assignments, outputs, {},
                                    program.stages))
    p.ops = count_ops(p)
    return p


def structured_variants(spec: FunctionSpec, program: Program, prefix: str) -> list[EmittedFunction]:
    """Variants of a function with a square, symmetric output (:data:`STRUCTURED`) that write less than the
    whole matrix into a **zeroed** output (issue 11, item 3):

    * ``<name>_nz``: only the structurally nonzero entries (the exact zeros, e.g. between bodies on
      different branches of a tree, are not stored);
    * ``<name>_upper``: only the structurally nonzero entries with ``i <= j`` (upper triangle, row-major);
      what only the lower triangle needs is removed as dead code.

    The full-writing function stays: it is the one for a buffer of unknown contents."""
    out_name = STRUCTURED.get(spec.name)
    if out_name is None or spec.is_family:
        return []
    n = next(a.shape[0] for a in spec.outputs if a.name == out_name)
    nz = replace(spec, name=f"{spec.name}_nz",
                 doc=f"{spec.doc}, structurally nonzero entries only ({ZEROED})")
    upper = replace(spec, name=f"{spec.name}_upper",
                    doc=f"{spec.doc}, upper triangle (i <= j), structurally nonzero entries only ({ZEROED})")
    upper_program = _masked(program, lambda name, i: name != out_name or i // n <= i % n)
    return [emit_function(nz, program, prefix, skip_zeros=True),
            emit_function(upper, upper_program, prefix, skip_zeros=True)]


def _delegate_to_nonzero(funcs: list[EmittedFunction], nz: EmittedFunction, program: Program) -> None:
    """Let the SIMD batches of the full-writing function and of the upper variant (``funcs``) reuse the
    vector computation of the nonzero-only variant ``nz``: the long body is vectorised and compiled once
    for all three (the full one zeroes the lanes' rows with one memset, then every function transposes the
    entries it stores).  The scalar functions keep their own bodies, the full-writing one unchanged: a
    full-writing function that called the variant after a memset measured 1,437 against 1,340 ns per state
    on the four-arm robot in one run, but unchanged code varied as much between runs on the shared machine,
    so nothing was traded for it."""
    full, upper = funcs
    shapes = {a.name: a.shape for a in full.outputs}
    full.delegate = (nz.cname, {name: set(range(len(es))) for name, es in program.outputs}, True)
    upper.delegate = (nz.cname, {name: {i for i in range(len(es)) if len(shapes[name]) != 2
                                        or i // shapes[name][1] <= i % shapes[name][1]}
                                 for name, es in program.outputs}, False)
    nz.core = True


def module_prefix(module_name: str) -> str:
    return c_identifier(module_name) + "_"


def enum_block(enum: list[tuple[str, str, int]], enum_name: str, n_frames: str) -> str:
    """C of the frame enum (the frame ids of the families) and the number of frames, as the header and
    a family's self-contained translation unit print it."""
    lines = [f"enum {enum_name} {{"]
    lines += [f'    {e} = {i},{" " * (40 - len(e))}/* "{c_comment(name)}" */' for name, e, i in enum]
    return "\n".join([*lines, "};", f"#define {n_frames} {len(enum)}"])


def _common(robot: Robot, module_name: str) -> dict[str, Any]:
    return dict(robot=robot, version=generator_version(), source_hash=robot.source_hash or "n/a",
                fingerprint=robot.fingerprint(), header_name=f"{module_name}.h",
                source_name=f"{module_name}.c")


def emit_functions(robot: Robot, module_name: str, specs: list[FunctionSpec],
                   programs: list[Program]) -> tuple[list[EmittedFunction], list[bool]]:
    """The C functions of ``specs`` (each with its structured variants), unfinished, and whether each gets
    a SIMD batch: what :func:`emit_module` renders."""
    prefix = module_prefix(module_name)
    enum = frame_enum(robot, module_name)
    funcs: list[EmittedFunction] = []
    simd: list[bool] = []
    for s, p in zip(specs, programs):
        if s.zero_fext_call:
            funcs.append(emit_zero_fext_call(s, p, prefix))
            simd.append(s.zero_fext_call in SIMD_FUNCTIONS)
            continue
        main = emit_function(s, p, prefix, enum)
        variants = structured_variants(s, p, prefix)
        if variants:
            _delegate_to_nonzero([main, variants[1]], variants[0], p)
        group = [main, *variants]
        for f in group:
            f.priority_ra = s.name in PRIORITY_RA_FUNCTIONS
            f.slp = s.name in SLP_FUNCTIONS
            f.load_once = s.name in LOAD_ONCE_FUNCTIONS
            f.windows = s.name in WINDOW_FUNCTIONS
        funcs += group
        simd += [s.name in SIMD_FUNCTIONS] * len(group)
    return funcs, simd


def emit_module(robot: Robot, module_name: str, specs: list[FunctionSpec],
                programs: list[Program], stage_ops: int = 0, lanes: int = 1,
                emitted: tuple[list[EmittedFunction], list[bool]] | None = None
                ) -> tuple[dict[str, str], str, list[EmittedFunction]]:
    """Render ``<module>.c`` and ``<module>.h``; return ({file name: text}, cffi cdef text, functions).

    ``<module>.c`` is the portable single-file C99 of the functions, the same for every build profile.
    ``stage_ops``, ``lanes``: the returned functions are then finished for the build (stage functions and
    SIMD batches, :func:`~soadyn.codegen.units.finish_function`; compiled from
    :func:`~soadyn.codegen.units.translation_units`): the same statements, arranged for the compiler.
    ``emitted``: the :func:`emit_functions` of ``specs`` and ``programs`` when the caller has them
    (unfinished; finishing works on copies)."""
    prefix = module_prefix(module_name)
    enum = frame_enum(robot, module_name)
    if emitted is None:
        funcs, simd = emit_functions(robot, module_name, specs, programs)
    else:
        funcs, simd = [copy.copy(f) for f in emitted[0]], list(emitted[1])
    families = [f for f in funcs if f.is_family]
    common = _common(robot, module_name)
    prototypes = "\n".join(f"/* {c_comment(f.doc)}; {c_comment(f.ops_text(), 1 << 20)} */\n{f.prototype}\n"
                           f"{f.batch_prototype}\n" for f in funcs).rstrip()
    enum_name = f"{prefix}frame"
    block = enum_block(enum, enum_name, f"{prefix.upper()}N_FRAMES") if families else ""
    for f in families:
        f.enum_text = block + "\n"
    header = render("module.h.j2", guard=f"SOADYN_{c_identifier(module_name).upper()}_H",
                    prototypes=prototypes, enum=enum if families else [], enum_name=enum_name,
                    enum_block=block, families=[f.cname for f in families], **common)
    source = render("module.c.j2", functions=funcs, prelude=TRIG_PRELUDE, **common)
    # a delegating function after the variant whose vector computation its SIMD batch reuses
    for f, vector in sorted(zip(funcs, simd), key=lambda fv: fv[0].delegate is not None):
        finish_function(f, stage_ops, lanes if vector else 1,
                        {g.cname: g for g in funcs} if f.delegate is not None else None)
    cdef = ""
    if families:
        cdef = (f"enum {enum_name} {{\n" + "".join(f"    {e} = {i},\n" for _, e, i in enum) + "};\n")
    cdef += "\n".join(f"{f.prototype}\n{f.batch_prototype}" for f in funcs) + "\n"
    return {common["source_name"]: source, common["header_name"]: header}, cdef, funcs
