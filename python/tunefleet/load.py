"""Load a checkpoint fetched with `producer fetch --format aitune` through AITune's own ait.load."""

import contextlib
from collections import OrderedDict
from pathlib import Path


def checkpoint_in(ckpt_dir):
    """(name, compressed) of the one checkpoint in ckpt_dir.

    fetch writes DIR/<name>.ait, DIR/<stem>_sha256_sums.txt and the unpacked
    DIR/<name>/. The archive is preferred: loading it makes AITune verify the
    sha256 sums inside it.
    """
    ckpt_dir = Path(ckpt_dir)
    if not ckpt_dir.is_dir():
        raise FileNotFoundError(f"{ckpt_dir}: no such checkpoint directory (write one with `producer fetch --format aitune --out DIR`)")
    archives = sorted(p.name[: -len(".ait")] for p in ckpt_dir.glob("*.ait") if p.is_file())
    folders = sorted(p.name for p in ckpt_dir.iterdir() if (p / "state_dict.pt").is_file())
    if len(archives) == 1:
        return archives[0], True
    if not archives and len(folders) == 1:
        return folders[0], False
    found = [a + ".ait" for a in archives] + [f + "/state_dict.pt" for f in folders]
    raise ValueError(f"{ckpt_dir}: want exactly one AITune checkpoint (NAME.ait or NAME/state_dict.pt), found {found or 'none'}")


def load(module, ckpt_dir, device_map=None, verify_keys=None, require_signature=False):
    """ait.load(module, name, storage=LocalTorchStorage(base_folder=ckpt_dir, ...)).

    Returns AITune's tuned module. Like ait.load, it moves module's own weights
    to the `meta` device when no backend needs them.

    A checkpoint is a pickle: loading it runs code. With verify_keys (PEM
    public key files, any one of which may have signed it: key rotation), the
    checkpoint's signed provenance (DIR/attestation.intoto.jsonl, laid out by
    `producer fetch --format aitune --verify-key`) is verified first and every
    file must be one of its subjects; nothing is unpickled otherwise
    (tunefleet.provenance.ProvenanceError). require_signature without
    verify_keys is an error: a signature is only worth the key it is checked
    against.
    """
    if require_signature and not verify_keys:
        raise ValueError("require_signature needs verify_keys (PEM public key files)")
    if verify_keys:
        from .provenance import verify_checkpoint

        verify_checkpoint(ckpt_dir, verify_keys)
    import aitune.torch as ait
    from aitune.torch import LocalTorchStorage

    name, compressed = checkpoint_in(ckpt_dir)
    storage = LocalTorchStorage(base_folder=Path(ckpt_dir), compress_checkpoint=compressed)
    with _versions_kept(module):
        return ait.load(module, name, storage=storage, device_map=device_map)


@contextlib.contextmanager
def _versions_kept(module):
    """While ait.load runs, module.load_state_dict gets the submodules' versions back.

    ait.load ends with module.load_state_dict(rest_of_checkpoint, strict=False).
    AITune 0.6's storage returns the checkpoint's state dict as a plain dict,
    dropping the _metadata torch.save (and tunefleet's checkpoint) keep, so
    every submodule sees version None; a module that checks it (torchvision's
    MNASNet) then refuses to load. The versions are the module class's own
    (_version), so this module's state_dict()._metadata is what was recorded.
    The override is an instance attribute (AITune's wrapper forwards to it),
    removed afterwards.
    """
    from .structure import module_versions

    meta = OrderedDict((k, {"version": v}) for k, v in module_versions(module).items())
    bound = type(module).load_state_dict
    had = "load_state_dict" in module.__dict__

    def load_state_dict(state_dict, *args, **kwargs):
        if getattr(state_dict, "_metadata", None) is None:
            state_dict = OrderedDict(state_dict)
            state_dict._metadata = meta
        return bound(module, state_dict, *args, **kwargs)

    if not had:
        module.load_state_dict = load_state_dict
    try:
        yield
    finally:
        if not had:
            module.__dict__.pop("load_state_dict", None)
