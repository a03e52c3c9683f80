"""The registry of generated functions: the single place that says what a compiled module contains.

:data:`REGISTRY` has one :class:`Registration` per public (Python-level) function: the algorithm of
:mod:`soadyn.symbolic.algorithms` that computes it, when it applies (any base, free base, loop closures,
invertible body inertias) and the independent reference function of :mod:`soadyn.reference` that
``soadyn verify`` checks it against (``None`` when there is no independent check; verify lists such
functions as unchecked).  :func:`function_table` expands the registry for one robot into
:class:`FunctionSpec` entries: a C function each, its inputs and outputs with sizes taken from the robot,
the keyword arguments passed to the algorithm and the public function it backs.

Public (Python-level) API of a compiled module, with the names of the reference path
:mod:`soadyn.reference.dense`:

=========================  ==============================================  ============================
Python function            C functions                                     outputs
=========================  ==============================================  ============================
center_of_mass(q)          center_of_mass                                  com (3,)
mass_matrix(q,             mass_matrix; mass_matrix_nz, mass_matrix_upper  M (nv, nv)
  triangle="full")           (variants from the same program, emit.py)
bias_forces(q, v)          bias_forces                                     C (nv,)
inverse_dynamics(q,v,a,    inverse_dynamics, inverse_dynamics_fext         tau (nv,)
  f_ext=None)
forward_dynamics(q,v,tau,  forward_dynamics, forward_dynamics_fext         a (nv,)
  f_ext=None)
mass_matrix_inverse(q)     mass_matrix_inverse                             Minv (nv, nv)
innovations_factors(q)     innovations_factors                             L (nv, nv), D (nv, nv)
momentum(q, v)             momentum                                        h (6,)
kinetic_energy(q, v)       kinetic_energy                                  T ()
jacobian(q, frame,         jacobian_local, jacobian_world (frame family)   J (6, nv)
  world_aligned=False)
generalized_jacobian(q,    generalized_jacobian (frame family, free base)  J (6, n_joints)
  frame)
momentum_frame_twist(q,    momentum_frame_twist (frame family, free base)  tw (6,): J_b H_b^-1 h_o, so the
  h, frame)                                                                 twist is J* qd + tw (E.6)
forward_dynamics_decoupled forward_dynamics_decoupled[_fext] (free base)  a (nv,)
  (q, v, tau, f_ext=None)
operational_space_inertias operational_space_inertias (free base)         Lambda (n_bodies, 6, 6)
  (q)
forward_dynamics_schur(q,  forward_dynamics_schur[_fext] (every moving      a (nv,)
  v, tau, f_ext=None)        body with an invertible spatial inertia)
closed_loop_forward_       closed_loop_forward_dynamics (loop closures)    a (nv,), status (m,)
  dynamics(q, v, tau)
closed_loop_dependent_     closed_loop_dependent_velocities (loops)        v_full (nv,), status (m,)
  velocities(q, v)
closed_loop_constraints    closed_loop_constraints (loops)                 g, Jv (constraint rows,)
  (q, v)
=========================  ==============================================  ============================

Functions taking ``f_ext`` come in two C variants: without external wrenches and ``*_fext`` taking the
``(n_bodies, 6)`` array of wrenches.  The Python wrapper picks the variant from whether ``f_ext`` is given.
The inverse and forward dynamics (and their derivatives) run their algorithm with ``f_ext=None``, so no
operations are spent on a zero array; the other functions of :data:`ZERO_FEXT_CALLS` call their ``*_fext``
twin with a zero array instead of a program of their own (``FunctionSpec.zero_fext_call``).

**Frame families.**  The Jacobians are generated once per robot, not once per frame: a family
(``FunctionSpec.frames`` non-empty) is one C function ``int <robot>_jacobian_local(const double *q, int
frame, double *J)`` whose ``frame`` argument is an id of the header's enum (``<ROBOT>_FRAME_<NAME>``:
bodies in ``body_names`` order, then the named frames).  It is derived in one symbolic run (the algorithm
is called for every frame on one context that shares identical staged quantities), optimised as one
program, and emitted as a shared prefix (quantities that every frame, or too many frames, need: the
mass matrix of the generalised Jacobian) followed by a ``switch`` whose case for a frame computes the
rest of what that frame needs, and nothing else: on a tree, the kinematics of the bodies on its path,
not of every body of the robot (:func:`~soadyn.codegen.optimise.split_cases`: a quantity needed by
several frames is copied into each of their cases where the calls it saves are worth the code, within
a bound on the code's growth).  Family functions return ``0``, or ``1`` for an invalid frame id
(outputs untouched); every other generated function returns ``void``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from soadyn.model.names import C_KEYWORDS, c_identifier
from soadyn.model.robot import Robot


@dataclass(frozen=True)
class Arg:
    """One input or output array: C parameter name and its (row-major) shape."""

    name: str
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


#: when a function applies (:attr:`Registration.when`) -> how verify and the docs say it
WHEN = {"any": "any base", "free": "free base only", "loops": "robots with loop closures",
        "invertible": "every moving body has an invertible spatial inertia",
        "params": "robots with parameterised bodies (run-time inertial parameters)"}


@dataclass(frozen=True)
class Registration:
    """One public function of a compiled module, as the registry knows it.

    ``algorithm``: attribute of :mod:`soadyn.symbolic.algorithms`; ``when``: a key of :data:`WHEN`;
    ``reference``: dotted path ``soadyn.reference.<module>.<function>`` of an independent implementation
    of the same quantity (the reference path never imports the algorithms), ``None`` when there is none;
    ``unchecked``: why there is none.
    """

    api: str
    algorithm: str
    when: str
    reference: str | None
    unchecked: str = ""
    #: tolerance of the reference check when it is looser than verify's (finite differences)
    reference_tol: float | None = None
    #: at most this many states are checked against the reference (None: all; finite differences cost
    #: O(nv) reference runs per state)
    max_states: int | None = None

    def applies(self, robot: Robot) -> bool:
        """Whether the function is generated for ``robot``."""
        # mimic couplings: the reduced forms of soadyn...coupling only (and the forward-mode derivatives
        # of those: the tangents of the reduced program, seeded along the reduced coordinates)
        of = self.api[:-len(TANGENT_SUFFIX)] if self.algorithm == "tangent_derivatives" else self.algorithm
        if getattr(robot, "is_coupled", False) and of not in _coupled_algorithms():
            return False
        if self.when == "any":
            return True
        if self.when == "free":
            return robot.is_free
        if self.when == "loops":
            return bool(getattr(robot, "loops", None))
        if self.when == "invertible":
            return _inertias_invertible(robot)
        if self.when == "params":
            return bool(robot.param_bodies)
        raise ValueError(f"registration {self.api!r}: unknown 'when' {self.when!r}; one of {sorted(WHEN)}")


def _registrations() -> dict[str, Registration]:
    dense, ff = "soadyn.reference.dense.", "soadyn.reference.free_floating."
    inv = "soadyn.reference.invariant."
    loop_why = ("depends on the generation-time partition of the coordinates (and returns its status): "
                "checked against the float run of the same algorithm only; the partition-free constraint "
                "rows are checked against soadyn.reference.closed_loop")
    rows = [
        ("center_of_mass", "any", dense + "center_of_mass"),
        ("mass_matrix", "any", dense + "mass_matrix"),
        ("bias_forces", "any", dense + "bias_forces"),
        ("inverse_dynamics", "any", dense + "inverse_dynamics"),
        ("forward_dynamics", "any", dense + "forward_dynamics"),
        ("mass_matrix_inverse", "any", dense + "mass_matrix_inverse"),
        ("innovations_factors", "any", dense + "innovations_factors"),
        ("momentum", "any", dense + "momentum"),
        ("kinetic_energy", "any", dense + "kinetic_energy"),
        ("jacobian", "any", dense + "jacobian"),
        ("forward_dynamics_schur", "invertible", dense + "forward_dynamics"),
        ("forward_dynamics_decoupled", "free", dense + "forward_dynamics"),
        ("operational_space_inertias", "free", inv + "operational_space_inertias"),
        ("generalized_jacobian", "free", dense + "generalized_jacobian"),
        ("momentum_frame_twist", "free", ff + "momentum_frame_twist"),
        ("base_inertia", "free", ff + "base_inertia"),
        ("coupling_inertia", "free", ff + "coupling_inertia"),
        ("generalized_inertia", "free", ff + "generalized_inertia"),
        ("generalized_bias", "free", ff + "generalized_bias"),
        ("angular_reduced_dynamics", "free", ff + "angular_reduced_dynamics"),
        ("coupling_inertia_rate", "free", ff + "coupling_inertia_rate"),
        ("base_velocity", "free", ff + "base_velocity"),
        ("closed_loop_forward_dynamics", "loops", None),
        ("closed_loop_dependent_velocities", "loops", None),
        ("closed_loop_constraints", "loops", "soadyn.reference.closed_loop.closed_loop_constraints"),
        ("inverse_dynamics_regressor", "params", "soadyn.reference.regressors.inverse_dynamics_regressor"),
        ("momentum_regressor", "params", "soadyn.reference.regressors.momentum_regressor"),
    ]
    # kinematics of frames (issue 23): poses by default, twist and acceleration on request
    rows += [("frame_pose", "any", dense + "frame_pose"), ("body_poses", "any", dense + "body_poses"),
             ("frame_twist", "any", "soadyn.reference.frames.frame_twist"),
             ("frame_acceleration", "any", "soadyn.reference.frames.frame_acceleration")]
    regs = {api: Registration(api, api, when, ref, "" if ref else loop_why) for api, when, ref in rows}
    # forward-mode derivatives of the other functions (opt-in, tangent_derivatives): same applicability,
    # checked against central differences of the function's own reference
    regs.update({api + TANGENT_SUFFIX: Registration(
        api + TANGENT_SUFFIX, "tangent_derivatives", when, "soadyn.reference.derivatives.tangent_derivatives",
        reference_tol=1e-6, max_states=2) for api, when, ref in rows if ref and api not in NO_TANGENT})
    # the closed-loop functions with a generation-time partition: the derivatives of what the module
    # computes (that partition; the status output differentiated like the others), float run only
    regs.update({api + TANGENT_SUFFIX: Registration(
        api + TANGENT_SUFFIX, "tangent_derivatives", when, None,
        "the derivatives of a function with a generation-time partition: checked against the float run of "
        "the same program only (tests/test_closed_loop.py: central differences of the reference path with "
        "the same partition)") for api, when, ref in rows if not ref and api not in NO_TANGENT})

    # derivatives (opt-in): central differences on the manifold (soadyn.reference.derivatives), tol 1e-6
    for api in ("inverse_dynamics_derivatives", "forward_dynamics_derivatives",
                "frame_acceleration_derivatives"):
        regs[api] = Registration(api, api, "any", "soadyn.reference.derivatives." + api,
                                 reference_tol=1e-6, max_states=3)
    return regs


#: the name of the forward-mode derivatives of a public function: ``<api>_derivatives``
TANGENT_SUFFIX = "_derivatives"
#: public functions without forward-mode derivatives: the inverse and forward dynamics (analytic
#: derivatives of their own), the frame kinematics (differentiated from the frame Jacobian and
#: ``frame_acceleration_derivatives``), the regressors (linear in the parameters: they are the
#: derivatives with respect to them) and the derivatives themselves.  The closed-loop functions have
#: them: the derivatives of the function as generated (its generation-time partition), status included
NO_TANGENT = frozenset({"inverse_dynamics", "forward_dynamics", "frame_pose", "body_poses", "frame_twist",
                        "frame_acceleration", "inverse_dynamics_regressor", "momentum_regressor"})

#: every public function a compiled module can have, by API name (see the module docstring)
REGISTRY: dict[str, Registration] = _registrations()


def registration(api: str) -> Registration:
    """The registry entry of a public function (``KeyError`` naming the registered ones otherwise)."""
    try:
        return REGISTRY[api]
    except KeyError:
        raise KeyError(f"{api!r} is not in soadyn.codegen.functions.REGISTRY "
                       f"({', '.join(REGISTRY)})") from None


def _coupled_algorithms() -> frozenset[str]:
    from soadyn.symbolic.algorithms.coupling import COUPLED_ALGORITHMS

    return COUPLED_ALGORITHMS


def _inertias_invertible(robot: Robot) -> bool:
    from soadyn.symbolic.algorithms.schur import body_inverse_inertias

    if any(j is not None and j.armature for j in robot.joints):
        return False                       # joint armature: not in the rigid-body CF factorisation

    try:
        body_inverse_inertias(robot)
    except ValueError:
        return False                       # a massless moving body: the CF algorithm does not apply
    return True


@dataclass(frozen=True)
class FunctionSpec:
    """One generated C function.

    ``name``: C identifier (unique within the module, without the robot prefix);
    ``algorithm``: attribute of :mod:`soadyn.symbolic.algorithms`; ``inputs``/``outputs``: arrays;
    ``kwargs``: extra keyword arguments for the algorithm (frame, world_aligned);
    ``api``: the Python-level function this C function backs; ``variant``: what distinguishes it
    among the C functions of the same ``api`` (e.g. ``{"frame": "tcp", "world_aligned": True}``).
    """

    name: str
    algorithm: str
    inputs: tuple[Arg, ...]
    outputs: tuple[Arg, ...]
    api: str
    kwargs: tuple[tuple[str, Any], ...] = ()
    variant: tuple[tuple[str, Any], ...] = ()
    free_only: bool = False
    doc: str = ""
    fext_input: bool = field(default=False)
    #: frame family: the frame names (in frame-id order) the ``frame`` argument selects from
    frames: tuple[str, ...] = ()
    #: the ``*_fext`` function (name without the robot prefix) that this one calls with zero external
    #: wrenches instead of having a program of its own (:data:`ZERO_FEXT_CALLS`); "" otherwise
    zero_fext_call: str = ""

    @property
    def is_family(self) -> bool:
        return bool(self.frames)

    @property
    def registration(self) -> Registration:
        return registration(self.api)

    def kwargs_dict(self) -> dict[str, Any]:
        return dict(self.kwargs)



# (api name, algorithm, input names, outputs as (name, shape-key), has f_ext variant, doc)
# shape keys: "nq", "nv", "nj" (number of joints), "3", "6" ...
_BASE_TABLE: tuple[tuple[str, tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...], bool, str], ...] = (
    ("center_of_mass", ("q",), (("com", ("3",)),), False,
     "centre of mass of the whole robot in the inertial frame"),
    ("mass_matrix", ("q",), (("M", ("nv", "nv")),), False, "joint-space mass matrix"),
    ("bias_forces", ("q", "v"), (("C", ("nv",)),), False,
     "Coriolis, centrifugal and gravity forces (inverse dynamics at zero acceleration)"),
    ("inverse_dynamics", ("q", "v", "a"), (("tau", ("nv",)),), True,
     "generalised forces for accelerations a (Newton-Euler)"),
    ("forward_dynamics", ("q", "v", "tau"), (("a", ("nv",)),), True,
     "accelerations for generalised forces tau (articulated-body, O(N))"),
    ("mass_matrix_inverse", ("q",), (("Minv", ("nv", "nv")),), False, "inverse of the mass matrix"),
    ("innovations_factors", ("q",), (("L", ("nv", "nv")), ("D", ("nv", "nv"))), False,
     "innovations factors: M = (I + L) D (I + L)^T"),
    ("momentum", ("q", "v"), (("h", ("6",)),), False,
     "total spatial momentum [angular momentum about the system centre of mass; linear momentum], "
     "inertial axes"),
    ("kinetic_energy", ("q", "v"), (("T", ()),), False, "kinetic energy"),
)

#: names that generated code must not use for locals (math.h functions, our parameters)
RESERVED = C_KEYWORDS | frozenset(
    "sin cos tan sqrt pow fabs exp log atan2 asin acos atan sinh cosh tanh floor ceil fmod i n "
    "q v a tau f_ext com M C Minv L D h T J".split()
)


#: public functions whose variant without external wrenches calls the ``*_fext`` C function with a zero
#: array instead of being a program of its own.  Both variants are the same algorithm and differ by a few
#: operations (Unitree G1: 31,029 against 31,209 for the Schur complement), so a second program doubled
#: their derivation and compile time: on the G1 (nv 35) the four second programs took 3.6 s of Python and
#: 6.9 s of gcc CPU, a fifth of a compile (issue 11).  Measured cost, Dimitrov robot, plain C at ``-O2
#: -march=native``, best of 3 rounds, ns per call with its own program -> through the ``_fext`` one:
#: Schur complement 1,558 -> 1,567, decoupled 1,280 -> 1,338, generalised bias 383 -> 418 (their ``_fext``
#: forms got faster with :func:`~soadyn.codegen.cprogram.sink_loads`: 1,602 -> 1,577, 1,429 -> 1,335, 467 ->
#: 419).  The inverse and forward dynamics, the hot path of simulations and batches, keep their own
#: program without the wrenches.
ZERO_FEXT_CALLS = frozenset({"forward_dynamics_decoupled", "forward_dynamics_schur", "generalized_bias",
                             "angular_reduced_dynamics"})


def _with_fext(plain: FunctionSpec, fext: FunctionSpec) -> list[FunctionSpec]:
    """A function and its ``*_fext`` variant in derivation order: the variant first when the function
    calls it (:data:`ZERO_FEXT_CALLS`)."""
    if plain.api not in ZERO_FEXT_CALLS:
        return [plain, fext]
    return [fext, replace(plain, zero_fext_call=fext.name)]


def frame_identifiers(robot: Robot) -> dict[str, str]:
    """Map every body and named frame to a unique C identifier fragment (deterministic)."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for name in [*robot.body_names, *robot.frame_names]:
        if name in out:
            continue
        base = c_identifier(name)
        ident, i = base, 2
        while ident in used:
            ident = f"{base}_{i}"
            i += 1
        used.add(ident)
        out[name] = ident
    return out


