"""AITune's own update_max_batch_size against a checkpoint tunefleet extended (for a Go test).

    /usr/bin/python3 jobs/testdata/oracle_max_batch.py RECORDED_DIR EXTENDED_DIR FOUND

RECORDED_DIR and EXTENDED_DIR are `fetch --format aitune` outputs of the
same one-input module (forward(self, x)) tuned without and with
--find-max-batch. Both load through AITune's real ait.load; on the recorded
graph spec, AITune's GraphSpec.update_max_batch_size((x,), FOUND) runs with
x a tensor of its recorded min shape, as FindMaxBatchSizeMixin calls it with
the first sample. Prints {"aitune": specs, "tunefleet": specs}, each the
graph specs by name, each input and output tensor as [path, shape,
min_shape, max_shape, multipliers]. Exit 3 when torch or AITune is missing.
"""

import json
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python" / "tests"))
import oracle_env  # noqa: E402


def tensors(metadata):
    out = []
    for locator, ts in metadata.tensor_data:
        mult = [None if isinstance(m, float) and math.isnan(m) else m for m in ts._bs_multipliers]
        out.append([repr(locator), list(ts.shape), list(ts.min_shape), list(ts.max_shape), mult])
    return out


def specs(loaded):
    out = {}
    for backend in loaded._self_wrapper.backends.values():
        gs = backend._graph_spec
        out[gs.name] = {"inputs": tensors(gs.input_spec), "outputs": tensors(gs.output_spec)}
    return out, loaded


def main(recorded_dir, extended_dir, found):
    try:
        oracle_env.setup()
    except oracle_env.Missing as e:
        print(e, file=sys.stderr)
        return 3
    import torch

    import tunefleet

    recorded = tunefleet.load(torch.nn.Module(), recorded_dir)
    for backend in recorded._self_wrapper.backends.values():
        gs = backend._graph_spec
        (_, ts), = gs.input_spec.tensor_data
        x = torch.zeros(*ts.min_shape, dtype=ts.dtype)
        gs.update_max_batch_size(((x,), {}), found)
    want, _ = specs(recorded)
    got, _ = specs(tunefleet.load(torch.nn.Module(), extended_dir))
    json.dump({"aitune": want, "tunefleet": got}, sys.stdout)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
