"""Robot -> standalone C99 flight library (issue 24): ``soadyn export ROBOT --c-library -o DIR``.

The library is the soadyn module's C without Python: the functions come from the pipeline step that
emits the module's C (:func:`soadyn.codegen.pipeline.generate`, i.e.
:func:`~soadyn.codegen.emit.emit_functions` with the sin/cos kernels of :mod:`soadyn.codegen.trig`),
printed once by the module's printer and never re-read as text here; they become ``static`` functions
behind a public API that checks its inputs and results and returns a status code (the convention is in
the generated header).  Files written to ``DIR``::

    <name>.h, <name>.c          the library (freestanding C99: no libm, no heap, no globals)
    <name>_stack.txt            worst-case stack per function, measured by this machine's gcc (the only
                                machine-dependent file: every other file's bytes depend only on the
                                robot file, the options and the soadyn version)
    CMakeLists.txt              static library, install() rules, test program registered with ctest
    <name>Config.cmake          find_package(<name>) -> <name>::<name>
    test_<name>.c               test vectors of the independent reference path + bad-input statuses
    freestanding/string.h       memcpy/memset declarations for a toolchain without C library headers

The worst-case stack use per function in ``<name>_stack.txt`` (the header refers to it) is measured by
compiling the library with
``gcc -O2 -fcallgraph-info=su`` (own frame + the deepest chain of callees; no recursion, no
dynamic allocation) when gcc is available, and stated as not measured otherwise.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

import soadyn.codegen.cprogram as cp
from soadyn.codegen.bounds import Limits, prove_finite
from soadyn.codegen.cprogram import Stmt
from soadyn.codegen.emit import EmittedFunction, generator_version, module_prefix, render
from soadyn.codegen.functions import Arg, FunctionSpec, expand_family, frame_enum
from soadyn.codegen.pipeline import generate, resolve_robot
from soadyn.codegen.printer import CPrinter, FloatPrinter
from soadyn.codegen.products import mirrored_entries, product_entries
from soadyn.codegen.trig import PRELUDE as TRIG_PRELUDE
from soadyn.codegen.trig import fuse_trig
from soadyn.codegen.units import STAGE_OPS, finish_function
from soadyn.model.names import c_comment, c_identifier
from soadyn.model.robot import Robot

#: precisions of :func:`export_c_library`
PRECISIONS = ("double", "float")
#: input limits printed into the header (see its status convention)
QUAT_NORM_MIN, QUAT_NORM_MAX, JOINT_Q_MAX = "1.0e-3", "1.0e3", "1.0e5"
#: the limit of every other input entry but the base position (velocities, accelerations, torques, wrenches,
#: ...): beyond it ERR_RANGE.  It bounds what the interval pass (soadyn.codegen.bounds) may assume, so that
#: functions of v and a (ID, the bias forces) are proved finite too; its square must be finite in float
INPUT_MAX = "1.0e9"
#: the flags the stack use is measured with (those of the exported CMakeLists.txt, at -O2)
STACK_FLAGS = ("-std=c99", "-O2", "-ffreestanding", "-ftree-loop-distribute-patterns", "-fno-math-errno",
               "-ffp-contract=off")
#: what the exported CMakeLists.txt adds for gcc on x86 (where gcc accepts it): the realigned frames (the
#: 32-byte vectors of the sin/cos kernels) address their spills from the frame pointer, as the module's
#: functions do, instead of from %rsp (an extra SIB byte each: 4-5 % more code, as much more time in
#: the long straight-line functions; docs/flight-c.md, "Not done yet")
X86_GCC_FLAGS = ("-mforce-drap",)
#: relative tolerance of the test program's reference vectors: double, that of ``soadyn verify``; float,
#: the bound docs/flight-c.md documents (measured worst 1e-6 .. 1e-5 on the example and held-out robots)
TEST_TOL = {"double": 1e-10, "float": 1e-4}
#: the error is divided by max(max|ref|, TEST_FLOOR): a reference of roundoff size (the loop residual
#: at the configuration the loop was closed at) is compared absolutely
TEST_FLOOR = 1e-3
TEST_STATES = 2
TEST_SEED = 0


class ExportError(ValueError):
    """An export that cannot be made (one line: what and how to fix it)."""


#: the flight source's math for a float library: sqrtf a builtin; sinf/cosf the double kernels of
#: :data:`~soadyn.codegen.trig.PRELUDE` rounded once to float (within 1 ulp of float; no libm)
FLOAT_MATH = """/* float math: the double sin/cos kernels above rounded once to float (no libm) */
#if defined(__GNUC__) || defined(__clang__)
#define sqrtf(x) __builtin_sqrtf(x)
#endif
#define powf(x, y) soadyn_flight_pow(x, y)
#define sinf(x) ((float)soadyn_sin((double)(x)))
#define cosf(x) ((float)soadyn_cos((double)(x)))
"""


@dataclass(frozen=True)
class FlightTarget:
    """What a precision changes in the exported C: the statement printer of
    :mod:`soadyn.codegen.printer` (``CPrinter`` for double, ``FloatPrinter`` for float), the scalar
    type and its literals, and whether the module's trig fusion applies (both precisions: the float
    printer runs the double kernels and rounds their results once to float)."""

    printer: Any
    scalar: str
    zero: str
    two: str
    prelude: str
    fuse: bool
    #: of a floating-point literal
    suffix: str = ""
    #: operations per stage function (:mod:`soadyn.codegen.stages`, as the module's build profiles cut
    #: them; 0: no stages), printed by this target's printer (float: ``float`` stages and work array)
    stage_ops: int = 0

    def functions(self, robot: Robot, impl_name: str, functions: Any) -> tuple[list[FunctionSpec],
                                                                              list[EmittedFunction]]:
        """The specs and emitted (typed, unprinted) functions of the pipeline step the module uses."""
        gen = generate(robot, impl_name, functions=functions)
        return gen.specs, gen.functions

    def body(self, f: EmittedFunction, family: bool) -> list[str]:
        """The C lines of an emitted function's statements, printed once by this target's printer, with
        the module's fused sines and cosines (:func:`~soadyn.codegen.trig.fuse_trig`; a long frame
        family is staged before, and its stages fuse their own).  A frame family whose shared prefix and
        cases would both declare the kernels' arrays keeps the per-statement sin/cos (the cases'
        declarations would shadow the prefix's: ``-Wshadow``); the kernel arithmetic is the same, so the
        results are too."""
        if not self.fuse:
            return self.printer.lines(f.body)
        stmts = fuse_trig(f.body)
        if family and _shadowing(stmts):
            stmts = f.body
        return self.printer.lines(stmts)


def _shadowing(body: list[Stmt]) -> bool:
    """Whether ``body`` declares the fused kernels' arrays both before a ``switch`` and in its cases."""
    outer = any(s.kind == cp.SINCOS for s in body)
    inner = any(t.kind == cp.SINCOS for s in body if s.kind == cp.SWITCH for c in s.cases for t in c.body)
    return outer and inner


