"""Test setup shared by the recorder tests and the AITune oracle tier (see oracle_env.py).

Outside CI a missing torch, oracle folder or producer binary skips the tests
that need them; with CI set it fails them (the same contract as the Go tests).
"""

import os
import pathlib

import pytest

from oracle_env import ORACLES, REPO, STUBS, TESTS, Missing, setup  # noqa: F401


def need_aitune():
    """Make `import aitune.torch` work with the real AITune, or skip/fail."""
    try:
        setup()
    except Missing as e:
        if os.environ.get("CI"):
            pytest.fail(f"{e}; CI must have it", pytrace=False)
        pytest.skip(str(e), allow_module_level=True)


def producer_binary():
    """bin/producer of this checkout (`make build`), or $TUNEFLEET_BIN/producer."""
    base = pathlib.Path(os.environ.get("TUNEFLEET_BIN", REPO / "bin"))
    return base / "producer"
