"""A model over 2 GB records with external data, checked by path, never loaded whole (long tier).

Not in the default run: set TUNEFLEET_LONG=1. It builds a 2.25 GB model (two 1,126,400,000-byte
weights) twice, in child processes: once for torch.onnx.export alone (the baseline), once for
tunefleet.record (with `producer bundle check`, whose ONNX Runtime child loads the weights too),
and prints each one's peak RSS next to the model's own weights:

    TUNEFLEET_LONG=1 python3 -m pytest -q -s tests/test_large.py
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO, need_aitune
from test_record import producer_or_skip

pytestmark = pytest.mark.skipif(not os.environ.get("TUNEFLEET_LONG"), reason="long tier: set TUNEFLEET_LONG=1")

need_aitune()

import onnx  # noqa: E402

WEIGHT = 1_126_400_000  # bytes per weight, 2 weights: 2.25 GB

CHILD = textwrap.dedent("""
    import json, resource, sys, warnings
    sys.path[:0] = {paths!r}
    from oracle_env import setup
    setup()
    import torch
    from torch import nn

    class Big(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.Linear(1024, 275_000, bias=False)     # 1,126,400,000 bytes
            self.down = nn.Linear(275_000, 1024, bias=False)   # 1,126,400,000 bytes
        def forward(self, x):
            return self.down(torch.relu(self.up(x)))

    torch.manual_seed(0)
    with torch.no_grad():
        m = Big().eval()
    x = [torch.randn(1, 1024), torch.randn(2, 1024)]
    what, out = sys.argv[1], sys.argv[2]
    if what == "export":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(m, (x[0],), out, input_names=["input_x"], dynamic_axes={{"input_x": {{0: "b"}}}})
    else:
        import tunefleet
        report = {{}}
        tunefleet.record(m, "tests.Big", x, out, producer=sys.argv[3], check_report=report)
        assert report["ok"], report
    self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({{"self": self_kb * 1024, "children": child_kb * 1024}}))
""")


CHECK = textwrap.dedent("""
    import resource, subprocess, sys
    r = subprocess.run([sys.argv[1], "bundle", "check", "-o", "json", sys.argv[2]], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
""")


def child(tmp_path, *args):
    from conftest import ORACLES, STUBS, TESTS

    script = tmp_path / "child.py"
    script.write_text(CHILD.format(paths=[str(TESTS), str(ORACLES), str(STUBS), str(REPO / "python")]))
    res = subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_a_model_over_2gb_records_with_external_data(tmp_path):
    p = producer_or_skip()
    (tmp_path / "plain").mkdir()
    base = child(tmp_path, "export", tmp_path / "plain" / "model.onnx")
    rec = child(tmp_path, "record", tmp_path / "bundle", p)
    g = tmp_path / "bundle" / "graphs" / "0"
    files = sorted(f.name for f in g.iterdir() if f.is_file())
    assert files == ["model.onnx", "model.onnx.data"], files
    assert (g / "model.onnx").stat().st_size < 1 << 20
    onnx.checker.check_model(str(g / "model.onnx"))  # by path: the checker reads the data from disk
    model = onnx.load(str(g / "model.onnx"), load_external_data=False)
    seen = []
    for t in model.graph.initializer:
        info = {e.key: e.value for e in t.external_data}
        assert info["location"] == "model.onnx.data" and "offset" in info and int(info["length"]) == WEIGHT, info
        seen.append(int(info["offset"]))
    assert len(seen) == 2 and (g / "model.onnx.data").stat().st_size >= 2 * WEIGHT
    weights = 2 * WEIGHT
    gib = 1 << 30
    # The recorder's child figure counts the recorder's own memory too (the
    # kernel charges a child what it had before exec), so `producer bundle
    # check` is measured again from a small process of its own.
    chk = subprocess.run([sys.executable, "-c", CHECK, str(p), str(tmp_path / "bundle")], capture_output=True, text=True)
    assert chk.returncode == 0, chk.stderr[-3000:]
    check_peak = int(chk.stdout.strip().splitlines()[-1])
    print(f"\nmodel weights {weights / gib:.2f} GiB; torch.onnx.export alone: peak RSS {base['self'] / gib:.2f} GiB; "
          f"tunefleet.record: peak RSS {rec['self'] / gib:.2f} GiB (python); "
          f"producer bundle check (its ONNX Runtime session): peak RSS {check_peak / gib:.2f} GiB")
    assert rec["self"] <= base["self"] + weights + gib, (rec, base)