def printer_for(precision: str) -> FlightTarget:
    """The flight target of ``precision``: 'double' (the module's printer: bit-identical results) or
    'float' (the same statements printed by the float printer)."""
    if precision == "double":
        return FlightTarget(CPrinter(), "double", "0.0", "2.0", TRIG_PRELUDE, True, stage_ops=STAGE_OPS)
    if precision == "float":
        return FlightTarget(FloatPrinter(), "float", "0.0f", "2.0f", TRIG_PRELUDE + "\n" + FLOAT_MATH, True,
                            "f", stage_ops=STAGE_OPS)
    raise ExportError(f"--precision {precision!r}: use one of {', '.join(PRECISIONS)}")


@dataclass
class ExportResult:
    name: str
    directory: Path
    files: list[Path]
    stack: dict[str, int | None]


# --------------------------------------------------------------------------------------------------
# the public API around the emitted functions
# --------------------------------------------------------------------------------------------------
def _api_entry(spec: FunctionSpec, core: EmittedFunction, prefix: str, impl_prefix: str,
               scalar: str) -> dict[str, Any]:
    """Template data of the public function of ``spec`` (which calls ``core``)."""
    ins = [f"const {scalar} *{a.name}" for a in spec.inputs]
    outs = [f"{scalar} *{a.name}" for a in spec.outputs]
    family = spec.is_family
    params = ins + (["int frame"] if family else []) + outs
    pointers = [a.name for a in spec.inputs] + [a.name for a in spec.outputs]
    args = [a.name for a in spec.inputs] + (["frame"] if family else []) + [a.name for a in spec.outputs]
    call = f"{impl_prefix}{spec.name}({', '.join(args)})"
    pre = f"{prefix}{spec.name}{PRECHECKED}"
    return dict(
        pre_cname=pre, pre_prototype=f"int {pre}({', '.join(params)})",
        check_cname=check_name(prefix, spec.inputs),
        name=spec.name, cname=prefix + spec.name, doc=c_comment(spec.doc), inputs=list(spec.inputs),
        outputs=list(spec.outputs), family=family, ops=core.ops,
        prototype=f"int {prefix}{spec.name}({', '.join(params)})",
        null_test=" || ".join(f"({p} == NULL)" for p in pointers),
        finite_test=" && ".join(f"soadyn_flight_finite({a.name}, {a.size})" for a in spec.inputs) or "1",
        range_test=" && ".join(f"soadyn_flight_within({a.name}, {a.size})" for a in spec.inputs
                               if a.name != "q"),
        result_test=" && ".join(f"soadyn_flight_finite({a.name}, {a.size})" for a in spec.outputs),
        has_q=any(a.name == "q" for a in spec.inputs),
        call=("(void)" if family else "") + call, stack="n/a", check_init=None)


#: the suffix of the public functions without the input check (the state-checked-once API)
PRECHECKED = "_prechecked"


