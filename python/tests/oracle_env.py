"""Where AITune's real source and the GPU stand-ins come from, for pytest and for oracle_load.py.

AITune is not installed: its unmodified source lives in the oracles folder
beside the checkout (`../shared/oracles/python`, or
`$TUNEFLEET_SHARED_DIR/oracles/python`); stubs/ stands in for the GPU-only
third-party packages it imports at module level. Torch, numpy and onnx come
from Debian (python3-torch & co.).
"""

import contextlib
import os
import pathlib
import sys

TESTS = pathlib.Path(__file__).resolve().parent
REPO = TESTS.parent.parent
STUBS = TESTS / "stubs"


def shared_dir():
    env = os.environ.get("TUNEFLEET_SHARED_DIR")
    return pathlib.Path(env) if env else REPO.parent / "shared"


ORACLES = shared_dir() / "oracles" / "python"


class Missing(Exception):
    """Something the oracle tier needs is not on this machine (the message says what, and how to get it)."""


def setup():
    """Make `import aitune.torch` import the real AITune; raise Missing when it cannot."""
    try:
        import torch  # noqa: F401
        import onnx  # noqa: F401
    except ImportError as e:
        raise Missing(f"python module {e.name} is missing (make python-deps: Debian's python3-torch, python3-onnx, ...)") from e
    if not (ORACLES / "aitune").is_dir():
        raise Missing(f"AITune's source is missing: no {ORACLES / 'aitune'} (set TUNEFLEET_SHARED_DIR)")
    for p in (str(ORACLES), str(STUBS), str(REPO / "python")):
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
