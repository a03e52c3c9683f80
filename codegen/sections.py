"""Section comments of the generated C: which recursion stage (and seed equation) a run of lines implements.

Every staged quantity keeps the stage name the algorithm gave it (``ctx.stage("V3", ...)``, kept in
:attr:`soadyn.codegen.derive.Program.stages`).  :data:`SECTIONS` maps stage names to a one-line
description naming the seed equation; :func:`section_of` finds the section of a staged symbol, and the
emitter writes ``/* <description> */`` wherever the section changes along the straight-line program.
Common subexpressions (``t12``) and inputs belong to no section and never start one.  Pure text built
from the program, so the output stays byte-reproducible.
"""

from __future__ import annotations

import re

#: (pattern on the stage name, description), first match wins; seed numbering as in /work/shared/seeds
SECTIONS: tuple[tuple[str, str], ...] = (
    (r"(c|s|R|l)\d+", "joint transforms phi(k+1, k): cos/sin of the joint angles, hinge rotation R(k) and "
                      "offset l(k) (seed 000 eq. 2.1)"),
    (r"(Rb|pb)\d+|pf_\w+", "frame poses in the inertial frame, base to tip (Jacobian rows, seed 000 "
                           "eq. 4.3)"),
    (r"(Rc|pc)\d+", "body poses in the axes of the fixed base's one child, base to tip (the derivative "
                    "sweep's axes, docs/conventions.md)"),
    (r"[Vab]\d+", "Algorithm 1 (seed 000 eq. 2.1-2.2): velocities V(k), Coriolis a(k), gyroscopic "
                  "forces b(k), base to tip"),
    (r"(P|Pp|U|D|Dinv|G)\d+|D0(L|d|di)\w*", "Algorithm 2 (seed 000 eq. 2.6): articulated-body inertia P(k), "
                                            "D(k), G(k), P+(k), tip to base"),
    (r"(z|Zp)(eps|nu|p)?\d\w*", "Algorithm 3 (seed 000 eq. 2.13a): residual forces z(k), eps(k), nu(k), "
                                "tip to base"),
    (r"(ap|qdd|alpha)\d+", "accelerations alpha(k) = alpha+(k) + H*(k) betadot(k) + a(k), base to tip "
                           "(seed 000 eq. 2.1; eq. 2.13b in forward dynamics)"),
    (r"f\d+", "Algorithm 1 (seed 000 eq. 2.1): body forces f(k), tip to base"),
    (r"(Rh|RJ|F)\d+(_\d+)?", "composite-body inertias R(k) and the blocks H phi R H* of the mass matrix "
                             "(seed 000 eq. 2.4a), tip to base"),
    (r"(Sb|vb|ab|Ibh|IbJ|cb|hb)\d+|gb", "analytic derivatives of Algorithm 1 (Carpentier & Mansard 2018), "
                                        "base-aligned coordinates: joint columns S(k), velocities v(k), "
                                        "accelerations a(k), inertias I(k) and momenta, base to tip"),
    (r"(Ich|IcJ|Cc|Hc|Fc)\d+", "composite inertia Ic, Coriolis operator BCc and force F of each subtree, "
                               "tip to base (Carpentier & Mansard 2018)"),
    (r"(Fr|Gr|u|al|be|phi|psi)\d+|dtau_d[qv]", "rows Ic S, BCc^T S and columns u, alpha, beta, phi, psi of "
                                               "dtau/dq, dtau/dv (Carpentier & Mansard 2018)"),
    (r"(Su|Sd|Sdi|Sg|Sp|S)\d+", "Algorithm 4 (seed 000 section 3.1): dual articulated inertias S+(k), S(k), "
                                "D_s(k), G_s(k), base to tip"),
    (r"Zs(y|eps|nu)?\d+", "Algorithm 5 (seed 000 eq. 3.5a): dual residual forces z_s(k), nu_s(k), "
                          "base to tip"),
    (r"(Lam|Lrhs)\d+\w*|alph\d+\w*|qddb", "Lambda(k) = P(k) + S(k) and the link accelerations of Lemma 3.2 "
                                          "(seed 000 eq. 3.12-3.13, Lemma 4.1)"),
    (r"(Y|Yg|W|Minv|Kc)\d+_\d+\w*|W0_\d+\w*|Dninv\w*", "innovations factorisation (seed 000 Lemma 2.1, "
                                                       "eq. 2.10b-c): Y = I - H psi K, M^-1 = Y* D^-1 Y"),
    (r"Cf\w*", "constraint-force (Schur-complement) factorisation of M^-1 (seed 002 eq. 3.17-3.20, "
               "4.12-4.13)"),
    (r"hm\d+|hv\d+|com_b", "momentum and centre of mass gathered tip to base (seed 000 eq. 2.3a, 2.4a)"),
    (r"Hb\w*|vbase\w*|vb0\w*|ho(_rhs)?", "base block H_b of the mass matrix solved by LDL^T (seed 003 "
                                         "eq. C.17, E.3-E.6)"),
    (r"Ups\w*", "operational-space inertias Upsilon(k) = Lambda(k)^-1 (seed 000 eq. 4.7, 4.9)"),
    (r"cl\w*", "loop-closure constraint rows and the reduced dynamics (seed 004 eq. 5)"),
    (r"afd|(aqd|abq|Fqc|Fcq)\d+", "the sweep at the forward dynamics' accelerations: a = M^-1 (tau - h), "
                                  "then the accelerations A(k) and subtree forces F(k) corrected by the "
                                  "terms linear in a"),
    (r"dadx", "derivatives of the forward dynamics da/dx = -M^-1 dtau/dx at a = FD(q, v, tau) "
              "(Carpentier & Mansard 2018; dtau/dx of Algorithm 1, M^-1 of seed 000 eq. 2.10c)"),
)

_COMPILED = tuple((re.compile(p), text) for p, text in SECTIONS)


def section_of(stage: str) -> str | None:
    """The description of the section a stage name belongs to (None for an unknown or empty name)."""
    if not stage:
        return None
    for pattern, text in _COMPILED:
        if pattern.fullmatch(stage):
            return text
    return None