def check_name(prefix: str, inputs: Any) -> str:
    """The public input check of one input signature: ``<prefix>check_<input names joined by _>``
    (e.g. ``panda_check_q_v_tau``)."""
    return f"{prefix}check_{'_'.join(a.name for a in inputs) or 'none'}"


def _tree(op: str, terms: list[str], name: str, lines: list[str], scalar: str) -> str:
    """Pairwise combination of ``terms`` by ``op`` into declared locals ``<name><k>``; the last one's name
    (``terms[0]`` alone when there is one)."""
    k = 0
    while len(terms) > 1:
        nxt = []
        for i in range(0, len(terms) - 1, 2):
            nxt.append(f"{name}{k}")
            lines.append(f"const {scalar} {nxt[-1]} = {terms[i]} {op} {terms[i + 1]};")
            k += 1
        terms = nxt + terms[len(terms) - len(terms) % 2:]
    return terms[0]


def input_check(inputs: list[Arg], is_free: bool, first_joint: int, scalar: str, zero: str,
                P: str) -> list[str]:
    """Body lines of the fast input check of a public function: straight-line C that returns 1 when
    every input entry is finite, the base quaternion's norm is within the limits, the joint
    coordinates are within +-JOINT_Q_MAX and the other entries (not q) within +-INPUT_MAX, else 0, without
    loops or a test per entry (the ``&&`` of at most five comparisons of computed numbers).  The base
    position is multiplied into one of eight products that start at 0 (``0*x`` is NaN for an infinite or
    NaN ``x``); the entries of the other inputs are summed as squares and compared with INPUT_MAX^2, as the
    joint coordinates (below);
    the quaternion needs no product (its squared norm's comparisons with the limits fail for NaN and
    inf), nor do the joint coordinates: their sum of squares is compared with JOINT_Q_MAX^2 (NaN and inf
    fail it), which is conservative (joints each within the limit whose squares sum beyond it fail the
    fast check too: the caller then runs the detailed checks, which decide).  So a 0 here means "run the
    detailed checks", never a status by itself."""
    chains: list[str] = []
    joints: list[str] = []
    others: list[str] = []
    lines: list[str] = []
    for a in inputs:
        for i in range(a.size):
            entry = f"{a.name}[{i}]"
            if a.name == "q" and i >= first_joint:
                joints.append(f"({entry} * {entry})")
                continue
            if a.name == "q" and is_free and 3 <= i < 7:
                continue                # the quaternion: its norm's comparisons reject NaN and inf
            if a.name != "q":
                others.append(f"({entry} * {entry})")      # within INPUT_MAX: as the joints
                continue
            prev = chains[-8] if len(chains) >= 8 else zero
            chains.append(f"soadyn_c{len(chains)}")
            lines.append(f"const {scalar} {chains[-1]} = {prev} * {entry};")
    tests = []
    if chains:
        tests.append(f"({_tree('*', chains[-8:], 'soadyn_p', lines, scalar)} == {zero})")
    if is_free and any(a.name == "q" for a in inputs):
        lines.append(f"const {scalar} soadyn_n2 = ((q[3] * q[3]) + (q[4] * q[4])) + ((q[5] * q[5]) + "
                     "(q[6] * q[6]));")
        tests += [f"(soadyn_n2 >= ({P}QUAT_NORM_MIN * {P}QUAT_NORM_MIN))",
                  f"(soadyn_n2 <= ({P}QUAT_NORM_MAX * {P}QUAT_NORM_MAX))"]
    if joints:
        total = _tree("+", joints, "soadyn_j", lines, scalar)
        tests.append(f"({total} <= ({P}JOINT_Q_MAX * {P}JOINT_Q_MAX))")
    if others:
        total = _tree("+", others, "soadyn_s", lines, scalar)
        tests.append(f"({total} <= ({P}INPUT_MAX * {P}INPUT_MAX))")
    return lines + [f"return ({' && '.join(tests) or '1'}) ? 1 : 0;"]