def _dim(robot: Robot, key: str) -> int:
    if key == "nq":
        return robot.nq
    if key == "nv":
        return robot.nv
    if key == "nj":
        return robot.n_joints
    return int(key)


def input_arg(robot: Robot, name: str) -> Arg:
    """The input array ``name`` with its shape for ``robot``."""
    shapes = {"q": (robot.nq,), "v": (robot.nv,), "a": (robot.nv,), "tau": (robot.nv,),
              "f_ext": (robot.n_bodies, 6), "qd": (robot.n_joints,), "h": (6,),
              "params": (len(robot.param_bodies), 10)}
    return Arg(name, shapes[name])


def function_table(robot: Robot, derivatives: bool = False) -> list[FunctionSpec]:
    """All C functions of the module for ``robot`` (free-base-only ones omitted for a fixed base).

    ``derivatives=True`` adds the derivative functions (:func:`_derivative_specs`); they are opt-in (built
    only when named in ``functions``) because they are ten times the size of the dynamics they derive.
    """
    specs: list[FunctionSpec] = []
    for api, ins, outs, has_fext, doc in _BASE_TABLE:
        inputs = tuple(input_arg(robot, n) for n in ins)
        outputs = tuple(Arg(n, tuple(_dim(robot, d) for d in shape)) for n, shape in outs)
        specs.append(FunctionSpec(api, api, inputs, outputs, api, doc=doc))
        if has_fext:
            specs.append(FunctionSpec(f"{api}_fext", api, (*inputs, input_arg(robot, "f_ext")), outputs, api,
                                      variant=(("f_ext", True),), doc=doc + ", with external wrenches f_ext",
                                      fext_input=True))
    specs.extend(_invariant_specs(robot))
    specs.extend(_closed_loop_specs(robot))
    specs.extend(_free_floating_specs(robot))
    if derivatives:
        specs.extend(_derivative_specs(robot))
    frames = tuple(frame_identifiers(robot))
    q = (input_arg(robot, "q"),)
    for world in (False, True):
        coord = "world" if world else "local"
        specs.append(FunctionSpec(
            f"jacobian_{coord}", "jacobian", q, (Arg("J", (6, robot.nv)),), "jacobian",
            kwargs=(("world_aligned", world),), variant=(("world_aligned", world),), frames=frames,
            doc="geometric Jacobian of a body or named frame (frame family), "
                + ("inertial axes at the frame origin" if world else "frame axes (local)")))
    if robot.is_free:
        specs.append(FunctionSpec(
            "generalized_jacobian", "generalized_jacobian", q, (Arg("J", (6, robot.n_joints)),),
            "generalized_jacobian", free_only=True, frames=frames,
            doc="generalised Jacobian (momentum-conserving base, seed 003 eq. E.5) of a body or named "
                "frame (frame family), inertial axes"))
        specs.append(FunctionSpec(
            "momentum_frame_twist", "momentum_frame_twist", (*q, input_arg(robot, "h")), (Arg("tw", (6,)),),
            "momentum_frame_twist", free_only=True, frames=frames,
            doc="momentum term J_b H_b^-1 h_o of the frame twist (seed 003 eq. E.6) for the momentum "
                "h = [L about the CoM; P] (inertial axes), frame family, inertial axes"))
    specs.extend(_kinematics_specs(robot, frames, optional=derivatives))
    specs = with_parameter_inputs(robot, specs)
    if derivatives:
        specs.extend(tangent_specs(robot, specs))
    if robot.is_coupled:                   # mimic couplings: only the functions with a reduced form
        specs = [s for s in specs if registration(s.api).applies(robot)]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):  # pragma: no cover - guarded by frame_identifiers
        raise AssertionError(f"duplicate generated function names: {names}")
    for s in specs:
        reg = registration(s.api)
        if s.algorithm != reg.algorithm or not reg.applies(robot):
            raise AssertionError(f"{s.name}: table and registry disagree (algorithm {s.algorithm!r} vs "
                                 f"{reg.algorithm!r}, applies {reg.applies(robot)})")
    return specs


