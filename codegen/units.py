"""A generated function, finished for a build (stages, SIMD batch), and its translation units.

:func:`finish_function` arranges an emitted function's statements (:mod:`soadyn.codegen.cprogram`) for
the compiler: stage functions when it is long (:mod:`soadyn.codegen.stages`), a SIMD batch entry
(:mod:`soadyn.codegen.lanes`).  The statements, and so every floating-point operation and its rounding,
are unchanged; only where the intermediate values live changes.

:func:`translation_units` packs the emitted functions (and stages) into translation units for a
parallel build: the pieces of one function only in a unit, so that an unchanged function keeps its object
files (:mod:`soadyn.codegen.objcache`), consecutive stages together up to :data:`UNIT_OPS` operations.
A unit costs a compiler process (~25 ms of CPU) and the parsing of the headers and SIMD prelude: the
four-arm robot's 315 units of one stage each took 80 s of gcc CPU, its 50 packed units 62-64 s, the same
functions (issue 11).
"""

from __future__ import annotations

from soadyn.codegen.cprogram import stored_entries
from soadyn.codegen.lanes import (
    TRANSPOSED_INPUTS,
    Extra,
    batch_checked_text,
    family_cases,
    finish_delegate,
    finish_lanes,
    finish_zero_fext,
    simd_prelude,
)
from soadyn.codegen.printer import CPrinter
from soadyn.codegen.stages import STAGE_OPS, WINDOWS, split_family, split_stages
from soadyn.codegen.trig import PRELUDE, fuse_trig

__all__ = ["STAGE_OPS", "UNIT_OPS", "SIMD_FUNCTIONS", "PRODUCT_LANE_FUNCTIONS", "PRIORITY_RA_FUNCTIONS",
           "SLP_FUNCTIONS", "LOAD_ONCE_FUNCTIONS", "WINDOW_FUNCTIONS", "JUMP_FUNCTIONS",
           "PER_STATE_PRODUCT_OPS",
           "finish_function", "per_state_products", "translation_units", "lowered_unit", "prelude"]

#: operations per translation unit: a function's stages are packed into units of about this size (each
#: unit costs a compiler process, ~25 ms of CPU before any code; issue 11)
UNIT_OPS = 10000
#: the Schur-complement and decoupled forward dynamics, the generalized bias and the angular reduced
#: dynamics (``*_fext``; their variants without wrenches run the twin's lanes on zero wrenches,
#: :func:`~soadyn.codegen.lanes.finish_zero_fext`); named "product-loop functions" after the in-place
#: products (M^-1 B) they may end with, which the lanes evaluate as expressions (on the xArm7 and TALOS
#: they have none: straight-line statements only).  Their lanes made the batches 0.27-0.62x the single
#: call instead of ~1.0x but cost 15-20 % more compile time for the default functions (xArm7 free 8.6-9.1
#: s, budget 8 s) while every SIMD batch was compiled at -O2 in :data:`STAGE_OPS` stages; with the SIMD
#: batches in shorter stages (:data:`LANES_STAGE_OPS`) and units of their own at -O1
#: (:data:`SIMD_UNIT_OPS`), and these functions' single calls at -O1 too (:data:`LOWERED_FUNCTIONS`),
#: they are back in :data:`SIMD_FUNCTIONS`: xArm7 free ``soadyn compile`` CPU as before, their batches
#: 0.27-0.37x the single call (TALOS 0.29-0.60x; benchmarks/README.md, issue 26)
PRODUCT_LANE_FUNCTIONS = frozenset({"forward_dynamics_schur_fext", "forward_dynamics_decoupled_fext",
                                    "generalized_bias_fext", "angular_reduced_dynamics_fext"})