def _core_functions(specs: list[FunctionSpec], funcs: list[EmittedFunction], impl_prefix: str,
                    target: FlightTarget, limits: Limits | None = None) -> list[dict[str, Any]]:
    """The emitted functions of ``specs`` (not the structured variants of the Python API), printed by
    ``target`` (:meth:`FlightTarget.body`), the product helpers before them.  A function that calls its
    ``*_fext`` twin has a prototype of that twin as helper: the twin is defined above it already.  A
    function whose outputs the interval pass (:func:`soadyn.codegen.bounds.prove_finite`) proves finite
    for every input within ``limits`` gets no result check (``proved``)."""
    by_name = {f.cname: f for f in funcs}
    checked_names: set[str] = set()
    proved_names: set[str] = set()
    readbacks: dict[str, list[str]] = {}
    out = []
    for s in specs:
        f = by_name[impl_prefix + s.name]
        helpers = [] if s.zero_fext_call else f.helpers
        if helpers and target.scalar != "double" and f.lanes_body is not None:
            # the product loops (double C text) as the statements they stand for: the same operations
            # in the same order (EmittedFunction.lanes_body), printed in this precision: a straight-line
            # function from here on (checked inside, staged, its sines and cosines fused)
            helpers = []
            f.body, f.epilogue, f.scratch, f.products = list(f.lanes_body), [], [], []
        if helpers and target.scalar != "double":
            raise ExportError(f"{s.name}: its product loops have no {target.scalar} printer yet; leave it "
                              "out with --functions or export with --precision double")
        readback: dict[str, list[int]] = {}
        checked = None
        if s.zero_fext_call:
            # it calls its *_fext twin with zero wrenches (within the limits): proved when the twin is
            proved = impl_prefix + s.zero_fext_call in proved_names
        else:
            proved = (limits is not None
                      and prove_finite(f.body, list(s.inputs), list(f.outputs), limits) is None)
        if proved:
            proved_names.add(f.cname)
            pass                        # no result check: every output entry is finite (proved)
        elif not s.is_family and not s.zero_fext_call:
            if helpers:
                # the statements' stores checked inside, the entries of the product loops after the call
                checked = checked_body(f.body, f.outputs, f.products, len(f.epilogue))
                readback = product_entries(f.products) if checked is not None else {}
            else:
                checked = checked_body(f.body, f.outputs)
        calls = [f"{impl_prefix}{s.name}_entries({', '.join(readback)})"] if readback else []
        if s.zero_fext_call and impl_prefix + s.zero_fext_call in checked_names:
            # the twin checks its result inside: pass the check through (and its read-back)
            checked = [replace(t, args=(*t.args, CHECK)) if t.kind == cp.CALL else t for t in f.body]
            calls = readbacks[impl_prefix + s.zero_fext_call]
        readbacks[f.cname] = calls
        if checked is not None:
            checked_names.add(f.cname)
            f.body = checked
            f.outputs = [*f.outputs, Arg(CHECK, (1,))]
        if target.stage_ops > 0 and not s.zero_fext_call:
            # the module's stage functions (a long body cut where the module's build cuts it; a frame
            # family: its prefix and one function per case, each with its sines and cosines fused): the
            # same code as the module's, static here (SOADYN_STAGE of the source), printed in this
            # precision
            finish_function(f, target.stage_ops, 1, by_name, target.printer, windows=False)
            helpers = helpers + list(f.extra.pieces)
        real = target.scalar
        params = ([f"const {real} *{a.name}" for a in s.inputs] + (["int frame"] if s.is_family else [])
                  + [f"{real} *{a.name}" for a in s.outputs] + ([f"{real} *{CHECK}"] if checked else []))
        signature = f"{'int' if s.is_family else 'void'} {impl_prefix}{s.name}({', '.join(params)})"
        if readback:
            helpers = helpers + [entries_check(f"{impl_prefix}{s.name}_entries", readback, real, target.zero)]
        out.append(dict(name=s.name, checked=checked is not None, proved=proved, doc=f.doc, ops=f.ops,
                        signature=signature, readback=calls,
                        unused=f.unused,
                        body=target.body(f, s.is_family), helpers=helpers))
    return out


#: the impl function's extra output of an in-body result check (:func:`checked_body`)
CHECK = "soadyn_check"
#: independent products of the in-body check, each a register live through the body.  Fewer make fewer
#: instructions but longer chains: xArm7 M, instructions per call beyond the module's 96 (8 products) /
#: 80 (4); time per call over 16 code layouts (load ~10), relative to 4: 8 0.99, 2 1.03, 1 1.15
CHECK_CHAINS = 8
_CHECKABLE = frozenset({cp.LOAD, cp.TRIG, cp.ARITH, cp.STORE, cp.ZEROS, cp.COMMENT, cp.VOID})