def frame_enum(robot: Robot, module_name: str) -> list[tuple[str, str, int]]:
    """``(frame name, C enumerator, id)`` for every body and named frame, in frame-id order.

    Enumerators are ``<MODULE>_FRAME_<NAME>`` in upper case (made unique with ``_2``, ``_3``... when two
    names differ only in case or in non-identifier characters).
    """
    head = c_identifier(module_name).upper() + "_FRAME_"
    out: list[tuple[str, str, int]] = []
    used: set[str] = set()
    for i, (name, ident) in enumerate(frame_identifiers(robot).items()):
        base = head + ident.upper()
        enum, k = base, 2
        while enum in used:
            enum = f"{base}_{k}"
            k += 1
        used.add(enum)
        out.append((name, enum, i))
    return out


def expand_family(spec: FunctionSpec) -> list[FunctionSpec]:
    """One spec per frame of a family (``frame`` added to ``kwargs``, name ``<family>[<frame>]``), for
    checking each frame on its own; a plain spec is returned unchanged."""
    if not spec.is_family:
        return [spec]
    return [replace(spec, name=f"{spec.name}[{f}]", kwargs=(*spec.kwargs, ("frame", f)),
                    variant=(*spec.variant, ("frame", f)), frames=()) for f in spec.frames]


def select_functions(specs: list[FunctionSpec], functions: list[str] | tuple[str, ...] | str | None,
                     robot_name: str = "") -> list[FunctionSpec]:
    """The specs backing the requested public API names (all when ``functions`` is None).

    ``functions`` is a list of Python-level names (``"forward_dynamics"``, ``"jacobian"``) or one
    comma-separated string.  An unknown name raises ``ValueError`` listing the valid ones.
    """
    if functions is None:
        return specs
    if isinstance(functions, str):
        functions = functions.split(",")
    wanted = [f.strip() for f in functions if f.strip()]
    available = api_names(specs)
    if not wanted:
        raise ValueError(f"functions: empty selection; choose from {', '.join(available)}")
    bad = [f for f in wanted if f not in available]
    if bad:
        who = f" of robot {robot_name!r}" if robot_name else ""
        raise ValueError(f"functions: unknown name(s) {', '.join(map(repr, bad))}; the functions{who} are: "
                         f"{', '.join(available)}")
    keep = set(wanted)
    return [s for s in specs if s.api in keep]


