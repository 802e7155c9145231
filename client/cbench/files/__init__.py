"""Files on the user's disk: output targets that never lose what was there (atomic writes,
refusing directories, devices and symlinks), bounded reads of regular files, and the liveness
of the process that holds a lock or temporary.

May import: ``cbench.errors`` only.
"""
