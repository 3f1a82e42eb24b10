"""Reads a Go-written AITune checkpoint the way AITune and torch.load do,
without torch or AITune installed, and prints a canonical JSON description
for the Go tests to compare.

    aitune_probe.py state <state_dict.pt>
        Opens the torch zip with zipfile, unpickles data.pkl with an
        Unpickler whose find_class maps the aitune.* and torch.* globals to
        recording stand-ins (and _codecs.encode / bytes to the real ones, as
        protocol-2 bytes need), and prints the object graph. Nested pickles
        (bytes starting with PROTO) are unpickled the same way.

    aitune_probe.py load <base_folder> <name> <compress: 0|1>
        Replays LocalTorchStorage's load tasks: UnzipLoadTask (into a
        scratch copy), ShaSumsLoadTask, TorchLoadTask and
        RelocateBackendArtifactsTask, and prints what each found.

Any global outside the allow-list, any constructor called with the wrong
arity, any artifact that would not relocate, fails with a non-zero exit.
"""

import codecs
import collections
import hashlib
import json
import os
import pathlib
import pickle
import shutil
import sys
import tempfile
import zipfile


class StandIn:
    """Base of the recording stand-ins: remembers constructor arguments."""

    qualname = "?"
    required = ()
    optional = ()

    def __init__(self, *args, **kwargs):
        if kwargs:
            raise TypeError(f"{self.qualname}: unexpected keyword arguments {sorted(kwargs)}")
        lo, hi = len(self.required), len(self.required) + len(self.optional)
        if not lo <= len(args) <= hi:
            raise TypeError(f"{self.qualname} takes {lo} to {hi} arguments, got {len(args)}")
        self.args = args


def stand_in(qualname, required, optional=()):
    return type(qualname, (StandIn,), {"qualname": qualname, "required": required, "optional": optional})


# The constructors AITune's checkpoint may call (reference §3.7), with the
# real signatures.
CLASSES = {
    ("aitune.torch.checkpoint.artifact", "ArtifactPath"): stand_in("ArtifactPath", ("root", "relative_path")),
    ("aitune.torch.module.locator", "Locator"): stand_in("Locator", ("access_path",), ("is_output",)),
    ("aitune.torch.module.locator", "ObjectType"): stand_in("ObjectType", ("value",)),
    ("aitune.torch.module.tensor_spec", "TensorSpec"): stand_in(
        "TensorSpec", ("shape", "min_shape", "max_shape", "dtype", "_bs_multipliers")
    ),
    ("aitune.torch.module.sample_metadata", "SampleMetadata"): stand_in(
        "SampleMetadata", ("tensor_data", "other_data"), ("strict", "llm_phase")
    ),
    ("aitune.torch.dynamic_shapes", "DynamicDim"): stand_in("DynamicDim", ("name", "min", "max"), ("opt",)),
    ("aitune.torch.dynamic_shapes", "BatchDim"): stand_in("BatchDim", ("name", "min", "max"), ("opt",)),
    ("torch", "device"): stand_in("torch.device", ("type",), ("index",)),
}

DTYPES = {
    "float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "uint16",
    "int32", "uint32", "int64", "uint64", "bool",
}


class DType:
    def __init__(self, name):
        self.name = name


class Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in CLASSES:
            return CLASSES[(module, name)]
        if module == "torch" and name in DTYPES:
            return DType(name)  # torch pickles a dtype as the global itself
        if (module, name) == ("_codecs", "encode"):
            return codecs.encode  # protocol-2 bytes
        if (module, name) in (("__builtin__", "bytes"), ("builtins", "bytes")):
            return bytes
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict  # a state dict carrying _metadata, as torch.save writes one
        raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError(f"persistent id {pid!r}: the checkpoint should hold no tensors")


def loads(data):
    import io
    return Unpickler(io.BytesIO(data)).load()


def canon(v):
    """A JSON form that keeps what JSON alone would lose."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return {"$float": repr(v)}
    if isinstance(v, bytes):
        if v[:1] == b"\x80":
            return {"$pickle": canon(loads(v))}
        return {"$bytes": v.hex()}
    if isinstance(v, tuple):
        return {"$tuple": [canon(x) for x in v]}
    if isinstance(v, list):
        return [canon(x) for x in v]
    if type(v) is collections.OrderedDict:
        out = {"$odict": [[canon(k), canon(x)] for k, x in v.items()]}
        if vars(v):
            out["$attrs"] = {k: canon(x) for k, x in vars(v).items()}
        return out
    if type(v) is dict:
        return {"$dict": [[canon(k), canon(x)] for k, x in v.items()]}
    if isinstance(v, DType):
        return {"$dtype": v.name}
    if isinstance(v, StandIn):
        return {"$class": v.qualname, "args": [canon(a) for a in v.args]}
    raise TypeError(f"unexpected value of type {type(v).__name__}")


def torch_load(path):
    """torch.load's container side: one top-level folder, data.pkl, version."""
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        folder = names[0].split("/", 1)[0]
        for n in names:
            if not n.startswith(folder + "/"):
                raise ValueError(f"{n} is outside the archive folder {folder}")
        version = zf.read(folder + "/version") if folder + "/version" in names else zf.read(folder + "/.data/version")
        if not 1 <= int(version) <= 10:
            raise ValueError(f"unsupported version {version!r}")
        return folder, names, loads(zf.read(folder + "/data.pkl"))