def api_names(specs: list[FunctionSpec]) -> list[str]:
    """Public Python function names, in table order, without repeats."""
    out: list[str] = []
    for s in specs:
        if s.api not in out:
            out.append(s.api)
    return out


def _invariant_specs(robot: Robot) -> list[FunctionSpec]:
    """Base-invariant / Schur-complement functions (seed 000 sections 3-4, seed 002)."""
    qvt = tuple(input_arg(robot, n) for n in ("q", "v", "tau"))
    acc = (Arg("a", (robot.nv,)),)
    fd = [("forward_dynamics_schur", "accelerations by the Schur-complement (constraint-force) factorisation "
           "of M^-1 (seed 002)")]
    if not REGISTRY["forward_dynamics_schur"].applies(robot):
        fd = []
    out: list[FunctionSpec] = []
    if robot.is_free:
        fd.insert(0, ("forward_dynamics_decoupled", "accelerations by the base-invariant decoupled algorithm "
                      "(seed 000 Lemma 3.2, Algorithm 6)"))
        out.append(FunctionSpec("operational_space_inertias", "operational_space_inertias", qvt[:1],
                                (Arg("Lambda", (robot.n_bodies, 6, 6)),), "operational_space_inertias",
                                free_only=True, doc="operational-space inertia of every body, P(k) + S(k) "
                                "(seed 000 Lemma 4.1), body frame, angular first"))
    for api, doc in fd:
        out += _with_fext(FunctionSpec(api, api, qvt, acc, api, doc=doc),
                          FunctionSpec(f"{api}_fext", api, (*qvt, input_arg(robot, "f_ext")), acc, api,
                                       variant=(("f_ext", True),), doc=doc + ", with external wrenches f_ext",
                                       fext_input=True))
    return out