#: functions whose batched entry points get SIMD lanes (C names without the robot prefix): the dynamics
#: that batches are made of (simulation, rollouts, sampling), and the straight-line functions that are
#: cheap to vectorise (issue 26 item 2: a batch per state at most 0.8x the single call).  The lanes
#: version of a function costs as much compile time as the scalar one again (all 29 functions of the
#: four-arm robot: 114 s of compiler CPU instead of ~60 s).  The eleven added after the dynamics cost ~12 %
#: more compiler CPU for the default functions (xArm7 free 8.7-9.3 -> 9.8-10.5 s, TALOS 27.6-28.8 ->
#: 31.0-32.9 s; issue 26, benchmarks/README.md) and bring their batches to 0.3-0.7x the single call on the
#: xArm7.  Then the rest of the default functions and the derivatives (issue 26): the frame families
#: (the frame's case chosen once per lanes group, :func:`soadyn.codegen.lanes.vectorise`; those with large,
#: mostly zero outputs too: TALOS's and B1+Z1's Jacobians kept a scalar batch at 1.02-1.06x the single
#: call, with lanes their C batches run 0.78-0.91x and 0.60-0.65x, for more gcc CPU: benchmarks/README.md,
#: tenth session), and the ID/FD derivatives (their products as expressions, in-place ones too:
#: :func:`~soadyn.codegen.products.expanded_products`): batches from 0.79-1.04x to 0.24-0.63x the single
#: call on the xArm7 (free) and TALOS, the derivatives' from 0.80-1.03x to 0.42-0.63x (xArm7).  And the
#: :data:`PRODUCT_LANE_FUNCTIONS` (see there)
SIMD_FUNCTIONS = frozenset({"forward_dynamics", "forward_dynamics_fext", "inverse_dynamics",
                            "inverse_dynamics_fext", "mass_matrix", "mass_matrix_inverse", "bias_forces",
                            # kinematics and momentum
                            "center_of_mass", "kinetic_energy", "momentum", "body_poses",
                            # free-base quantities
                            "base_inertia", "coupling_inertia", "coupling_inertia_rate",
                            "generalized_inertia", "base_velocity",
                            # factors and operational-space inertias
                            "innovations_factors", "operational_space_inertias",
                            # frame families: the frame's case chosen once per lanes group
                            "jacobian_local", "jacobian_world", "frame_pose", "generalized_jacobian",
                            "momentum_frame_twist",
                            # the derivatives (their general products as expressions too)
                            "inverse_dynamics_derivatives", "forward_dynamics_derivatives",
                            # the product-loop functions
                            *PRODUCT_LANE_FUNCTIONS,
                            # the regressors: their scalar batches of 2,000 states ran 0.81-0.84x (xArm7, all
                            # 8 bodies) and 1.19-1.21x (B1+Z1, 19 bodies) the single call from Python, with
                            # lanes 0.25x and 0.41-0.43x (benchmarks/README.md, tenth session)
                            "inverse_dynamics_regressor", "momentum_regressor"})

#: target operations per stage function of a SIMD batch (its statements cut again, shorter than the
#: single call's :data:`STAGE_OPS`): gcc's register allocation and combiner are superlinear in a function's
#: length and a vector stage boundary costs little per state.  xArm7 free, gcc CPU of the default
#: functions' units with the product-loop functions' lanes: 11.2-11.3 s with the SIMD stages at 2,500
#: operations, 10.2-10.4 s at 1,000 (9.3-9.4 s without those lanes); the Schur FD batch 296-301 ->
#: 283-284 ns per state (benchmarks/README.md, issue 26)
LANES_STAGE_OPS = 1000

#: the SIMD batch of a function of at least this many operations is compiled in translation units of its
#: own (:func:`translation_units`), stems ``<function>__simd<k>``, at ``-O1`` (:func:`lowered_unit`)
SIMD_UNIT_OPS = 2000
SIMD_UNIT = "__simd"
#: functions whose single-call units are compiled at ``-O1`` too (stems ending in :data:`LOWERED_UNIT`):
#: the product-loop functions, not the hot path (their variants without wrenches call them with zero
#: wrenches).  xArm7 free, C loop over 1,000 states, min of 5, three runs (load 12-13): Schur FD
#: 1,049-1,090 ns at -O2, 1,058-1,087 at -O1; decoupled FD 1,148-1,176 at -O2, 949-965 at -O1
LOWERED_FUNCTIONS = PRODUCT_LANE_FUNCTIONS
LOWERED_UNIT = "__O1"

