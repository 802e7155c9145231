"""FIND: function-interpretation problems with known answers (Schwettmann et al., 2023).

    from cbench.find import load_suite
    suite = load_suite()                     # pulls cbench/find (or load_suite("path/to/find"))
    box = suite.black_box("n0042")           # call it; it reveals nothing else
    box([-3.0, 0.0, 2.5])

The function families live in :mod:`cbench.find.functions`, the runner in
:mod:`cbench.find.suite`, the sandbox in :mod:`cbench.find.sandbox`, scoring in
:mod:`cbench.find.scoring` and the no-language-model baseline in :mod:`cbench.find.baseline`.

May import: ``cbench.hub``, ``cbench.artifacts``, ``cbench.schemas``, ``cbench.files``, ``cbench.errors``.
"""

__all__ = ["BlackBox", "FindError", "FindFunction", "FindSuite", "load_suite"]


def __getattr__(name):  # the suite (numpy, the hub) loads on first use: `cbench find --help` needs only the limits
    if name in __all__:
        from cbench.find import suite

        return getattr(suite, name)
    raise AttributeError(f"module 'cbench.find' has no attribute {name!r}")
