"""The hub: versioned repositories in Hugging Face layout, and the client's copy of them.

Owns: local hub directories of git repositories and their semver tags (``repos``), the
Hugging Face-compatible HTTP API over them (``api``) and the loopback server that serves it
(``server``), the offline cache of pulled snapshots (``cache``) and its integrity checks
(``cache_verify``), and resolving + downloading a repository at a revision (``pull``).

Also: where a pull talks to (``remote``), publishing a release directory after validating it
(``publishing``), the zoo of this source tree (``zoo``) and seeding a hub from it (``seeding``), and
loading a case's model or dataset through all of it (``loading``: ``cbench.load``).

May import: ``cbench.artifacts``, ``cbench.schemas``, ``cbench.graph``, ``cbench.files``,
``cbench.errors``. The hub sits above the artifact format because it only ever holds validated
releases: publishing and seeding check each one as an artifact first.
"""

from cbench.about import moved_attributes as _moved

# The hub's public surface (what ``cbench.hub`` was as one module), imported on first use.
_SURFACE = {
    "cbench.hub.repos": ("REPO_TYPES", "SHA_RE", "AUTHOR_NAME", "AUTHOR_EMAIL", "parse_version", "is_version",
                         "sort_versions", "version_timestamp", "release_timestamp", "check_repo_id", "check_repo_type",
                         "git", "_git_env", "RepoRef", "Hub", "cbench_home", "default_hub_dir", "remove_tree"),
    "cbench.hub.publishing": ("release_problems", "PublishResult", "publish"),
    "cbench.hub.zoo": ("RELEASE_DATES_FILE", "release_dates", "release_key", "zoo_dir", "zoo_releases"),
    "cbench.hub.seeding": ("ensure_seeded",),
}
__getattr__ = _moved(__name__, {name: module for module, names in _SURFACE.items() for name in names})