#: a SIMD batch of a function with product loops of at least this many operations (multiplications and
#: additions, :meth:`~soadyn.codegen.derive.Product.ops`) runs them per state after the lanes' statements
#: (:func:`per_state_products`); with fewer, the lanes evaluate them as expressions.  bench_round3 (one
#: round, load 3.1-3.6), batch ns a state expressions -> per state: TALOS FD derivatives 13,615 (1.72x the
#: single call) -> 6,826 (0.76x), B1+Z1's (24,228 product operations) 2,666 -> 2,597, but B1+Z1 ID
#: derivatives (714) 1,102 -> 1,492, M^-1 B1+Z1 (2,052) 428 -> 536 and TALOS (~6,300) 1,297 -> 1,709; the
#: xArm7's FD derivatives (5,525) 773 -> 772.  C loops over 256 states (-mno-avx512f builds, three
#: alternating fresh copies, load ~6): B1+Z1 FD derivatives 2,249-2,532 -> 1,936-2,484, xArm7 669-680 ->
#: 618-657, ID derivatives B1+Z1 851-871 -> 881-1,017, xArm7 (952) 346-355 -> 367-369.  So per state only
#: for the large products of the trees' FD derivatives (benchmarks/README.md, issue 26)
PER_STATE_PRODUCT_OPS = 10000

#: functions whose translation units gcc compiles with its priority-based register allocator
#: (``-fira-algorithm=priority``, Chow-Hennessy colouring, instead of the default Chaitin-Briggs), by
#: :data:`PRIORITY_RA_PRAGMA` at the top of each of their units: the derivatives' long bodies keep hundreds
#: of values live (their statements in register-pressure order, :mod:`soadyn.codegen.schedule`), and the
#: priority allocator spills fewer of them.  Register allocation only: the same operations in the same
#: order, the same bits (checked bit for bit against the default allocator's build).  Measured (issue 26,
#: benchmarks/README.md): ID derivatives of xArm7 free / fixed / UR10, callgrind instructions per call
#: (-mno-avx512f build) 10,136 / 8,182 / 6,037 -> 10,021 / 6,635 / 5,933, ns (fresh copies of the shared
#: objects alternating, load 9) 881-893 / 710-723 / 514 -> 852-855 / 676-680 / 462-465.  Not for the whole
#: profile: the forward dynamics ran 5 % slower with it (xArm7 free, 401-409 -> 421-430 ns), the inverse
#: dynamics and M^-1 faster (150 -> 142, 483-487 -> 445-452 ns).
#: The mass matrix inverse takes all three of these per-function forms (priority allocation, windows,
#: :data:`JUMP_FUNCTIONS`): ns per call, C loops over 1,000 states (hot output), fresh copies of the shared
#: objects alternating, load 1.3-2.1 (fourteenth session, benchmarks/README.md), without -> with the three:
#: M^-1 G1 (nv 35) 1,913-1,935 -> 1,695-1,723, TALOS 1,888-1,893 -> 1,645-1,663, Romeo 1,797-1,828 ->
#: 1,551-1,596, human 2,250-2,296 -> 2,043-2,070, B1+Z1 897-906 -> 803-806, xArm7 free 449-455 -> 401-407;
#: M G1 822-845 -> 640-657, TALOS 755-764 -> 583-591, simple_humanoid 595-615 -> 371-380, xArm7 free 137 ->
#: 134-135 (windows alone: M^-1 G1 1,779-1,816, M 675-691).  Their code is what shrinks (G1 M^-1 111,512 ->
#: 97,739 bytes of stages), not their instruction count.  M^-1 only: with them M's single call ran faster
#: than its SIMD batch allows (issue 26 item 2, a batch at most 0.8x its single call): TALOS M single 611 ns,
#: batch 510-535 ns a state (0.87; bench_round3, fourteenth session's end), so M keeps its plain form
WIDE_MATRIX_FUNCTIONS = frozenset({"mass_matrix_inverse"})
PRIORITY_RA_FUNCTIONS = frozenset({"inverse_dynamics_derivatives", "inverse_dynamics_derivatives_fext",
                                   "forward_dynamics_derivatives", "forward_dynamics_derivatives_fext",
                                   *WIDE_MATRIX_FUNCTIONS})
