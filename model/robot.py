"""Robot model: rigid bodies in a tree on a free-floating (6-DOF) or fixed base.

This is the *model* (constant description) of a robot, kept apart from any
per-state workspace, as in Pinocchio's Model/Data split.  The numbering follows
the tree in depth-first pre-order from the base: body 0 is the base, every
body's parent has a smaller index.  Jain & Rodriguez (seed 000, section 2)
number links tip-to-base (link n is the base); their "k+1" (inboard
neighbour) is our ``parent[k]`` and their "k-1" (outboard neighbour) is our set
of ``children[k]``.  Tip-to-base recursions therefore run ``for k in
reversed(range(n))``, base-to-tip ones ``for k in range(n)``.

Frames: every body ``k`` has a body frame O_k.  For a body attached by a joint,
O_k is the joint frame (URDF convention): the joint's placement ``xyz, rpy``
gives the joint frame relative to the parent body frame at zero joint
position, the joint axis is expressed in that frame, and the child body frame
coincides with the moved joint frame.

Inertia convention: ``inertia`` is the 3x3 inertia *matrix* about the body
centre of mass in body-frame coordinates, with products of inertia entered as
matrix entries, ``I_xy = -integral(x y dm)`` (the URDF/Pinocchio convention).

Fixed joints are merged at model-build time: a body attached by a ``fixed``
joint is folded into its parent (composite inertia) and survives as a named
frame, so every algorithm sees only bodies that move relative to their parent
(or the base).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from soadyn.model.exact import congruence, dot, matmul
from soadyn.model.rotations import joint_motion, rpy_to_matrix, skew

JOINT_TYPES = ("revolute", "prismatic", "fixed")
_EYE3 = np.eye(3)
BASE_TYPES = ("free", "fixed")


def snap(x: np.ndarray, tol: float = 1e-14) -> np.ndarray:
    """Round entries within ``tol`` of 0 or +-1 to exactly 0 or +-1.

    rpy angles of multiples of pi/2 give cosines like 6.1e-17; snapping them
    keeps structural zeros structural in the derived code.  The change is below
    1e-14 absolute, far under every verification tolerance.
    """
    x = np.array(x, dtype=float, copy=True)
    for target in (0.0, 1.0, -1.0):
        x[np.abs(x - target) < tol] = target
    return x


#: a rotation within this (entry by entry) of a signed permutation is taken as that permutation
#: (:func:`snap_rotation`)
PERMUTATION_SNAP = 1e-10


def snap_rotation(R: np.ndarray) -> np.ndarray:
    """A rotation matrix with its near-zero and near-unit entries made exact (see :func:`snap`).

    Robot files write pi and pi/2 to 10-12 digits (``rpy="-1.57079632679 0 3.14159265359"``), which
    leaves sines and cosines of 4.9e-12 and 2.1e-13: above :func:`snap`'s 1e-14, so every such joint's
    rotation stayed a dense 3x3 of constants (Kinova Jaco2: a third more operations in M and M^-1).  A
    rotation within :data:`PERMUTATION_SNAP` of a signed permutation (every angle a multiple of pi/2 to
    about ten digits) is therefore taken as that permutation, which is exactly orthonormal.  Any other
    rotation keeps :func:`snap`'s 1e-14, so that a partly snapped matrix never loses orthonormality.
    """
    P = snap(R, PERMUTATION_SNAP)
    if np.all(np.isin(P, (0.0, 1.0, -1.0))) and np.array_equal(P @ P.T, _EYE3):
        return P
    return snap(R)


@dataclass(frozen=True)
class Placement:
    """Rigid placement of a frame in a parent frame: ``R`` = parent_R_child, ``p`` = origin in parent."""

    R: np.ndarray
    p: np.ndarray

    @staticmethod
    def identity() -> Placement:
        return Placement(np.eye(3), np.zeros(3))

    @staticmethod
    def from_xyz_rpy(xyz: Sequence[float], rpy: Sequence[float]) -> Placement:
        return Placement(snap_rotation(rpy_to_matrix(rpy)), snap(np.asarray(xyz, dtype=float)))

    def is_identity(self) -> bool:
        return bool(np.array_equal(self.R, _EYE3) and not np.any(self.p))

    def __mul__(self, other: Placement) -> Placement:
        if self.is_identity():
            return other
        if other.is_identity():
            return self
        # exact.matmul: correctly rounded, so model constants do not depend on the machine's BLAS
        return Placement(snap(matmul(self.R, other.R)), snap(matmul(self.R, other.p) + self.p))

    def inverse(self) -> Placement:
        return Placement(self.R.T.copy(), -matmul(self.R.T, self.p))

    def homogeneous(self) -> np.ndarray:
        T = np.eye(4)
        T[:3, :3] = self.R
        T[:3, 3] = self.p
        return T


@dataclass(frozen=True)
class Inertia:
    """Rigid-body inertia: mass, centre of mass (body frame), 3x3 inertia about the CoM (body axes)."""

    mass: float
    com: np.ndarray
    inertia: np.ndarray

    def spatial(self) -> np.ndarray:
        """Spatial inertia about the body-frame origin, angular first (seed 000, section 2):
        ``M = [[J, m p~], [-m p~, m I]]`` with ``J = I_c - m p~ p~``."""
        m, c = self.mass, self.com
        cx = skew(c)
        out = np.zeros((6, 6))
        out[:3, :3] = self.inertia - m * matmul(cx, cx)
        out[:3, 3:] = m * cx
        out[3:, :3] = -m * cx
        out[3:, 3:] = m * np.eye(3)
        return out

    def transformed(self, X: Placement) -> Inertia:
        """The same body's inertia expressed in a frame in which this body frame sits at ``X``."""
        return Inertia(self.mass, matmul(X.R, self.com) + X.p, congruence(X.R, self.inertia))

    def __add__(self, other: Inertia) -> Inertia:
        m = self.mass + other.mass
        # two massless parts (a rotational inertia each) have no centre of mass: put it at the origin
        c = (self.mass * self.com + other.mass * other.com) / m if m else np.zeros(3)
        Ic = np.zeros((3, 3))
        for part in (self, other):
            d = part.com - c
            Ic += part.inertia + part.mass * (dot(d, d) * np.eye(3) - np.outer(d, d))
        return Inertia(m, c, Ic)


