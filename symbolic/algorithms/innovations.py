"""Innovations factorisation of seed 000, Lemma 2.1:

    M    = [I + H phi K] D [I + H phi K]*          (2.10a)
    [I + H phi K]^-1 = [I - H psi K]                (2.10b)
    M^-1 = [I - H psi K]* D^-1 [I - H psi K]        (2.10c)

``mass_matrix_inverse`` applies (2.10c) to the unit vectors: ``[I - H psi K] T`` is the residual-force
recursion (2.13a) with a = b = 0, ``D^-1`` the pivots, and ``[I - H psi K]*`` the acceleration sweep
(2.13b) without Coriolis or gravity terms.

In our base-first numbering the factor ``L = I + H phi K`` has ``L(i, j) = H(i) phi(i, j) G(j)`` for i a
strict ancestor of j (K(parent(j), j) = phi(parent(j), j) G(j)), so it is unit *upper* triangular here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from soadyn.symbolic.algorithms.articulated_body import ArticulatedBody, articulated_body, zero_hinge_row
from soadyn.symbolic.scalar import ScalarContext


def innovation_columns(ab: ArticulatedBody) -> dict[int, dict[int, Any]]:
    """Columns of ``Y = I - H psi K`` (eq. 2.10b): ``Y[j][i]`` for hinge j and each hinge i inboard of j.

    Column j is the residual recursion (2.13a) driven by a unit generalised force at hinge j with
    a = b = 0: ``g = phi(p, j) G(j)`` enters the parent, and at each inboard hinge i
    ``Y(i, j) = -H(i) g`` and ``g <- phi(p(i), i) taubar(i) g = phi(p(i), i) [g + G(i) Y(i, j)]``, the
    entry of ``taubar(i) g`` that ``H(i) taubar(i) = 0`` makes zero set to an exact 0
    (:func:`~soadyn.symbolic.algorithms.articulated_body.zero_hinge_row`).
    Only the hinges on the path to the base are non-zero (the tree's structural zeros).  For the free
    base the entry is the 6-vector ``-g``.
    """
    kin = ab.kin
    robot, ctx = kin.robot, kin.ctx
    cols: dict[int, dict[int, Any]] = {}
    for j in range(1, robot.n_bodies):
        col: dict[int, Any] = {}
        g = ab.G[j]
        i = j
        while robot.parent[i] > 0 or (robot.parent[i] == 0 and robot.is_free):
            g = kin.X[i].force_to_parent(g)
            i = robot.parent[i]
            if i == 0:
                col[0] = ctx.stage(f"Y{j}_0", -g)
                break
            y = ctx.stage(f"Y{j}_{i}", -(kin.hinge(i) @ g))
            col[i] = y
            g = g + ab.G[i] * y                 # taubar(i) g
            h = zero_hinge_row(robot, kin, i)
            if h is not None:                   # H(i) taubar(i) = 0: this entry is rounding noise
                g[h] = 0
            g = ctx.stage(f"Yg{j}_{i}", g)
        cols[j] = col
    return cols


#: a hinge's terms of M^-1 join the free base's product loop when the pairs of hinges on its subtree are at
#: least this share of all pairs (:func:`folded_hinges`)
FOLD_SHARE = 0.25


def folded_hinges(cols: dict[int, dict[int, Any]], n: int) -> list[int]:
    """The hinges i whose terms ``Y(i, a) D^-1(i) Y(i, b)`` of M^-1 (eq. 2.10c) are computed as further
    columns of the free base's symmetric product (:func:`mass_matrix_inverse_from`) instead of one
    multiply-add per pair of hinges on i's subtree: those whose subtree's pairs are at least
    :data:`FOLD_SHARE` of all pairs (a column of the product costs every pair a multiply-add, in vectors
    of 4 or 8 entries).  TALOS: the two torso hinges over the 18 torso, arm and head hinges (171 and 153
    of 528 pairs)."""
    pairs = (n - 1) * n // 2
    out = []
    for i in range(1, n):
        size = 1 + sum(1 for j in range(1, n) if i in cols[j])
        if size * (size + 1) // 2 >= FOLD_SHARE * pairs:
            out.append(i)
    return out


def mass_matrix_inverse(robot: Any, ctx: ScalarContext, q: np.ndarray) -> np.ndarray:
    """M^-1 = Y* D^-1 Y with Y = [I - H psi K] (eq. 2.10c), Y from :func:`innovation_columns`.

    Entry (a, b) sums ``Y(i, a) D^-1(i) Y(i, b)`` over the hinges i inboard of (or at) both a and b; for the
    free base D(n) = P(n) is 6x6 and its block enters through one LDL^T solve per column.
    """
    return mass_matrix_inverse_from(articulated_body(robot, ctx, q))


def mass_matrix_inverse_from(ab: ArticulatedBody, loop: bool = True, rhs: np.ndarray | None = None
                             ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """:func:`mass_matrix_inverse` from an articulated-body run that is already staged.

    ``loop``: the free base's term of every pair of hinges as one dense product (``ctx.matmul``, a loop in
    the generated C when M^-1 is an output and nothing else reads its entries but later product loops
    that read it in place); False: one 6-term sum per pair, shared by (a, b) and (b, a), for callers
    that go on computing with M^-1's entries.

    ``rhs`` (nv,): also return ``M^-1 rhs``, from the factors rather than from M^-1's entries, so that the
    base's terms can stay a loop.  The base's part of (2.10c),
    ``u = D(n)^-1 (rhs_base + sum_b Y(n, b) rhs_b)`` (the base entry of ``D^-1 Y rhs``: one LDL solve), is
    the base rows, and hinge a's row is
    ``Y(n, a) . u + sum_b (hinges' terms of (a, b)) rhs_b`` (no term for hinges on other branches; this
    equals ``W0(a) . rhs_base + Y(n, a) . sum_b W0(b) rhs_b`` with ``W0(b) = D(n)^-1 Y(n, b)``, at 6
    instead of 12 multiply-adds per hinge and one solve instead of a 6 x 6 product).  Used always when the
    base's terms are a loop (``loop``, and the context makes a loop of that product: M^-1's entries would
    need the loop's results), else when that takes fewer multiply-adds than M^-1's rows (B1 + Z1 on a free
    base: 324 instead of 576; not a chain: the xArm7's 169 against 169, and its base terms stay
    expressions)."""
    robot, ctx = ab.kin.robot, ab.kin.ctx
    cols = innovation_columns(ab)
    nv, n = robot.nv, robot.n_bodies

    def y(i: int, j: int) -> Any:
        """Y(i, j) for hinge bodies i, j (1 on the diagonal, 0 off the path)."""
        if i == j:
            return 1
        return cols[j].get(i)

    Minv = ctx.zeros((nv, nv))
    # free base: W0(j) = D(n)^-1 Y(n, j), and the base block of M^-1 is D(n)^-1 itself
    W0: dict[int, Any] = {}
    hinges = [robot.v_index(j).start for j in range(1, n)]
    # M^-1 rhs with the base's terms a loop (forward-dynamics derivatives): the base rows and columns
    # W0(j)* = Y(n, j)* D(n)^-1 are loops too, from D(n)^-1 (an output anyway) and the rows Y(n, j)*,
    # instead of one LDL solve per hinge (B1 + Z1: 828 operations of statements); the base terms' loop
    # reads them in place.  Both products sum the same terms in the same order: the block and its
    # mirror are the same bits.  Not for the M^-1 function (``rhs`` None), whose code stays as it was.
    w0_loops = (robot.is_free and n > 1 and loop and rhs is not None and nv == 5 + n
                and all(0 in cols[j] for j in range(1, n))
                and ctx.product_loops((n - 1) ** 2) and ctx.product_loops(6 * (n - 1)))
    if robot.is_free:
        fac = ab.Dinv[0]
        Minv[0:6, 0:6] = Dninv = fac.inverse("Dninv")
        if w0_loops:
            Yn = np.array([cols[j][0] for j in range(1, n)])
            Minv[np.ix_(hinges, range(6))] = W0T = ctx.matmul("W0T", Yn, Dninv)
            Minv[np.ix_(range(6), hinges)] = ctx.matmul("W0", Dninv, Yn.T)
        for j in range(1, n):
            if 0 in cols[j] and not w0_loops:
                W0[j] = fac.solve(cols[j][0], f"W0_{j}")
                Minv[0:6, robot.v_index(j)] = W0[j].reshape(6, 1)
                Minv[robot.v_index(j), 0:6] = W0[j].reshape(1, 6)
    # W(i, b) = D^-1(i) Y(i, b), once per (hinge, column) pair
    W: dict[tuple[int, int], Any] = {}
    for b in range(1, n):
        W[b, b] = ab.Dinv[b]
        for i, yib in cols[b].items():
            if i > 0:
                W[i, b] = ctx.stage(f"W{i}_{b}", yib * ab.Dinv[i])
    # free base: the base's term Y(n, a)* D(n)^-1 Y(n, b) of eq. 2.10c enters every pair of hinges (all of
    # them are outboard of the base), the dense product of the (nv - 6) x 6 rows Y(n, a)* and the 6 x (nv - 6)
    # columns W0(b): one loop in the generated C (ctx.matmul) instead of a 6-term sum per entry
    base = None
    fold = folded_hinges(cols, n) if (robot.is_free and n > 1 and loop and rhs is None
                                      and ctx.product_loops((n - 1) ** 2)) else []
    if w0_loops:                  # (W0(a)* . Y(n, b)), W0* read in place from M^-1's base columns
        base = ctx.matmul("MinvB", W0T, Yn.T, symmetric=True, left_of=(Minv, hinges, list(range(6))))
    elif robot.is_free and n > 1 and loop and (rhs is None or ctx.product_loops((n - 1) ** 2)):
        # the folded hinges' terms Y(i, a) D^-1(i) Y(i, b) as further columns of the same product
        A = np.array([[*cols[a][0], *(y(i, a) or 0 for i in fold)] for a in range(1, n)], dtype=object)
        B = np.array([[*W0[b], *(W.get((i, b), 0) for i in fold)] for b in range(1, n)], dtype=object).T
        base = ctx.matmul("MinvB", A, B, symmetric=True)
    # the hinges' terms: Y(i, a) D^-1(i) Y(i, b) over the hinges i inboard of (or at) both a and b, which are
    # none for bodies on different branches; computed once per pair (M^-1 is symmetric)
    hinge: dict[tuple[int, int], Any] = {}      # (a, b), a <= b: the hinges' terms, where there are any
    for b in range(1, n):
        for a in range(1, b + 1):
            terms = [y(i, a) * W[i, b] for i in range(1, n) if y(i, a) is not None and (i, b) in W
                     and i not in fold]
            if terms:
                hinge[a, b] = sum(terms[1:], terms[0])
    pairs = sum(1 if a == b else 2 for a, b in hinge)
    factored = rhs is not None and robot.is_free and n > 1 and (
        base is not None or 12 * (n - 1) + 36 + pairs < nv * nv)
    for b in range(1, n):
        for a in range(1, b + 1):
            terms = [hinge[a, b]] if (a, b) in hinge else []
            if robot.is_free and base is None:
                if terms and factored:           # the hinges' terms kept apart for M^-1 rhs
                    hinge[a, b] = terms[0] = ctx.stage(f"Minvh{a}_{b}", terms[0])
                terms.append(cols[a][0] @ W0[b])
            va = vb = ctx.stage(f"Minv{a}_{b}", sum(terms[1:], terms[0])) if terms else 0
            if (a, b) in hinge and (base is not None or not robot.is_free):
                hinge[a, b] = va
            if base is not None:
                va, vb = va + base[a - 1, b - 1], vb + base[b - 1, a - 1]
            elif not terms:
                continue
            Minv[robot.v_index(a), robot.v_index(b)] = va
            Minv[robot.v_index(b), robot.v_index(a)] = vb
    if rhs is None:
        return Minv
    if not factored:                 # M^-1's rows: no loop of base terms to keep, and as cheap
        return Minv, Minv @ rhs
    at = [robot.v_index(k).start for k in range(n)]
    x = ctx.zeros(nv)
    t = ctx.stage("Minvt", sum((cols[b][0] * rhs[at[b]] for b in range(1, n)), rhs[0:6]))
    u = ab.Dinv[0].solve(t, "Minvu")
    x[0:6] = u
    z = hinge_solve(cols, ab, rhs, at, hinge) if nv == 5 + n else None
    for a in range(1, n):
        if z is not None:                # the hinges' part of Y* D^-1 Y rhs (eq. 2.10c) from the factors
            x[at[a]] = sum((y(i, a) * z[i] for i in range(1, n) if i in z and y(i, a) is not None),
                           cols[a][0] @ u)
        else:
            x[at[a]] = sum((hinge[min(a, b), max(a, b)] * rhs[at[b]] for b in range(1, n)
                            if (min(a, b), max(a, b)) in hinge), cols[a][0] @ u)
    return Minv, x


def hinge_solve(cols: dict[int, dict[int, Any]], ab: ArticulatedBody, rhs: np.ndarray, at: list[int],
                hinge: dict[tuple[int, int], Any]) -> dict[int, Any] | None:
    """The hinges' entries of ``D^-1 Y rhs`` (eq. 2.10c; one-column hinges): ``z_i = D^-1(i) (rhs_i +
    sum_b Y(i, b) rhs_b)`` over the hinges b outboard of i, so that hinge a's part of ``M^-1 rhs`` beyond
    the base's is ``sum_i Y(i, a) z_i`` over the hinges i inboard of (or at) a: one multiply-add per
    (hinge, inboard hinge) pair twice, instead of one per pair of hinges with a hinge inboard of both
    (``hinge``, M^-1's hinges' terms).  None where that is not fewer multiply-adds (a chain: the same
    count; TALOS: the torso's hinges are inboard of both arms and the head, 312 against 472)."""
    ctx = ab.kin.ctx
    n = len(cols) + 1
    inboard = {b: [i for i in cols[b] if i > 0] for b in range(1, n)}
    fac = 2 * sum(len(v) + 1 for v in inboard.values())
    pairs = sum(1 if a == b else 2 for a, b in hinge)
    if fac >= pairs:
        return None
    z: dict[int, Any] = {}
    for i in range(1, n):
        terms = [cols[b][i] * rhs[at[b]] for b in range(i + 1, n) if i in inboard[b]]
        z[i] = ctx.stage(f"Minvz{i}", ab.Dinv[i] * sum(terms, rhs[at[i]]))
    return z


def innovations_factors(robot: Any, ctx: ScalarContext, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(L, D) with L = I + H phi K (eq. 2.10a) and D = diag(D(k)), so that M = L D L*."""
    ab = articulated_body(robot, ctx, q)
    kin = ab.kin
    nv = robot.nv
    L = ctx.eye(nv)
    Dm = ctx.zeros((nv, nv))
    for j in range(robot.n_bodies):
        if j == 0:
            if robot.is_free:
                Dm[0:6, 0:6] = ab.D[0]
            continue
        sj = robot.v_index(j)
        Dm[sj, sj] = ab.D[j]
        g = ab.G[j]                       # phi(j, j) G(j)
        i = j
        while robot.parent[i] > 0 or (robot.parent[i] == 0 and robot.is_free):
            g = ctx.stage(f"Kc{j}_{robot.parent[i]}", kin.X[i].force_to_parent(g))
            i = robot.parent[i]
            si = robot.v_index(i)
            L[si, sj] = g.reshape(6, 1) if i == 0 else (kin.hinge(i) @ g)
    return L, Dm