def cmd_state(path):
    folder, names, state = torch_load(path)
    json.dump({"folder": folder, "records": names, "state": canon(state)}, sys.stdout)


def iter_backend_data_dicts(state):
    """storage_tasks._iter_backend_data_dicts: LIFO over dicts, 'backends' pairs in list order."""
    stack = [state]
    while stack:
        current = stack.pop()
        for key, value in current.items():
            if isinstance(value, dict):
                stack.append(value)
            elif key == "backends":
                for _, backend_data in value:
                    yield backend_data


def transform_artifacts(value, fn):
    """storage_tasks._transform_artifact_paths: exact dict/list/tuple only."""
    if isinstance(value, CLASSES[("aitune.torch.checkpoint.artifact", "ArtifactPath")]):
        return fn(value)
    if type(value) is dict:
        for k, item in value.items():
            value[k] = transform_artifacts(item, fn)
        return value
    if type(value) is list:
        for i, item in enumerate(value):
            value[i] = transform_artifacts(item, fn)
        return value
    if type(value) is tuple:
        return tuple(transform_artifacts(item, fn) for item in value)
    return value


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            h.update(chunk)
    return h.hexdigest()


def cmd_load(base, name, compress):
    base = pathlib.Path(base)
    out = {}
    scratch = None
    try:
        folder = base / name
        if compress:
            # UnzipLoadTask, into a scratch copy so goldens stay untouched.
            scratch = pathlib.Path(tempfile.mkdtemp())
            folder = scratch / name
            with zipfile.ZipFile(base / (name + ".ait")) as zf:
                for info in zf.infolist():
                    if info.is_dir():
                        raise ValueError(f"directory entry {info.filename}")
                    if info.compress_type != zipfile.ZIP_STORED:
                        raise ValueError(f"{info.filename} is compressed")
                out["archive"] = zf.namelist()
                zf.extractall(folder)
            # ShaSumsLoadTask
            sums = folder / (folder.stem + "_sha256_sums.txt")
            if not sums.exists():
                candidates = sorted(folder.glob("*_sha256_sums.txt"))
                if len(candidates) != 1:
                    raise ValueError(f"sums file: {candidates}")
                sums = candidates[0]
            root = folder.resolve()
            verified = []
            for line in sums.read_text(encoding="utf-8").splitlines():
                line = line.strip()
                if not line:
                    continue
                digest, rel = line.split("  ", 1)
                p = (root / rel).resolve()
                p.relative_to(root)
                if sha256_of(p) != digest:
                    raise ValueError(f"hash mismatch for {rel}")
                verified.append(rel)
            out["sums_file"] = sums.name
            out["verified"] = verified
            beside = base / sums.name
            out["sums_beside_equal"] = beside.exists() and beside.read_bytes() == sums.read_bytes()
        # TorchLoadTask
        _, _, state = torch_load(folder / "state_dict.pt")
        # RelocateBackendArtifactsTask
        root = folder.resolve()
        backends = []
        for index, backend_data in enumerate(iter_backend_data_dicts(state), start=1):
            found = []

            def relocate(artifact, found=found, index=index):
                r, rel = artifact.args
                if pathlib.Path(r).is_absolute():
                    raise ValueError(f"absolute artifact root {r}")
                p = (root / r / rel).resolve()
                p.relative_to(root)  # ValueError if it escapes
                if not p.exists():
                    raise FileNotFoundError(p)
                if pathlib.Path(rel).parts[0] != str(index):
                    raise ValueError(f"artifact {rel} of backend {index} is not under {index}/")
                found.append({"path": rel, "sha256": sha256_of(p)})
                return artifact

            transform_artifacts(backend_data, relocate)
            entry = {"index": index, "type": backend_data["type"], "artifacts": found}
            if backend_data["type"] == "TensorRTBackend":
                profiles = backend_data["trt_optimization_profiles_path"].args[1]
                entry["profiles"] = json.loads((root / profiles).read_text())
            backends.append(entry)
        out["backends"] = backends
        out["files"] = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    finally:
        if scratch is not None:
            shutil.rmtree(scratch)
    json.dump(out, sys.stdout)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "state":
        cmd_state(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "load":
        cmd_load(sys.argv[2], sys.argv[3], sys.argv[4] == "1")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