@dataclass(frozen=True)
class Mimic:
    """A coupling ``q = multiplier * q_joint + offset`` of a joint to the independent joint ``joint``
    (URDF ``<mimic>``, YAML ``mimic:``): the coupled joint has no coordinate or velocity of its own."""

    joint: str
    multiplier: float = 1.0
    offset: float = 0.0


class MimicError(ValueError):
    """An unresolvable coupling: ``joint`` is the coupled joint, ``problem`` says why and the fix."""

    def __init__(self, joint: str, problem: str) -> None:
        self.joint, self.problem = joint, problem
        super().__init__(f"{joint}: {problem}")


def resolve_mimics(mimics: dict[str, Mimic], movable: set[str]) -> dict[str, Mimic]:
    """Resolve chains of couplings to independent joints: ``q_c = a1 q_m + b1`` with ``q_m = a2 q_s + b2``
    gives ``q_c = a1 a2 q_s + (a1 b2 + b1)``.  ``mimics``: joint -> its coupling as written; ``movable``: the
    revolute and prismatic joints.  Raises :class:`MimicError` (a ``ValueError``) for a coupling to a
    joint that does not exist or is fixed, and for a cycle."""
    out: dict[str, Mimic] = {}
    for name in mimics:
        a, b, path, cur = 1.0, 0.0, [name], name
        while cur in mimics:
            mm = mimics[cur]
            if mm.joint not in movable:
                raise MimicError(cur, f"mimics joint {mm.joint!r}, which is not a revolute or prismatic "
                                 "joint of this robot; name an existing moving joint")
            a, b = a * mm.multiplier, a * mm.offset + b
            cur = mm.joint
            if cur in path:
                cyc = " -> ".join([*path[path.index(cur):], cur])
                raise MimicError(name, f"mimic couplings form a cycle ({cyc}); make one joint of the cycle "
                                 "independent (remove its mimic)")
            path.append(cur)
        out[name] = Mimic(cur, a, b)
    return out


