"""Cases: the case specifications in ``model_zoo/cases/`` (``specs``).

Owns: finding the zoo, loading a case's ``SPEC`` and RASP program and checking them, and the
named case sets (``main``, appendix H). The bottom of the builders, beside ``release/``: the
Tracr, SIIT and dataset stages read their cases through it. May import: the client only (and
Tracr's ``rasp``, inside a function, to check a program).
"""