def checked_body(body: list[Stmt], outputs: list[Arg], products: list[Any] = (),
                 epilogue: int = 0) -> list[Stmt] | None:
    """``body`` computing also, into ``CHECK[0]``, a product that is (+-)0 when every output entry is
    finite and NaN otherwise: each distinct stored value that is not a constant is multiplied, where it
    is computed, into one of :data:`CHECK_CHAINS` products that start at 0 (``x*0`` is NaN for an
    infinite or NaN ``x``).  The public function then tests one number instead of reading every output
    entry back (Panda mass matrix: 98 multiplications inside the computation instead of 225 loads after
    it).  The stored values and their roundings are unchanged (a stored expression becomes a local
    first).  A function with product loops (``products``, called by the last ``epilogue`` statements)
    checks its statements' stores that the loops do not overwrite; the entries the loops compute
    (:func:`~soadyn.codegen.products.product_entries`) are left to the caller (:func:`entries_check`).
    None when the body is not one straight-line block whose stores (and runs of zeros, and the product
    loops) write every output entry: the caller checks the outputs after the call then."""
    tail = list(body[len(body) - epilogue:]) if epilogue else []
    body = body[:len(body) - epilogue] if epilogue else body
    if any(s.kind not in _CHECKABLE and not (products and s.kind == cp.SCRATCH) for s in body):
        return None
    sizes = {a.name: a.size for a in outputs}
    covered: dict[str, set[int]] = {n: set() for n in sizes}
    late = {name: set(es) for name, es in product_entries(list(products)).items()}
    for name, es in late.items():
        if name not in covered:
            return None
        covered[name] |= es
    for name, index in mirrored_entries(list(products)):
        covered[name].add(index)
    factors = {p.left for p in products}
    out: list[Stmt] = []
    seen: set[str] = set()
    chains: list[str] = []
    for s in body:
        if s.kind not in (cp.STORE, cp.ZEROS) or s.target in factors:
            out.append(s)
            continue
        if s.target not in covered:
            return None
        if s.kind == cp.ZEROS:
            covered[s.target].update(range(s.index, s.end))
            out.append(s)
            continue
        covered[s.target].add(s.index)
        text = s.expr.text
        if cp.is_constant(s.expr) or text in seen or s.index in late.get(s.target, ()):
            out.append(s)
            continue
        seen.add(text)
        if not (len(s.expr.tokens) == 1 and cp.is_name(text)):
            local = f"{CHECK}_v{len(chains)}"
            out.append(cp.value(local, s.expr))
            out.append(cp.store(s.target, s.index, cp.Expr.of(local)))
            text = local
        else:
            out.append(s)
        prev = chains[-CHECK_CHAINS] if len(chains) >= CHECK_CHAINS else "0.0"
        chains.append(f"{CHECK}{len(chains)}")
        out.append(Stmt(cp.ARITH, chains[-1], cp.Expr.of(f"{prev}*{text}")))
    if not (chains or late) or any(len(covered[n]) != sizes[n] for n in sizes):
        return None
    last = chains[-CHECK_CHAINS:] or ["0.0"]
    k = 0
    while len(last) > 1:
        pairs = []
        for i in range(0, len(last) - 1, 2):
            pairs.append(f"{CHECK}_t{k}")
            out.append(Stmt(cp.ARITH, pairs[-1], cp.Expr.of(f"{last[i]}*{last[i + 1]}")))
            k += 1
        last = pairs + last[len(last) - len(last) % 2:]
    out.append(cp.store(CHECK, 0, cp.Expr.of(last[0])))
    return out + tail


def entries_check(name: str, entries: dict[str, list[int]], scalar: str, zero: str) -> str:
    """A C function ``int name(outputs...)``: 1 when the given entries of the outputs are all finite,
    else 0, straight-line (the entries' product in eight independent products that start at 0)."""
    lines: list[str] = []
    chains: list[str] = []
    for out, es in entries.items():
        for i in es:
            prev = chains[-8] if len(chains) >= 8 else zero
            chains.append(f"soadyn_c{len(chains)}")
            lines.append(f"const {scalar} {chains[-1]} = {prev} * {out}[{i}];")
    last = _tree("*", chains[-8:], "soadyn_p", lines, scalar) if chains else zero
    params = ", ".join(f"const {scalar} *{out}" for out in entries)
    return (f"/* 1 when the entries the product loops computed are finite, else 0 */\n"
            f"static int {name}({params})\n{{\n" + "".join(f"    {x}\n" for x in lines)
            + f"    return ({last} == {zero}) ? 1 : 0;\n}}\n")


# --------------------------------------------------------------------------------------------------
# test vectors (the reference path: an oracle, reached through the registry as soadyn verify does)
# --------------------------------------------------------------------------------------------------
def _c_values(x: Any) -> str:
    vals = np.asarray(x, dtype=float).ravel()
    if not np.all(np.isfinite(vals)):
        raise ExportError("a test vector is not finite: the reference path failed on a random state")
    return ", ".join(repr(float(v)) for v in vals)