#: default velocity scale v_s of the smoothed Coulomb friction ``f v / sqrt(v^2 + v_s^2)`` (rad/s or m/s)
FRICTION_VELOCITY = 1e-2


@dataclass(frozen=True)
class Joint:
    """Joint connecting a body to its parent: type, unit axis (joint frame), placement in the parent.

    Drive train (docs/conventions.md, "Drive train"): ``armature`` (reflected rotor inertia I_m n^2,
    kg m^2 or kg) adds ``armature * qdd`` to the joint's generalised force, i.e. to the diagonal of M;
    ``damping`` (viscous, N m s/rad or N s/m) adds ``damping * qd``; ``friction`` (Coulomb, N m or N) adds
    the smoothed ``friction * qd / sqrt(qd^2 + friction_velocity^2)``.  All default to 0 (ideal joint).
    """

    name: str
    type: str
    axis: np.ndarray
    placement: Placement
    armature: float = 0.0
    damping: float = 0.0
    friction: float = 0.0
    friction_velocity: float = FRICTION_VELOCITY
    #: coupling to an independent joint (None: the joint has its own coordinate)
    mimic: Mimic | None = None

    @property
    def has_drive(self) -> bool:
        """Whether the joint has any drive-train term (armature, damping or friction)."""
        return bool(self.armature or self.damping or self.friction)

    @property
    def nv(self) -> int:
        return 0 if self.type == "fixed" else 1

    def motion(self, q: float) -> Placement:
        """The joint motion ``M(axis, q)`` (joint frame) at coordinate ``q``: see
        :func:`soadyn.model.rotations.joint_motion`."""
        return Placement(*joint_motion(self.type, self.axis, q))


@dataclass(frozen=True)
class BodySpec:
    """A body as written in a robot file, before fixed joints are merged."""

    name: str
    parent: str | None
    joint: Joint | None
    inertia: Inertia


@dataclass(frozen=True)
class Frame:
    """A named frame rigidly attached to body ``body`` (index into the merged body list)."""

    name: str
    body: int
    placement: Placement


def state_vector(x: Any, n: int, name: str, who: str) -> np.ndarray:
    """``x`` as a float vector of shape ``(n,)``; the one check of state-like inputs (q, v, a, tau, ...).

    Raises ``ValueError`` naming ``who`` (the caller) and ``name`` for a wrong shape or a NaN / inf entry.
    """
    arr = np.asarray(x, dtype=float)
    if arr.shape != (n,):
        raise ValueError(f"{who}: {name} must have shape ({n},), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{who}: {name} contains NaN or inf")
    return arr


def require_free(robot: Robot, what: str, note: str = "") -> None:
    """The one free-base guard: raise ``ValueError`` unless ``robot`` has a free-floating base.

    ``what`` names the quantity or operation; ``note`` (optional) adds why, or what to use instead.
    ``robot`` may also be a compiled module (it has the same ``base`` and ``name`` attributes).
    """
    if robot.base != "free":
        raise ValueError(f"{what} needs a free-floating base (a free base); robot {robot.name!r} has a fixed "
                         f"base{note}. Load the robot with base='free'")


LOOP_TYPES = ("weld", "revolute", "prismatic", "spherical")


