"""Load a checkpoint fetched with `producer fetch --format aitune` through AITune's own ait.load."""

from pathlib import Path


def checkpoint_in(ckpt_dir):
    """(name, compressed) of the one checkpoint in ckpt_dir.

    fetch writes DIR/<name>.ait, DIR/<stem>_sha256_sums.txt and the unpacked
    DIR/<name>/. The archive is preferred: loading it makes AITune verify the
    sha256 sums inside it.
    """
    ckpt_dir = Path(ckpt_dir)
    if not ckpt_dir.is_dir():
        raise FileNotFoundError(f"{ckpt_dir}: no such checkpoint directory (write one with `producer fetch --format aitune -o DIR`)")
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
    return ait.load(module, name, storage=storage, device_map=device_map)