def _test_cases(robot: Robot, specs: list[FunctionSpec], prefix: str, enum_by_frame: dict[str, str],
                first_joint: int) -> tuple[list[dict[str, Any]], list[str]]:
    from soadyn.codegen.verify import _state_robot, random_inputs, reference_function

    ins = random_inputs(robot, TEST_STATES, np.random.default_rng(TEST_SEED))
    P = prefix.upper()
    cases: list[dict[str, Any]] = []
    unreferenced: list[str] = []
    for spec in specs:
        ref_fn = reference_function(spec.registration)
        if ref_fn is None:
            unreferenced.append(spec.name)
        for e in expand_family(spec):
            kw = dict(e.kwargs)
            frame = kw.get("frame")
            for i in range(TEST_STATES if ref_fn is not None else 1):
                inputs = [dict(name=a.name, size=a.size, data=_c_values(ins[a.name][i])) for a in e.inputs]
                refs: list[Any] = [None] * len(e.outputs)
                if ref_fn is not None:
                    robot_i, _ = _state_robot(robot, e, ins, i)
                    pos = [ins[a.name][i] for a in e.inputs if a.name not in ("f_ext", "params")]
                    rkw = dict(kw)
                    if e.fext_input:
                        rkw["f_ext"] = ins["f_ext"][i]
                    got = ref_fn(robot_i, *pos, **rkw)
                    refs = [got] if len(e.outputs) == 1 else list(got)
                outputs = [dict(name=a.name, size=a.size, ref=None if r is None else _c_values(r))
                           for a, r in zip(e.outputs, refs)]
                frame_arg = [enum_by_frame[frame]] if frame is not None else []
                names = [a.name for a in e.inputs]
                outs = [a.name for a in e.outputs]

                def call(args: list[str], fr: list[str] = frame_arg, outs: list[str] = outs,
                         fn: str = prefix + spec.name) -> str:
                    return f"{fn}({', '.join(args + fr + outs)})"

                def check(args: list[str], fn: str = check_name(prefix, e.inputs)) -> str:
                    return f"{fn}({', '.join(args)})"

                bad: list[dict[str, Any]] = []
                if i == 0 and (frame is None or frame == spec.frames[0]):
                    bad = _bad_inputs(robot, e, names, call, P, first_joint, check,
                                      prefix + spec.name + PRECHECKED)
                # a label is printed in C strings: the frame as an identifier (no quote, no backslash)
                where = f"[{c_identifier(frame, 60)}]" if frame is not None else ""
                label = f"{spec.name}{where} state {i}"
                cases.append(dict(label=label, inputs=inputs, outputs=outputs, call=call(names), bad=bad,
                                  check=check(names), pre_call=call(names, outs=[f"pre_{o}" for o in outs],
                                                                    fn=prefix + spec.name + PRECHECKED)))
    return cases, unreferenced


def _bad_inputs(robot: Robot, spec: FunctionSpec, names: list[str], call: Any, P: str,
                first_joint: int, check: Any, pre: str) -> list[dict[str, Any]]:
    """Bad-input cases of one function: (setup, call, restore, expected status), with the call of the
    input check of its signature on the same inputs (``check``; None for a frame id), which must give
    the same status, and invalid frame ids given to the function without the input check (``pre``)."""
    first, last = spec.inputs[0], spec.inputs[-1]
    out = [dict(what="NaN input", setup=f"saved[0] = {first.name}[0]; {first.name}[0] = NAN;",
                call=call(names), restore=f"{first.name}[0] = saved[0];", status=f"{P}ERR_NONFINITE"),
           dict(what="infinite input", setup=f"saved[0] = {last.name}[{last.size - 1}]; "
                f"{last.name}[{last.size - 1}] = -INFINITY;", call=call(names),
                restore=f"{last.name}[{last.size - 1}] = saved[0];", status=f"{P}ERR_NONFINITE"),
           dict(what="NULL input", setup="", call=call(["NULL"] + names[1:]), restore="",
                status=f"{P}ERR_NULL")]
    if "q" in names and robot.is_free:
        out.append(dict(what="zero quaternion", setup="for (k = 0; k < 4; ++k) { saved[k] = q[3 + k]; "
                        "q[3 + k] = 0; }", call=call(names),
                        restore="for (k = 0; k < 4; ++k) q[3 + k] = saved[k];", status=f"{P}ERR_QUATERNION"))
    if "q" in names and first_joint < robot.nq:
        out.append(dict(what="joint coordinate out of range",
                        setup=f"saved[0] = q[{first_joint}]; q[{first_joint}] = 2 * {P}JOINT_Q_MAX;",
                        call=call(names), restore=f"q[{first_joint}] = saved[0];", status=f"{P}ERR_RANGE"))
    if last.name != "q":
        out.append(dict(what="input beyond INPUT_MAX",
                        setup=f"saved[0] = {last.name}[0]; {last.name}[0] = -2 * {P}INPUT_MAX;",
                        call=call(names), restore=f"{last.name}[0] = saved[0];", status=f"{P}ERR_RANGE"))
    if dict(spec.kwargs).get("frame") is not None:
        outs = [a.name for a in spec.outputs]
        for fr in ("-1", f"{P}N_FRAMES"):
            out.append(dict(what=f"frame {fr}", setup="", call=call(names, [fr], outs), restore="",
                            status=f"{P}ERR_FRAME"))
            out.append(dict(what=f"frame {fr} (prechecked)", setup="", call=call(names, [fr], outs, pre),
                            restore="", status=f"{P}ERR_FRAME", check=None))
    for b in out:
        if "check" not in b:
            b["check"] = (None if b["what"].startswith("frame")
                          else check(["NULL"] + names[1:]) if b["what"] == "NULL input" else check(names))
    return out


