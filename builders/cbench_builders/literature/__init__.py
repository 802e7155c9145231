"""The literature's circuits (IOI, greater-than, docstring, induction) as cbench circuit documents."""
