"""Fixtures shared by several test modules, built once per session (issue 49: the default suite
paid for the same expensive set-up in each module that needed it)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def compiled_tracr(tmp_path_factory):
    """``compiled_tracr(*cases)``: a fresh directory holding ``tracr-case-<id>`` for each case
    (links into one session-wide build, so each case is compiled once per session: ~9 s of CPU
    for case 3 with JAX warm). Tests read these artifacts; none may write into them."""
    from cbench_builders.tracr.build import build_case

    root = tmp_path_factory.mktemp("tracr-session")
    built: dict[str, object] = {}

    def get(*cases: str):
        view = tmp_path_factory.mktemp("tracr")
        for case in cases:
            if case not in built:
                result = build_case(case, root)
                assert result.ok, result.error
                built[case] = result
            (view / f"tracr-case-{case}").symlink_to(root / f"tracr-case-{case}", target_is_directory=True)
        return view

    return get


@pytest.fixture(autouse=True)
def _no_shared_hub_server_outlives_its_test():
    """Pulls from a hub directory share one olah per process for a few seconds
    (:func:`cbench.hub.server.shared_server`); a test ends with none left, so the next test's
    process checks see only their own servers."""
    yield
    import sys

    server = sys.modules.get("cbench.hub.server")
    if server is not None:
        server.stop_shared_servers()