# --------------------------------------------------------------------------------------------------
# stack use (gcc -fcallgraph-info=su)
# --------------------------------------------------------------------------------------------------
_CI_NODE = re.compile(r'^node: \{ title: "([^"]+)" label: ".*?\\n(\d+) bytes \(([^)]*)\)')
_CI_EDGE = re.compile(r'^edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"')


def parse_callgraph(text: str) -> tuple[dict[str, tuple[int, str]], dict[str, list[str]]]:
    """Nodes (title -> (bytes, qualifier)) and edges (caller -> callees) of a gcc ``.ci`` file (this is
    gcc's report, not generated C)."""
    nodes: dict[str, tuple[int, str]] = {}
    edges: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = _CI_NODE.match(line)
        if m:
            nodes[m.group(1)] = (int(m.group(2)), m.group(3))
            continue
        m = _CI_EDGE.match(line)
        if m:
            edges.setdefault(m.group(1), []).append(m.group(2))
    return nodes, edges


def worst_stack(nodes: dict[str, tuple[int, str]], edges: dict[str, list[str]], root: str) -> int | None:
    """Bytes of the deepest call chain from ``root`` (None: a dynamic frame or recursion)."""
    memo: dict[str, int | None] = {}

    def depth(n: str, path: tuple[str, ...]) -> int | None:
        if n in path:
            return None
        if n in memo:
            return memo[n]
        size, kind = nodes.get(n, (0, "static"))     # external (memcpy, memset): not ours, counted 0
        if kind not in ("static", "dynamic,bounded"):   # gcc: "dynamic" alone is unbounded
            memo[n] = None
            return None
        best = 0
        for c in edges.get(n, []):
            d = depth(c, path + (n,))
            if d is None:
                memo[n] = None
                return None
            best = max(best, d)
        memo[n] = size + best
        return memo[n]

    return depth(root, ())