#: the first lines of a translation unit of a :data:`PRIORITY_RA_FUNCTIONS` function (GCC only; the
#: portable single-file source and the flight library do not carry it)
PRIORITY_RA_PRAGMA = ("#if defined(__GNUC__) && !defined(__clang__)",
                      '#pragma GCC optimize ("ira-algorithm=priority")',
                      "#endif")

#: functions whose (scalar) translation units let gcc's SLP vectoriser pair isomorphic scalar operations
#: into 2- and 4-wide vector ones (``-fno-tree-slp-vectorize`` elsewhere, :mod:`soadyn.codegen.profiles`),
#: by :data:`SLP_PRAGMA`.  gcc 12's SLP forms ``vfmaddsub``/``vfmsubadd`` from a product and an add/sub
#: pair despite ``-ffp-contract=off`` (a fused multiply-add: other bits; on the xArm7's ID derivatives 44
#: of 200 states differed, by up to 3.6e-15) whenever a fused pattern exists for the vector width: the
#: pragma removes them all -- FMA for 128/256-bit vectors (``no-fma``), AVX-512VL's 128/256-bit EVEX forms
#: (``no-avx512vl``; scalar EVEX, xmm16-31, stay) and 512-bit vectors (``prefer-vector-width=256``: gcc
#: then tries no 512-bit mode).  Without fusion a vector add, subtract, multiply or divide rounds each lane
#: as the scalar operation does, and SLP does not reassociate without ``-fassociative-math``: the same
#: bits (checked against the build without it).  Measured (issue 26, benchmarks/README.md, eleventh
#: session): ID derivatives, callgrind instructions per call (``-mno-avx512f`` build) xArm7 free / fixed /
#: B1+Z1 9,713 / 7,908 / 20,915 -> 9,530 / 7,777 / 20,349, ns (fresh copies alternating, load 11-12)
#: 814-825 -> 778-789, 613-672 -> 614-646, 1,935-1,965 -> 1,743-1,761.  Not for the FD derivatives: the
#: fixed xArm7's ran 887-913 -> 1,091-1,116 ns with it (the same instruction count).
SLP_FUNCTIONS = frozenset({"inverse_dynamics_derivatives", "inverse_dynamics_derivatives_fext"})
#: the first lines of a scalar translation unit of an :data:`SLP_FUNCTIONS` function (GCC on x86 only)
SLP_PRAGMA = ("#if defined(__GNUC__) && !defined(__clang__) && (defined(__x86_64__) || defined(__i386__))",
              '#pragma GCC optimize ("tree-slp-vectorize")',
              '#pragma GCC target ("no-fma,no-avx512vl,prefer-vector-width=256")',
              "#endif")
#: functions whose stage functions read each work-array value into a local once, before its first use
#: in the stage, instead of at every use (:func:`soadyn.codegen.stages.split_stages`, ``load_once``).
#: Same statements, same bits.  ID derivatives (with :data:`SLP_FUNCTIONS`), ns, fresh copies
#: alternating, load 10: xArm7 free 795-813 -> 781-800, fixed 636-663 -> 600-653, B1+Z1 1,748-1,780 ->
#: 1,719-1,747 (callgrind: 2-3 % more instructions, 1-2 % fewer code bytes).  Not for the FD derivatives:
#: the fixed xArm7's ran 892-906 -> 942-951 ns (tenth session).
LOAD_ONCE_FUNCTIONS = frozenset({"inverse_dynamics_derivatives", "inverse_dynamics_derivatives_fext"})
#: functions whose stage functions reach their most used work-array values through a few base pointers
#: with one-byte displacements (:func:`soadyn.codegen.stages.split_stages`, ``windows``): the work-array
#: reads and writes with 4-byte displacements were half of the stage code's bytes (TALOS: 23,643 of
#: 59,134 instructions, 198 of 372 KB), and these functions' time follows their code bytes (fetched once
#: per call).  Same statements, same bits.  FD derivatives, stage bytes before -> after: TALOS 370,826
#: -> 339,300, B1+Z1, xArm7 free and fixed (benchmarks/README.md, twelfth session)
WINDOW_FUNCTIONS = frozenset({"forward_dynamics_derivatives", "forward_dynamics_derivatives_fext",
                              *WIDE_MATRIX_FUNCTIONS})

