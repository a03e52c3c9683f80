"""soadyn.structure: operations that return a new robot model (lock joints, invert / re-root, fix or free the
base, close a loop, change of base body), and the state maps between a model and the one derived from it
(seed 004 section III, seed 000 Appendix A).  Like Pinocchio's ``buildReducedModel``, every operation is a
free function; the input model is never changed.
"""
