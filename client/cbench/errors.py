"""One error hierarchy for cbench, with messages written for users.

Every user-facing failure raises a subclass of :class:`CbenchError`. The CLI
catches ``CbenchError`` and prints ``error: <message>`` on one line with exit
status 1 (2 for usage errors); anything else is a bug.
"""

from __future__ import annotations

import difflib
from typing import Iterable, Sequence


class CbenchError(Exception):
    """Base class of every error cbench reports to a user."""

    exit_code = 1


class UsageError(CbenchError):
    """A command was called with arguments that cannot work (bad flag values, ranges)."""

    exit_code = 2


class SchemaError(CbenchError):
    """A JSON document does not satisfy its schema (or is not a document at all)."""

    def __init__(self, message: str, violations: Sequence[str] = ()):
        self.violations = list(violations)
        detail = "".join(f"\n  {v}" for v in self.violations[:20])
        more = len(self.violations) - 20
        if more > 0:
            detail += f"\n  ... and {more} more"
        super().__init__(message + detail)


class ArtifactError(CbenchError):
    """An artifact directory is missing files, malformed, or inconsistent."""


class HashMismatchError(ArtifactError):
    """A file's sha256 differs from the one its manifest records."""


class ArtifactSchemaError(ArtifactError, SchemaError):
    """A JSON file of an artifact violates its schema (both an ArtifactError and a SchemaError)."""


class GraphError(CbenchError):
    """An edge or node name does not exist in a model's graph, or a mask has the wrong shape."""


class UnsupportedModelError(GraphError):
    """A model with an architecture feature the runtime does not run (the message names it)."""

    exit_code = 2


class HubError(CbenchError):
    """Anything that goes wrong talking to a hub."""


class HubUnreachableError(HubError):
    """The hub cannot be reached and nothing usable is cached."""


class UnknownRepoError(HubError):
    """A case or repository name that the hub does not have."""


class UnknownRevisionError(HubError):
    """A version tag or sha that the repository does not have."""


class TagMovedError(HubError):
    """A version tag now names another commit than the one recorded or pinned for it."""


class CacheDamagedError(HashMismatchError):
    """A cached snapshot no longer matches what was verified when it entered the cache."""


class PublishError(HubError):
    """Publishing refused (schema violations, reused or lower version tag, ...)."""


class UnsafePickleError(CbenchError):
    """A legacy pickle asked for something outside the allowlist."""


class BuildError(CbenchError):
    """A builder failed for a named case (compile error, exactness failure, ...)."""


class FindError(CbenchError):
    """The FIND suite is missing, malformed, or asked for something it does not have."""


def closest(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """The up-to-``n`` choices closest to ``name``, for 'did you mean' messages."""
    choices = list(choices)
    found = difflib.get_close_matches(name, choices, n=n, cutoff=0.4)
    return found


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """A suffix like `` (did you mean: case-3, case-33?)`` or an empty string."""
    found = closest(name, choices)
    return f" (did you mean: {', '.join(found)}?)" if found else ""