def _closed_loop_specs(robot: Robot) -> list[FunctionSpec]:
    """Closed-loop functions (seed 004 eq. 5), only for robots with loop closures."""
    if not getattr(robot, "loops", None):
        return []
    from soadyn.symbolic.algorithms.closed_loop import closed_loop_spec_table

    out: list[FunctionSpec] = []
    for name, ins, outs, kwargs, doc in closed_loop_spec_table(robot):
        out.append(FunctionSpec(name, name, tuple(input_arg(robot, n) for n in ins),
                                tuple(Arg(n, shape) for n, shape in outs), name, kwargs=kwargs, doc=doc))
    return out


def _free_floating_specs(robot: Robot) -> list[FunctionSpec]:
    """Free-floating toolkit (seed 003 ch. 3-5, App. C-E; soadyn.symbolic.algorithms.free_floating)."""
    if not robot.is_free:
        return []
    nj = robot.n_joints
    q, v, qd, h = (input_arg(robot, n) for n in ("q", "v", "qd", "h"))
    fe = input_arg(robot, "f_ext")
    table = [
        ("base_inertia", (q,), (Arg("Hb_o", (6, 6)),),
         "H_b: locked spatial inertia about the base origin, base axes"),
        ("coupling_inertia", (q,), (Arg("Hbm_o", (6, nj)),), "H_bm: base-joint coupling inertia, base axes"),
        ("generalized_inertia", (q,), (Arg("Hg_o", (nj, nj)),),
         "H* = H_m - H_bm^T H_b^-1 H_bm (seed 003 E.3)"),
        ("generalized_bias", (q, v), (Arg("cg_o", (nj,)),), "c* = c_m - H_bm^T H_b^-1 c_b (seed 003 E.3)"),
        ("angular_reduced_dynamics", (q, v),
         (Arg("Hbt_o", (3, 3)), Arg("Hct_o", (3, nj)), Arg("Hpt_o", (nj, nj)), Arg("cbt_o", (3,)),
          Arg("cpt_o", (nj,))), "angular reduced dynamics (seed 003 E.2), base axes, about the system CoM"),
        ("coupling_inertia_rate", (q, qd), (Arg("Hdq_o", (6,)),), "Hdot_bm qd (seed 003 eq. 3.6), base axes"),
        ("base_velocity", (q, qd, h), (Arg("vb_o", (6,)),),
         "base twist from joint rates and momentum h = [L about CoM; P] (inertial axes)"),
    ]
    out: list[FunctionSpec] = []
    for api, ins, outs, doc in table:
        plain = FunctionSpec(api, api, ins, outs, api, free_only=True, doc=doc)
        if api in ("generalized_bias", "angular_reduced_dynamics"):
            fext = FunctionSpec(f"{api}_fext", api, (*ins, fe), outs, api, variant=(("f_ext", True),),
                                free_only=True, doc=doc + ", with external wrenches f_ext", fext_input=True)
            out += _with_fext(plain, fext)
        else:
            out.append(plain)
    return out


