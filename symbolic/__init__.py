"""soadyn.symbolic: the generic core -- scalar contexts, spatial algebra and one module per seed algorithm.

Every algorithm (:mod:`soadyn.symbolic.algorithms`) is written once, like its paper, over a scalar that is a
float (:class:`~soadyn.symbolic.scalar.Numeric`) or a SymEngine expression
(:class:`~soadyn.symbolic.scalar.Symbolic`); the symbolic run is what :mod:`soadyn.codegen` turns into C.
The core imports only the robot model (:mod:`soadyn.model`).
"""


def __getattr__(name: str):  # noqa: ANN202 - lazy: SymPy is imported only when the SymPy face is used
    if name == "to_sympy":
        from soadyn.symbolic.expressions import to_sympy

        return to_sympy
    raise AttributeError(f"module 'soadyn.symbolic' has no attribute {name!r}")