def measure_stack(source: Path, names: list[str]) -> tuple[dict[str, int | None], str]:
    """Worst-case stack bytes of the public functions ``names`` of ``source`` (gcc), and how measured."""
    gcc = shutil.which("gcc")
    if gcc is None:
        return {n: None for n in names}, "not measured (no gcc at export time)"
    ver = subprocess.run([gcc, "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
    mach = subprocess.run([gcc, "-dumpmachine"], capture_output=True, text=True).stdout.strip()
    flags = STACK_FLAGS + (X86_GCC_FLAGS if re.match(r"(x86_64|i[3-6]86)-", mach) else ())
    with tempfile.TemporaryDirectory() as tmp:
        obj = Path(tmp) / "lib.o"
        r = subprocess.run([gcc, *flags, "-fcallgraph-info=su", "-c", str(source), "-o", str(obj)],
                           capture_output=True, text=True, cwd=tmp)
        if r.returncode != 0:
            raise ExportError(f"gcc cannot compile the exported {source.name}: {r.stderr.strip()[:400]}")
        ci = next(Path(tmp).glob("*.ci"))
        nodes, edges = parse_callgraph(ci.read_text())
    how = (f"measured with gcc {ver} ({mach}) {' '.join(flags)} -fcallgraph-info=su: the "
           "function's frame plus its deepest chain of callees (bytes; other compilers and targets differ)")
    return {n: worst_stack(nodes, edges, n) for n in names}, how


# --------------------------------------------------------------------------------------------------
# export
# --------------------------------------------------------------------------------------------------
def export_c_library(robot_or_path: Robot | str | os.PathLike, out_dir: str | os.PathLike,
                     precision: str = "double", functions: list[str] | tuple[str, ...] | str | None = None,
                     base: str | None = None, compact: bool = False, **load_kw: Any) -> ExportResult:
    """Write the standalone C99 library of a robot into ``out_dir`` (see the module docstring).

    ``functions``: public API names (default: every function of the robot's table); ``base`` overrides
    the robot file's base; ``compact``: one body per function (no stage functions) with per-statement
    sines and cosines -- less stack, more time, the same results bit for bit (docs/flight-c.md).  The
    files are written into a temporary directory first and moved into ``out_dir`` when all of them exist
    (an error leaves ``out_dir`` as it was)."""
    printer = printer_for(precision)
    if compact:
        printer = replace(printer, fuse=False, stage_ops=0)
    robot, name = resolve_robot(robot_or_path, base, **load_kw)
    impl_name = f"{name}_impl"
    prefix, impl_prefix = module_prefix(name), module_prefix(impl_name)
    P = prefix.upper()
    specs, funcs = printer.functions(robot, impl_name, functions)
    first_joint = 7 if robot.is_free else 0
    api = [_api_entry(s, next(f for f in funcs if f.cname == impl_prefix + s.name), prefix, impl_prefix,
                      printer.scalar) for s in specs]
    enum = frame_enum(robot, name) if any(s.is_family for s in specs) else []
    common = dict(robot=robot, version=generator_version(), source_hash=robot.source_hash or "n/a",
                  fingerprint=robot.fingerprint(), header_name=f"{name}.h", source_name=f"{name}.c",
                  scalar=printer.scalar, zero=printer.zero, two=printer.two, p=prefix, P=P, name=name)
    limits = Limits(float(JOINT_Q_MAX), float(QUAT_NORM_MIN), float(QUAT_NORM_MAX), precision,
                    robot.is_free, first_joint, float(INPUT_MAX))
    core = _core_functions(specs, funcs, impl_prefix, printer, limits)
    checks: dict[tuple[tuple[str, int], ...], dict[str, Any]] = {}
    for a in api:
        sig = tuple((x.name, x.size) for x in a["inputs"])
        if sig not in checks:
            k = len(checks)
            checks[sig] = dict(
                fast=f"soadyn_flight_inputs{k}", status=f"soadyn_flight_status{k}",
                params=", ".join(f"const {printer.scalar} *{x.name}" for x in a["inputs"]),
                cname=a["check_cname"], names=[x.name for x in a["inputs"]],
                # (one pointer: no extra parentheses inside the if's, which clang's -Wparentheses-equality
                # reports)
                null_test=(f"{a['inputs'][0].name} == NULL" if len(a["inputs"]) == 1 else
                           " || ".join(f"({x.name} == NULL)" for x in a["inputs"]) or "0"),
                users=[],
                lines=input_check(a["inputs"], robot.is_free, first_joint, printer.scalar, printer.zero, P),
                finite_test=a["finite_test"], range_test=a["range_test"], has_q=a["has_q"])
        c = checks[sig]
        c["users"].append(a["name"])
        names = ", ".join(x.name for x in a["inputs"])
        a["fast_check"], a["status_check"] = f"{c['fast']}({names})", f"{c['status']}({names})"
    for a, c in zip(api, core):
        a["proved"] = c["proved"]
        if c["proved"]:       # outputs proved finite from the input limits (soadyn.codegen.bounds)
            a["result_test"] = ""
        elif c["checked"]:      # the result check inside the computation (checked_body)
            a["call"] = a["call"][:-1] + f", &{CHECK})"
            a["result_test"] = " && ".join([f"({CHECK} == {printer.zero})", *c["readback"]])
            a["check_init"] = f"{printer.scalar} {CHECK} = 1.0{printer.suffix};"
    source = render("clib_source.c.j2", prelude=printer.prelude, core=core, api=api, first_joint=first_joint,
                    checks=list(checks.values()),
                    enum=frame_enum(robot, impl_name) if enum else [], **common)

    stack_name = f"{name}_stack.txt"
    header = render("clib_header.h.j2", guard=f"SOADYN_FLIGHT_{c_identifier(name).upper()}_H", api=api,
                    enum=enum, quat_min=QUAT_NORM_MIN + printer.suffix,
                    quat_max=QUAT_NORM_MAX + printer.suffix, joint_max=JOINT_Q_MAX + printer.suffix,
                    input_max=INPUT_MAX + printer.suffix, checks=list(checks.values()),
                    prechecked=PRECHECKED,
                    stack_name=stack_name, **common)

    cases, unreferenced = _test_cases(robot, specs, prefix, {fr: e for fr, e, _ in enum}, first_joint)
    version = re.sub(r"[^0-9.]", "", generator_version().split("+")[0]) or "0"
    files = {
        f"{name}.h": header,
        f"{name}.c": source,
        "CMakeLists.txt": render("clib_CMakeLists.txt.j2", cmake_version=version, **common),
        f"{name}Config.cmake": render("clib_Config.cmake.j2", **common),
        f"test_{name}.c": render("clib_test.c.j2", cases=cases, unreferenced=unreferenced,
                                 tol=repr(TEST_TOL[printer.scalar]), floor=repr(TEST_FLOOR), seed=TEST_SEED,
                                 first_joint=first_joint, enum=enum, **common),
        "freestanding/string.h": render("clib_string.h.j2", **common),
    }
    out = Path(out_dir).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.export-", dir=out.parent))
    try:
        (tmp / "freestanding").mkdir()
        for rel, text in files.items():
            (tmp / rel).write_text(text, encoding="utf-8", newline="\n")
        roots = ([a["cname"] for a in api] + [a["pre_cname"] for a in api]
                 + [c["cname"] for c in checks.values()])
        stack, how = measure_stack(tmp / f"{name}.c", roots)
        for a in api:
            a["stack"] = "n/a" if stack[a["cname"]] is None else stack[a["cname"]]
            a["pre_stack"] = "n/a" if stack[a["pre_cname"]] is None else stack[a["pre_cname"]]
        for c in checks.values():
            c["stack"] = "n/a" if stack[c["cname"]] is None else stack[c["cname"]]
        files[stack_name] = render("clib_stack.txt.j2", api=api, checks=list(checks.values()), stack_note=how,
                                   **common)
        (tmp / stack_name).write_text(files[stack_name], encoding="utf-8", newline="\n")
        written = []
        for rel in sorted(files):
            dst = out / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp / rel, dst)
            written.append(dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return ExportResult(name, out, written, stack)