#: functions whose single-call stage functions (in a compiled module; not the flight library's:
#: ``finish_function(windows=False)``) are printed with a jump to the next instruction every few
#: statements (:data:`soadyn.codegen.stages.JUMP_EVERY`): a taken branch every ~140 bytes of
#: straight-line code, on which this machine's front end (Zen 5) ran the long derivative stages faster
#: (benchmarks/README.md, thirteenth session).  TALOS, ns, fresh copies alternating: FD derivatives
#: 0.93-0.97 of the time without, ID derivatives 0.96-0.99 (xArm7 and B1+Z1 unchanged).  Not the default
#: functions: TALOS's inverse dynamics (48 KB of stages) ran
#: 651-719 -> 731-746 ns with them, its M mixed, while B1+Z1's and xArm7's M^-1 and forward dynamics gained
#: 2-8 %
JUMP_FUNCTIONS = frozenset({"inverse_dynamics_derivatives", "inverse_dynamics_derivatives_fext",
                            "forward_dynamics_derivatives", "forward_dynamics_derivatives_fext",
                            *WIDE_MATRIX_FUNCTIONS})

#: lines placed before the first stage function of a source file
STAGE_MACRO = ("#ifndef SOADYN_STAGE",
               "#if defined(__GNUC__) || defined(__clang__)",
               "#define SOADYN_STAGE __attribute__((noinline))",
               "#else",
               "#define SOADYN_STAGE",
               "#endif",
               "#endif")