def _derivative_specs(robot: Robot) -> list[FunctionSpec]:
    """Derivatives of the dynamics (soadyn.symbolic.algorithms.derivatives: the analytic recursions of
    Carpentier & Mansard for ID and FD, forward mode over the staged recursions for the frame acceleration;
    q along the tangent ``q (+) delta`` of docs/conventions.md, v held in base coordinates)."""
    nv = robot.nv
    table = [
        ("inverse_dynamics_derivatives", ("q", "v", "a"), ("dtau_dq", "dtau_dv"),
         "derivatives dtau/dq, dtau/dv of the inverse dynamics (dtau/da is the mass matrix)"),
        ("forward_dynamics_derivatives", ("q", "v", "tau"), ("da_dq", "da_dv", "da_dtau"),
         "derivatives da/dq, da/dv, da/dtau = M^-1 of the forward dynamics"),
    ]
    out: list[FunctionSpec] = []
    for api, ins, outs, doc in table:
        inputs = tuple(input_arg(robot, n) for n in ins)
        outputs = tuple(Arg(n, (nv, nv)) for n in outs)
        out.append(FunctionSpec(api, api, inputs, outputs, api, doc=doc))
        out.append(FunctionSpec(f"{api}_fext", api, (*inputs, input_arg(robot, "f_ext")), outputs, api,
                                variant=(("f_ext", True),), doc=doc + ", with external wrenches f_ext",
                                fext_input=True))
    out.append(FunctionSpec(
        "frame_acceleration_derivatives", "frame_acceleration_derivatives",
        tuple(input_arg(robot, n) for n in ("q", "v", "a")),
        (Arg("Vf", (6,)), Arg("Af", (6,)), Arg("dVf_dq", (6, nv)), Arg("dAf_dq", (6, nv)),
         Arg("dAf_dv", (6, nv))),
        "frame_acceleration_derivatives", frames=tuple(frame_identifiers(robot)),
        doc="twist Vf = [w; v] of a body or named frame (origin velocity) and its time derivative Af "
            "(classical acceleration, no gravity), inertial axes, with dVf/dq, dAf/dq, dAf/dv (frame family; "
            "dVf/dv = dAf/da is jacobian(q, frame, world_aligned=True))"))
    return out