@dataclass(frozen=True)
class LoopClosure:
    """A cut joint closing a kinematic loop between two frames (seed 004 section II-B, III-D).

    ``frame_a``/``frame_b``: body or named-frame names; at closure the two frames coincide and the cut
    joint lets frame b move relative to frame a only as its ``type`` allows: ``weld`` (no motion,
    6 constraints), ``revolute`` (rotation about ``axis``, 5), ``prismatic`` (translation along
    ``axis``, 5), ``spherical`` (any rotation about the common origin, 3).  ``axis`` is a unit vector in
    frame a.  ``frame_b = "world"`` attaches frame a to the inertial frame at ``world_placement``
    (identity if None).  See :mod:`soadyn.runtime.closed_loop` and docs/structure-changes.md.
    """

    name: str
    frame_a: str
    frame_b: str
    type: str = "weld"
    axis: np.ndarray | None = None
    world_placement: Placement | None = None


@dataclass(frozen=True, eq=False)
class Robot:
    """A robot ready for the algorithms: bodies with moving joints in depth-first order.  Immutable: the
    sequences are tuples, ``gravity`` is a read-only array, and :meth:`replace` makes a changed copy.

    Attributes (index ``k`` runs over bodies, body 0 is the base):
      name, base ("free" | "fixed"), gravity (3, inertial frame),
      body_names[k], parent[k] (-1 for the base), joints[k] (None for the base),
      inertias[k] (merged, in body frame k), frames (named frames, fixed-joint
      bodies among them), children[k], source_hash (of the robot file bytes), loops (cut joints
      closing kinematic loops, :class:`LoopClosure`; the tree algorithms ignore them).
    """

    name: str
    base: str
    gravity: np.ndarray
    body_names: tuple[str, ...]
    parent: tuple[int, ...]
    joints: tuple[Joint | None, ...]
    inertias: tuple[Inertia, ...]
    frames: tuple[Frame, ...] = ()
    source: str = ""
    source_hash: str = ""
    loops: tuple[LoopClosure, ...] = ()
    #: bodies whose inertial parameters are run-time inputs (body order; see soadyn.model.parameters)
    param_bodies: tuple[str, ...] = ()
    children: tuple[tuple[int, ...], ...] = field(init=False)
    #: body k -> its joint coordinate's index among the joints (-1: base or a coupled joint); None when no
    #: joint is coupled (then body k has coordinate k - 1)
    _coord: tuple[int, ...] | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        if self.base not in BASE_TYPES:
            raise ValueError(f"base must be one of {BASE_TYPES}, got {self.base!r}")
        gravity = np.array(self.gravity, dtype=float)
        if gravity.shape != (3,):
            raise ValueError(f"gravity must be a 3-vector, got shape {gravity.shape}")
        gravity.setflags(write=False)
        set_ = object.__setattr__
        set_(self, "gravity", gravity)
        for name in ("body_names", "parent", "joints", "inertias", "frames", "loops", "param_bodies"):
            set_(self, name, tuple(getattr(self, name)))
        kids: list[list[int]] = [[] for _ in self.body_names]
        for k, p in enumerate(self.parent):
            if p >= 0:
                kids[p].append(k)
        set_(self, "children", tuple(tuple(c) for c in kids))
        if any(j is not None and j.mimic is not None for j in self.joints):
            coord, r = [-1], 0
            for j in self.joints[1:]:
                coord.append(-1 if j.mimic is not None else r)
                r += j.mimic is None
            set_(self, "_coord", tuple(coord))

    # ---- sizes and names --------------------------------------------------------------------
    @property
    def n_bodies(self) -> int:
        return len(self.body_names)

    @property
    def n_joints(self) -> int:
        """Number of joint coordinates (joints coupled by a mimic have none)."""
        if self._coord is not None:
            return sum(c >= 0 for c in self._coord)
        return self.n_bodies - 1

    @property
    def joint_names(self) -> list[str]:
        """Names of the joint coordinates in the order of q (after the base) and v."""
        return [j.name for j in self.joints[1:] if j.mimic is None]

    @property
    def is_coupled(self) -> bool:
        """Whether some joint is coupled to another (mimic): then q and v are the reduced coordinates."""
        return self._coord is not None

    def uncoupled(self) -> Robot:
        """The same bodies and joints with every coupling removed: the full coordinates, one per joint."""
        if self._coord is None:
            return self
        return self.replace(joints=[None if j is None else dataclasses.replace(j, mimic=None)
                                    for j in self.joints])

    def coordinate_map(self) -> list[tuple[int, float, float]]:
        """For every joint (body k = 1 .. n_bodies - 1): ``(r, a, b)`` with the joint position
        ``q_k = a q_joint[r] + b`` in the reduced joint coordinates (``(k - 1, 1, 0)`` for an uncoupled
        robot)."""
        out = []
        for k in range(1, self.n_bodies):
            j = self.joints[k]
            if j.mimic is None:
                out.append((k - 1 if self._coord is None else self._coord[k], 1.0, 0.0))
            else:
                src = next(i for i in range(1, self.n_bodies) if self.joints[i].name == j.mimic.joint)
                out.append((self._coord[src], j.mimic.multiplier, j.mimic.offset))
        return out

    def expansion(self) -> tuple[np.ndarray, np.ndarray]:
        """``(G, b)``: the full velocities are ``G v`` (``G``: nv_full x nv, identity on the free base) and
        the full joint positions ``G_joints q_joints + b`` (``b``: one offset per joint)."""
        nb = self.base_nv
        G = np.zeros((nb + self.n_bodies - 1, self.nv))
        G[:nb, :nb] = np.eye(nb)
        b = np.zeros(self.n_bodies - 1)
        for k, (r, a, off) in enumerate(self.coordinate_map()):
            G[nb + k, nb + r] = a
            b[k] = off
        return G, b

    @property
    def frame_names(self) -> list[str]:
        return [f.name for f in self.frames]

    @property
    def is_free(self) -> bool:
        return self.base == "free"

    @property
    def base_nq(self) -> int:
        return 7 if self.is_free else 0

    @property
    def base_nv(self) -> int:
        return 6 if self.is_free else 0

    @property
    def nq(self) -> int:
        return self.base_nq + self.n_joints

    @property
    def nv(self) -> int:
        return self.base_nv + self.n_joints

    def body_index(self, name: str) -> int:
        try:
            return self.body_names.index(name)
        except ValueError:
            raise KeyError(f"robot {self.name!r} has no body {name!r}; "
                           f"bodies: {list(self.body_names)}") from None

    def subtree(self, k: int) -> list[int]:
        """Body k and every body outboard of it, in body order."""
        out, stack = [], [k]
        while stack:
            j = stack.pop()
            out.append(j)
            stack.extend(self.children[j])
        return sorted(out)

    def v_index(self, k: int) -> slice:
        """Slice of the generalised velocity belonging to body k's hinge (seed 000: beta(k))."""
        if k == 0:
            return slice(0, self.base_nv)
        i = self.base_nv + (k - 1 if self._coord is None else self._reduced(k))
        return slice(i, i + 1)

    def q_index(self, k: int) -> int:
        """Index of body k's joint coordinate in q (k >= 1)."""
        return self.base_nq + (k - 1 if self._coord is None else self._reduced(k))

    def _reduced(self, k: int) -> int:
        r = self._coord[k]
        if r < 0:
            raise ValueError(f"robot {self.name!r}: joint {self.joints[k].name!r} is coupled (mimics "
                             f"{self.joints[k].mimic.joint!r}) and has no coordinate of its own")
        return r

    def frame_of(self, name: str) -> tuple[int, Placement]:
        """(body index, placement in that body) of a body or a named frame."""
        if name in self.body_names:
            return self.body_names.index(name), Placement.identity()
        for f in self.frames:
            if f.name == name:
                return f.body, f.placement
        raise KeyError(
            f"robot {self.name!r} has no body or frame {name!r}; "
            f"bodies: {list(self.body_names)}, frames: {self.frame_names}"
        )

    @property
    def total_mass(self) -> float:
        return float(sum(i.mass for i in self.inertias))

    # ---- configurations -----------------------------------------------------------------------
    def neutral(self) -> np.ndarray:
        q = np.zeros(self.nq)
        if self.is_free:
            q[6] = 1.0  # quaternion [x, y, z, w] = identity
        return q

    def random_configuration(self, rng: np.random.Generator | None = None) -> np.ndarray:
        """A random configuration: unit quaternion, base position in [-1, 1]^3, joints in [-pi, pi]
        (prismatic in [-0.5, 0.5])."""
        rng = np.random.default_rng() if rng is None else rng
        q = np.empty(self.nq)
        if self.is_free:
            q[:3] = rng.uniform(-1, 1, 3)
            quat = rng.normal(size=4)
            q[3:7] = quat / np.linalg.norm(quat)
        for k in range(1, self.n_bodies):
            if self.joints[k].mimic is not None:
                continue
            lim = np.pi if self.joints[k].type == "revolute" else 0.5
            q[self.q_index(k)] = rng.uniform(-lim, lim)
        return q

    @property
    def has_drive(self) -> bool:
        """Whether any joint has armature, damping or friction (docs/conventions.md, "Drive train")."""
        return any(j is not None and j.has_drive for j in self.joints)

    def rigid(self) -> Robot:
        """The same robot with ideal joints: armature, damping and friction of every joint set to 0."""
        if not self.has_drive:
            return self
        return self.replace(joints=[None if j is None else dataclasses.replace(
            j, armature=0.0, damping=0.0, friction=0.0, friction_velocity=FRICTION_VELOCITY)
            for j in self.joints])

    def with_base(self, base: str) -> Robot:
        """The same robot on a ``free`` or ``fixed`` base (``replace(base=base)``)."""
        return self.replace(base=base)

    def replace(self, **fields: Any) -> Robot:
        """A new robot with the given fields changed (``name``, ``base``, ``gravity``, ``loops``, ...); the
        robot itself is immutable.  ``children`` is derived and cannot be given."""
        return dataclasses.replace(self, **fields)

    def fingerprint(self) -> str:
        """Hash of everything that determines the dynamics (a cache key, with the generator version)."""
        h = hashlib.sha256()
        h.update(json.dumps([self.name, self.base, self.gravity.tolist(), list(self.body_names),
                             list(self.parent), self.frame_names], sort_keys=True).encode())
        for j in self.joints[1:]:
            h.update(j.name.encode() + j.type.encode())
            for a in (j.axis, j.placement.R, j.placement.p):
                h.update(np.ascontiguousarray(a, dtype=float).tobytes())
        if self.has_drive:  # only robots with drive-train terms: other fingerprints are unchanged
            h.update(np.array([[j.armature, j.damping, j.friction, j.friction_velocity]
                               for j in self.joints[1:]], dtype=float).tobytes())
        for i in self.inertias:
            h.update(np.array([i.mass, *i.com, *i.inertia.ravel()], dtype=float).tobytes())
        for f in self.frames:
            h.update(f.name.encode() + str(f.body).encode())
            h.update(np.ascontiguousarray(np.concatenate([f.placement.R.ravel(), f.placement.p])).tobytes())
        for lc in self.loops:  # only robots with loops: fingerprints of trees are unchanged
            h.update(f"loop:{lc.name}:{lc.frame_a}:{lc.frame_b}:{lc.type}".encode())
            if lc.axis is not None:
                h.update(np.ascontiguousarray(lc.axis, dtype=float).tobytes())
            if lc.world_placement is not None:
                h.update(np.ascontiguousarray(lc.world_placement.homogeneous()).tobytes())
        if self._coord is not None:  # only coupled robots: other fingerprints are unchanged
            h.update(json.dumps([None if j.mimic is None else [j.mimic.joint, j.mimic.multiplier,
                                                                 j.mimic.offset]
                                 for j in self.joints[1:]]).encode())
        if self.param_bodies:  # only parameterised robots: other fingerprints are unchanged
            h.update(("params:" + ",".join(self.param_bodies)).encode())
        return h.hexdigest()

    # ---- construction -----------------------------------------------------------------------
    @staticmethod
    def from_specs(name: str, base: str, gravity: Sequence[float], bodies: Sequence[BodySpec],
                   frames: Sequence[tuple[str, str, Placement]] = (), source: str = "",
                   source_hash: str = "") -> Robot:
        """Build a robot from file-level body specs (any order, one root, parents by name).

        Fixed joints are merged into their parents; bodies are ordered depth-first from the root,
        children in the order given.  ``frames`` are (name, body name, placement in that body).
        Structural validation with file/field context is the job of the file readers; this raises
        ``ValueError`` for anything inconsistent that reaches it.
        """
        by_name = {b.name: b for b in bodies}
        if len(by_name) != len(bodies):
            raise ValueError("duplicate body names")
        roots = [b for b in bodies if b.parent is None]
        if len(roots) != 1:
            raise ValueError(f"exactly one body must have no parent (the base), found {len(roots)}")
        kids: dict[str, list[BodySpec]] = {b.name: [] for b in bodies}
        for b in bodies:
            if b.parent is not None:
                if b.parent not in kids:
                    raise ValueError(f"body {b.name!r}: unknown parent {b.parent!r}")
                kids[b.parent].append(b)

        body_names: list[str] = []
        parent: list[int] = []
        joints: list[Joint | None] = []
        inertias: list[Inertia] = []
        out_frames: list[Frame] = []
        seen: set[str] = set()

        # depth-first; a fixed-joint child is merged into the nearest moving ancestor
        stack: list[tuple[BodySpec, int, Placement]] = [(roots[0], -1, Placement.identity())]
        while stack:
            spec, host, X = stack.pop()  # host: merged body index; X: spec frame in host frame
            seen.add(spec.name)
            if host >= 0 and spec.joint is not None and spec.joint.type == "fixed":
                k = host
                if spec.inertia.mass > 0 or np.any(spec.inertia.inertia):   # mass 0: a rotational inertia
                    inertias[k] = inertias[k] + spec.inertia.transformed(X)
                out_frames.append(Frame(spec.name, k, X))
                Xc = X
            else:
                k = len(body_names)
                body_names.append(spec.name)
                parent.append(host)
                if host >= 0:
                    j = spec.joint
                    joints.append(dataclasses.replace(j, placement=X * j.placement))
                else:
                    joints.append(None)
                inertias.append(spec.inertia)
                Xc = Placement.identity()
            for child in reversed(kids[spec.name]):
                if child.joint is not None and child.joint.type == "fixed":
                    stack.append((child, k, Xc * child.joint.placement))
                else:
                    stack.append((child, k, Xc))
        if len(seen) != len(bodies):
            missing = sorted(set(by_name) - seen)
            raise ValueError(f"bodies not connected to the base (cycle?): {missing}")
        # depth-first pre-order with a stack visits children in reverse push order -> given order
        for fname, bname, Xf in frames:
            if bname in body_names:
                out_frames.append(Frame(fname, body_names.index(bname), Xf))
            else:
                host = next((f for f in out_frames if f.name == bname), None)
                if host is None:
                    raise ValueError(f"frame {fname!r}: unknown body {bname!r}")
                out_frames.append(Frame(fname, host.body, host.placement * Xf))
        return Robot(name, base, np.asarray(gravity, dtype=float), body_names, parent, joints, inertias,
                     out_frames, source, source_hash)