def finish_function(f, stage_ops: int, lanes: int, finished: dict | None = None,
                    printer: CPrinter | None = None, windows: bool = True) -> None:
    """Split ``f`` (an :class:`~soadyn.codegen.emit.EmittedFunction`) into stages when it is long
    (``stage_ops`` > 0) and give its batch entry a ``lanes``-wide SIMD path (``lanes`` > 1); in place.
    ``printer``: the stages' statement printer and scalar type (default ``CPrinter``, double; the flight
    library's float target passes its ``FloatPrinter``).
    Frame families keep their body and scalar batch loop.  A function with ``f.delegate`` gets its SIMD
    batch from its nonzero-only variant's vector computation (``finished``: the functions by C name, the
    variant already finished)."""
    extra = Extra(lanes=lanes)
    f.extra = extra
    if f.zero_fext:
        if lanes > 1:
            finish_zero_fext(f, extra, lanes)
        return
    real = (printer or CPrinter()).real
    params = [(f"const {real} *", a.name) for a in f.inputs] + [(f"{real} *", a.name) for a in f.outputs]
    if f.is_family:
        # a SIMD batch when every case writes whole outputs and no input is read lane-major (a block
        # transposed in one case would be missing in another)
        cases = (family_cases(f.body, {a.name: a.size for a in f.outputs})
                 if lanes > 1 and not any(a.name in TRANSPOSED_INPUTS for a in f.inputs) else None)
        vector = cases is not None
        staged = split_family(f.cname, params, f.body, stage_ops, printer) if stage_ops > 0 else None
        if staged is not None:
            f.body = staged.body
            extra.prototypes += staged.prototypes
            extra.pieces += staged.stages
        if vector:
            finish_lanes(f, extra, lanes, f.body, staged,
                         {a.name: [(k, None) for k in range(a.size)] for a in f.outputs})
        return
    stored = stored_entries(f.body, [a.name for a in f.outputs])
    # product loops (the body's last statements) run after the statements, staged or not; scalar
    # batches.  The scratch arrays of their factors (declared first) are filled by the stages like outputs.
    n_epi = len(f.epilogue)
    scratch = f.scratch
    decls = f.body[:len(scratch)]
    statements = f.body[len(scratch):len(f.body) - n_epi]
    once = getattr(f, "load_once", False)
    bases = WINDOWS if windows and getattr(f, "windows", False) else 0
    staged = (split_stages(f.cname, params + [(f"{real} *", n) for n, _ in scratch], statements,
                          stage_ops, printer, load_once=once, windows=bases,
                          jumps=windows and any(f.cname.endswith(f"_{n}") for n in JUMP_FUNCTIONS))
              if stage_ops > 0 else None)
    if staged is not None:
        f.body = decls + staged.body + f.body[len(f.body) - n_epi:]
        extra.prototypes += staged.prototypes
        extra.pieces += staged.stages
    main = f.body
    lanes_ops = min(stage_ops, LANES_STAGE_OPS) if stage_ops > 0 else 0
    if lanes > 1 and not n_epi and lanes_ops != stage_ops and f.delegate is None:
        # the SIMD batch's own, shorter stages (LANES_STAGE_OPS)
        staged = split_stages(f.cname, params + [("double *", n) for n, _ in scratch], statements, lanes_ops,
                              printed=False)
        main = decls + staged.body if staged is not None else decls + statements
    if n_epi and lanes > 1 and f.delegate is None and per_state_products(f):
        # the SIMD lanes compute the statements only (the scratch arrays of the factors as lane-major
        # buffers too), and each state's product loops run after them, the single call's functions on the
        # state's outputs and scratch (lanes.finish_lanes): the same bits as the single call
        scratch_params = [("double *", n) for n, _ in scratch]
        staged = (split_stages(f.cname, params + scratch_params, statements, lanes_ops, printed=False)
                  if lanes_ops > 0 else None)
        main = staged.body if staged is not None else statements
        stored = stored_entries(statements, [a.name for a in f.outputs] + [n for n, _ in scratch])
        finish_lanes(f, extra, lanes, main, staged, stored, products=f.epilogue[-n_epi:])
        return
    if n_epi:
        # the SIMD batch of a function with general products: from its statements with the products as
        # expressions (the same roundings), staged on their own
        if f.lanes_body is None or lanes <= 1:
            return
        staged = (split_stages(f.cname, params, f.lanes_body, lanes_ops, printed=False) if lanes_ops > 0
                  else None)
        main = staged.body if staged is not None else f.lanes_body
        stored = stored_entries(f.lanes_body, [a.name for a in f.outputs])
    if f.delegate is not None:
        finish_delegate(f, extra, lanes, (finished or {})[f.delegate[0]])
        return
    if lanes > 1:
        finish_lanes(f, extra, lanes, main, staged, stored)


def per_state_products(f) -> bool:
    """Whether the SIMD batch of ``f`` (a function ending with product loops) runs the product loops per
    state after the lanes' statements (:func:`~soadyn.codegen.lanes.finish_lanes` with ``products``)
    instead of evaluating the products as expressions in the lanes
    (:func:`~soadyn.codegen.products.expanded_products`): when they are at least
    :data:`PER_STATE_PRODUCT_OPS` operations."""
    return sum(sum(p.ops().values()) for p in f.products) >= PER_STATE_PRODUCT_OPS


def prelude(lanes: int) -> str:
    """Lines that every source file with finished functions needs after its includes."""
    text = "\n".join(STAGE_MACRO) + "\n"
    return text + PRELUDE + (simd_prelude(lanes) if lanes > 1 else "")