def tangent_name(name: str, api: str) -> str:
    """C name (without the module prefix) of the forward-mode derivatives of the C function ``name`` of
    the public function ``api``: ``<api>_derivatives`` followed by what the name adds to its api
    (``jacobian_local`` -> ``jacobian_derivatives_local``)."""
    rest = name[len(api):] if name.startswith(api) else ""
    return api + TANGENT_SUFFIX + rest


def tangent_specs(robot: Robot, specs: list[FunctionSpec]) -> list[FunctionSpec]:
    """The forward-mode derivatives (``tangent_derivatives``) of every function of ``specs`` that has
    none of its own (:data:`NO_TANGENT`): for each output ``y`` and input ``x``, ``d<y>_d<x>`` of shape
    ``y.shape + x.shape``, q along the tangent ``q (+) delta`` (``y.shape + (nv,)``, docs/conventions.md).
    A variant with external wrenches (``*_fext``) gets its own, with the derivatives with respect to
    ``f_ext`` among them (``d<y>_df_ext``, ``y.shape + (n_bodies, 6)``).  On a robot with run-time
    inertial parameters a function that reads them takes ``params``, and its derivatives include
    ``d<y>_dparams`` (``y.shape + (n_param_bodies, 10)``, forward mode seeded along the parameters)."""
    out: list[FunctionSpec] = []
    for s in specs:
        api = s.api + TANGENT_SUFFIX
        if s.api in NO_TANGENT or api not in REGISTRY or not REGISTRY[api].applies(robot):
            continue
        outputs = tuple(Arg(f"d{y.name}_d{x.name}", y.shape + ((robot.nv,) if x.name == "q" else x.shape))
                        for y in s.outputs for x in s.inputs)
        kwargs = (("of", s.algorithm), ("inputs", tuple(x.name for x in s.inputs)), *s.kwargs)
        doc = (f"derivatives of {s.name} with respect to {', '.join(x.name for x in s.inputs)} (forward "
               "mode; q along the tangent q (+) delta)")
        out.append(FunctionSpec(tangent_name(s.name, s.api), "tangent_derivatives", s.inputs, outputs, api,
                                kwargs=kwargs, variant=s.variant, free_only=s.free_only,
                                fext_input=s.fext_input, frames=s.frames, doc=doc))
    return out


