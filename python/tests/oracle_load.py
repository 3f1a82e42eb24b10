"""Load a fetched AITune checkpoint with AITune's real ait.load and print what it deployed (for Go tests).

    /usr/bin/python3 python/tests/oracle_load.py CKPT_DIR

CKPT_DIR is what `producer fetch --format aitune --out CKPT_DIR` wrote. The
checkpoint goes through tunefleet.load, i.e. ait.load with LocalTorchStorage
(unzip, sha256 sums, torch.load, relocation, TunedModule.from_dict, deploy).
Deploying an ONNX Runtime backend opens its session; the session is the
CPU stand-in (stubs/onnxruntime), which loads and checks the relocated model.
A TensorRT backend cannot deploy on a CPU (torch.cuda.set_device).

Prints {"name", "compressed", "backends": [{"type", "graph", "artifacts":
[{"path", "sha256"}], "session": {"path", "providers"}}]} with paths relative
to the checkpoint folder. Exit 3 when torch or AITune's source is missing.
"""

import hashlib
import json
import sys

import oracle_env


def main(ckpt_dir):
    try:
        oracle_env.setup()
    except oracle_env.Missing as e:
        print(e, file=sys.stderr)
        return 3
    import pathlib

    import torch

    import onnxruntime
    import tunefleet
    from tunefleet.load import checkpoint_in

    name, compressed = checkpoint_in(ckpt_dir)
    folder = (pathlib.Path(ckpt_dir) / name).resolve()
    loaded = tunefleet.load(torch.nn.Module(), ckpt_dir)
    sessions = {s.path: s for s in onnxruntime.SESSIONS}
    backends = []
    for backend in loaded._self_wrapper.backends.values():
        artifacts = [v for v in vars(backend).values() if type(v).__name__ == "ArtifactPath"]
        entry = {
            "type": type(backend).__name__,
            "graph": backend._graph_spec.name,
            "artifacts": [{"path": a.relative_path.as_posix(),
                           "sha256": hashlib.sha256(a.path.read_bytes()).hexdigest()} for a in artifacts],
        }
        model = getattr(backend, "_onnx_model_artifact", None)
        if model is not None and str(model.path) in sessions:
            s = sessions[str(model.path)]
            entry["session"] = {"path": pathlib.Path(s.path).resolve().relative_to(folder).as_posix(),
                                "providers": s.providers}
        backends.append(entry)
    json.dump({"name": name, "compressed": compressed, "backends": backends}, sys.stdout)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
