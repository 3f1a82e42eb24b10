"""Test setup shared by the recorder tests and the AITune oracle tier.

AITune itself is not installed: the tests import NVIDIA's unmodified source
from the oracles folder beside the checkout (`../shared/oracles/python`, or
`$TUNEFLEET_SHARED_DIR/oracles/python`), together with stand-ins for the
GPU-only third-party packages it imports at module level (tests/stubs).
Torch, numpy and onnx come from Debian (python3-torch & co.).

Outside CI a missing torch or oracle folder skips the tests that need them;
with CI set it fails them (the same contract as the Go tests).
"""

import contextlib
import os
import pathlib
import sys

import pytest

TESTS = pathlib.Path(__file__).resolve().parent
REPO = TESTS.parent.parent
STUBS = TESTS / "stubs"


def shared_dir():
    env = os.environ.get("TUNEFLEET_SHARED_DIR")
    return pathlib.Path(env) if env else REPO.parent / "shared"


ORACLES = shared_dir() / "oracles" / "python"


def need(what, ok, hint):
    """Skip (locally) or fail (in CI) the calling test module when `ok` is false."""
    if ok:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing; CI must have it ({hint})", pytrace=False)
    pytest.skip(f"{what} is missing ({hint})", allow_module_level=True)


def need_aitune():
    """Make `import aitune.torch` work with the real AITune, or skip/fail."""
    try:
        import torch  # noqa: F401
        import onnx  # noqa: F401
    except ImportError as e:
        need(f"python module {e.name}", False, "make python-deps: Debian's python3-torch, python3-onnx, ...")
    need(f"AITune's source in {ORACLES}", (ORACLES / "aitune").is_dir(), "set TUNEFLEET_SHARED_DIR")
    for p in (str(ORACLES), str(STUBS)):
        if p not in sys.path:
            sys.path.insert(0, p)
    _torch_gaps()


def _torch_gaps():
    """Fill what Debian's torch 1.13 lacks and AITune (torch >= 2.8) calls.

    torch.serialization.safe_globals only widens what weights_only=True may
    unpickle; AITune's loader enters it and then loads with
    weights_only=False, so a no-op context manager changes nothing.
    """
    import torch.serialization

    if not hasattr(torch.serialization, "safe_globals"):
        torch.serialization.safe_globals = lambda _globals: contextlib.nullcontext()


def producer_binary():
    """bin/producer of this checkout (`make build`), or $TUNEFLEET_BIN/producer."""
    base = pathlib.Path(os.environ.get("TUNEFLEET_BIN", REPO / "bin"))
    return base / "producer"