def _kinematics_specs(robot: Robot, frames: tuple[str, ...], optional: bool) -> list[FunctionSpec]:
    """Kinematics of frames (soadyn.symbolic.algorithms.frames; issue 23).  ``frame_pose`` and ``body_poses``
    are built by default (forward kinematics: a few hundred operations); ``frame_twist`` and
    ``frame_acceleration`` (families over every frame, each a velocity/acceleration sweep along the path)
    only on request, like the derivatives."""
    nb, q = robot.n_bodies, (input_arg(robot, "q"),)
    out = [
        FunctionSpec("frame_pose", "frame_pose", q, (Arg("R_f", (3, 3)), Arg("p_f", (3,))), "frame_pose",
                     frames=frames, doc="pose of a body or named frame (frame family): rotation R (frame to "
                     "inertial axes) and origin p (inertial frame)"),
        FunctionSpec("body_poses", "body_poses", q, (Arg("R_b", (nb, 3, 3)), Arg("p_b", (nb, 3))),
                     "body_poses", doc="pose of every body: rotations (body to inertial axes) and origins "
                     "(inertial frame), body order"),
    ]
    if optional:
        qv = (*q, input_arg(robot, "v"))
        out += [
            FunctionSpec("frame_twist", "frame_twist", qv, (Arg("V_f", (6,)),), "frame_twist", frames=frames,
                         doc="twist [w; v] of a body or named frame (origin velocity), inertial axes (frame "
                         "family)"),
            FunctionSpec("frame_acceleration", "frame_acceleration", (*qv, input_arg(robot, "a")),
                         (Arg("V_f", (6,)), Arg("A_f", (6,))), "frame_acceleration", frames=frames,
                         doc="twist [w; v] of a body or named frame and its time derivative (classical "
                         "acceleration of the origin, no gravity), inertial axes (frame family)"),
        ]
    return out


# ---- run-time inertial parameters (soadyn.model.parameters) -------------------------------------------
#: public functions that read no inertia: they never take ``params``
KINEMATIC_APIS = frozenset({"jacobian", "closed_loop_constraints", "closed_loop_dependent_velocities",
                            "frame_acceleration_derivatives", "frame_pose", "body_poses", "frame_twist",
                            "frame_acceleration"})
#: regressors of a robot with parameterised bodies: (api, inputs, output, shape rows, doc)
REGRESSORS = (
    ("inverse_dynamics_regressor", ("q", "v", "a"), "Y", "nv",
     "torque regressor Y: tau = Y params.ravel() + inverse_dynamics(q, v, a, params=0) (the second term "
     "vanishes when every body is parameterised)"),
    ("momentum_regressor", ("q", "v"), "Yh", "6",
     "momentum regressor Y_h: h_O = Y_h params.ravel() + h_O(params=0), h_O = [angular momentum about the "
     "inertial origin; linear momentum], inertial axes"),
)


def with_parameter_inputs(robot: Robot, specs: list[FunctionSpec]) -> list[FunctionSpec]:
    """For a robot with parameterised bodies: ``params`` (n_param_bodies, 10) appended to the inputs of
    every function that reads an inertia, and the two regressors added; other robots: ``specs`` as is."""
    if not robot.param_bodies:
        return specs
    params = input_arg(robot, "params")
    out = [s if s.api in KINEMATIC_APIS else replace(s, inputs=(*s.inputs, params)) for s in specs]
    ncol = 10 * len(robot.param_bodies)
    for api, ins, name, rows, doc in REGRESSORS:
        out.append(FunctionSpec(api, api, tuple(input_arg(robot, n) for n in ins),
                                (Arg(name, (_dim(robot, rows), ncol)),), api, doc=doc))
    return out