def translation_units(funcs: list, header_text: str) -> list[tuple[str, str]]:
    """``(file stem, C text)`` per translation unit: the pieces of one function
    (its stages, scalar and SIMD, in order, then the function with its batch entry), consecutive pieces
    packed into units of about :data:`UNIT_OPS` operations.  A unit holds pieces of one function only
    and is self-contained: the function's prototypes and, for a frame family, the frame enum
    (``f.enum_text``, as the module header prints it; ``header_text`` is not read) stand in for the
    module header, so its text alone is the object-cache key (:mod:`soadyn.codegen.objcache`) and
    an unchanged function keeps its objects.  The SIMD batch of a function of at least
    :data:`SIMD_UNIT_OPS` operations (its vector stages and lanes driver) goes to units of its own, stems
    ending in :data:`SIMD_UNIT`, compiled at ``-O1`` (:func:`lowered_unit`), as are the units of the
    :data:`LOWERED_FUNCTIONS`."""
    units: list[tuple[str, str]] = []
    for f in funcs:
        extra: Extra | None = getattr(f, "extra", None)
        lanes = extra.lanes if extra else 1
        memset = extra is not None and extra.vectorised and (getattr(f, "delegate", None) or (0, 0, False))[2]
        strings = "#include <string.h>\n" if memset else ""
        # self-contained: the function's own declarations (and a family's frame enum) instead of the module
        # header, so that a unit compiles before the other functions exist (units are compiled while the
        # rest of the module is derived) and its text alone decides its object
        enum = f.enum_text if f.is_family else ""
        if f.is_family and not enum:
            raise ValueError(f"{f.cname}: a frame family's unit needs the frame enum (emit_module sets it)")
        pragma = "\n".join(PRIORITY_RA_PRAGMA) + "\n" if getattr(f, "priority_ra", False) else ""
        common = f"#include <math.h>\n{strings}{enum}{f.prototype}\n{f.batch_prototype}\n" + prelude(lanes)
        head = pragma + common
        # the scalar units (not the SIMD batch's own): SLP
        scalar_head = pragma + ("\n".join(SLP_PRAGMA) + "\n" if getattr(f, "slp", False) else "") + common
        protos = "\n".join(extra.prototypes) + "\n" if extra and extra.prototypes else ""
        pieces = list(extra.pieces) if extra else []
        total = f.ops.get("total", 0)
        if (extra is not None and extra.vectorised and extra.simd_from is not None
                and total >= SIMD_UNIT_OPS):
            # the SIMD batch in units of its own (the function's unit calls its lanes driver)
            simd = pieces[extra.simd_from:]
            pieces = pieces[:extra.simd_from]
            groups = _pack(simd, total // max(1, len(simd)))
            for k, group in enumerate(groups):
                units.append((f"{f.cname}{SIMD_UNIT}{k if k else ''}", head + protos + "\n".join(group)))
            own: list[str] = []
        else:
            # the SIMD driver goes with the function
            own = pieces[-1:] if extra and extra.vectorised else []
        per = total // max(1, len(pieces))
        rest = pieces[:len(pieces) - len(own)]
        groups = _pack(rest, per)
        low = LOWERED_UNIT if any(f.cname.endswith(f"_{n}") for n in LOWERED_FUNCTIONS) else ""
        for k, group in enumerate(groups[:-1]):
            units.append((f"{f.cname}_{k}{low}", scalar_head + protos + "\n".join(group)))
        last = groups[-1] if groups else []
        text = scalar_head + protos + "\n".join(last + own) + _function_text(f)
        units.append((f"{f.cname}{low}", text))
    return units


def lowered_unit(stem: str) -> bool:
    """Whether the translation unit ``stem`` of :func:`translation_units` is compiled at ``-O1``
    (:func:`soadyn.codegen.build.lowered_flags`): a SIMD batch's own unit, or a unit of one of the
    :data:`LOWERED_FUNCTIONS`."""
    return SIMD_UNIT in stem or stem.endswith(LOWERED_UNIT)


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
    lines = CPrinter().lines(fuse_trig(f.body))
    body = "".join(f"    {x}\n" if not x.startswith("#") else f"{x}\n" for x in lines)
    batch = "".join(f"    {x}\n" if not x.startswith("#") else f"{x}\n" for x in f.batch_body)
    return (f"{helpers}\n{f.signature}\n{{\n{unused}{body}}}\n\n{f.batch_signature}\n{{\n{batch}}}\n"
            + batch_checked_text(f))
