"""Verify tunefleet's signed provenance before anything is unpickled.

finalize signs, per run, an in-toto Statement (v1) with the SLSA provenance
v1 predicate in a DSSE envelope (runs/<run>/attestation.intoto.jsonl, one
envelope per line); `producer fetch --verify-key` checks it and lays it out
as DIR/attestation.intoto.jsonl. This module checks it again, independently
of the Go code that signed it: the pre-authentication encoding is computed
here from the DSSE spec, signatures are verified with python3-cryptography
(ed25519, or ECDSA P-256 with SHA-256 over ASN.1 DER signatures), and every
file of a fetched AITune checkpoint must be a subject with its sha256.

A key id is securesystemslib's: the hex sha256 of the key's canonical JSON
(keyid_hash_algorithms, keytype, keyval.public, scheme), as go-securesystemslib
computes it from the same PEM. Envelopes signed before that carried the hex
sha256 of the DER SubjectPublicKeyInfo; either id names the key.
"""

import base64
import hashlib
import json
from pathlib import Path

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
ATTESTATION_FILE = "attestation.intoto.jsonl"
# The attestation of the layout fetch wrote (every file by its path there),
# which `producer verify DIR --key K` and cosign check; not a checkpoint file.
LAYOUT_ATTESTATION_FILE = "tunefleet.intoto.jsonl"


class ProvenanceError(Exception):
    """The provenance does not vouch for what is about to be loaded."""


def pae(payload_type, payload):
    """DSSE v1 pre-authentication encoding: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def load_public_key(path):
    """(key, key id) of a PEM public key file (ed25519 or ECDSA P-256)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    data = Path(path).read_bytes()
    key = serialization.load_pem_public_key(data)
    if isinstance(key, ec.EllipticCurvePublicKey):
        if not isinstance(key.curve, ec.SECP256R1):
            raise ValueError(f"{path}: ECDSA curve {key.curve.name}, want P-256")
    elif not isinstance(key, ed25519.Ed25519PublicKey):
        raise ValueError(f"{path}: {type(key).__name__}, want an ed25519 or ECDSA P-256 public key")
    return key, key_ids(key)


def _cjson_string(s):
    """A string as securesystemslib's canonical JSON writes it: only \\ and " escaped."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def key_id(key):
    """securesystemslib's key id of a public key (what the envelopes carry)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    if isinstance(key, ec.EllipticCurvePublicKey):
        keytype, scheme = "ecdsa", "ecdsa-sha2-nistp256"
        public = key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode().strip()
    else:
        keytype = scheme = "ed25519"
        public = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()
    canonical = ('{"keyid_hash_algorithms":["sha256","sha512"],"keytype":%s,"keyval":{"public":%s},"scheme":%s}'
                 % (_cjson_string(keytype), _cjson_string(public), _cjson_string(scheme)))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def legacy_key_id(key):
    """The id envelopes carried before: the hex sha256 of the DER SubjectPublicKeyInfo."""
    from cryptography.hazmat.primitives import serialization

    der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).hexdigest()


def key_ids(key):
    """Every id that names the key in an envelope."""
    return (key_id(key), legacy_key_id(key))


def _verify_sig(key, sig, message):
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        if isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(sig, message, ec.ECDSA(hashes.SHA256()))
        else:
            key.verify(sig, message)
        return True
    except InvalidSignature:
        return False


def verify_envelopes(jsonl, verify_keys):
    """The Statement (a dict) of the first envelope signed by one of verify_keys (PEM paths).

    Raises ProvenanceError when no envelope verifies, or the signed payload is
    not an in-toto v1 Statement with the SLSA provenance v1 predicate.
    """
    keys = [load_public_key(p) for p in verify_keys]
    if not keys:
        raise ValueError("no verify key")
    signed_by = []
    for n, line in enumerate(jsonl.splitlines(), 1):
        if not line.strip():
            continue
        env = json.loads(line)
        if env.get("payloadType") != PAYLOAD_TYPE:
            continue
        payload = base64.b64decode(env["payload"])
        message = pae(env["payloadType"], payload)
        for s in env.get("signatures", []):
            signed_by.append(s.get("keyid", ""))
            sig = base64.b64decode(s["sig"])
            for key, kids in keys:
                if s.get("keyid") and s["keyid"] not in kids:
                    continue
                if not _verify_sig(key, sig, message):
                    continue
                stmt = json.loads(payload)
                if stmt.get("_type") != STATEMENT_TYPE or stmt.get("predicateType") != PREDICATE_TYPE:
                    raise ProvenanceError(f"envelope {n}: signed payload is not an in-toto v1 Statement of {PREDICATE_TYPE}")
                return stmt
    raise ProvenanceError(
        f"no envelope carries a valid signature by a verify key (tried key ids {[k[0] for _, k in keys]}; signed by {signed_by})")


def subjects(stmt):
    """{subject name: sha256} of a Statement."""
    return {s["name"]: s.get("digest", {}).get("sha256") for s in stmt.get("subject", [])}


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_checkpoint(ckpt_dir, verify_keys):
    """Check a folder of `producer fetch --format aitune --verify-key`.

    Its attestation.intoto.jsonl must be signed by one of verify_keys, and
    every other file in the folder (but tunefleet.intoto.jsonl, the layout's
    own attestation) must be a subject ("aitune/<path>") with its sha256.
    Returns the Statement.
    """
    ckpt_dir = Path(ckpt_dir)
    att = ckpt_dir / ATTESTATION_FILE
    if not att.is_file():
        raise ProvenanceError(f"{ckpt_dir}: no {ATTESTATION_FILE} (fetch with --verify-key lays it out): refusing to unpickle an unsigned checkpoint")
    stmt = verify_envelopes(att.read_bytes(), verify_keys)
    subj = subjects(stmt)
    files = sorted(p for p in ckpt_dir.rglob("*") if p.is_file() and p != att and p != ckpt_dir / LAYOUT_ATTESTATION_FILE)
    if not files:
        raise ProvenanceError(f"{ckpt_dir}: no checkpoint files")
    for p in files:
        rel = p.relative_to(ckpt_dir).as_posix()
        want = subj.get("aitune/" + rel)
        if want is None:
            raise ProvenanceError(f"{rel} is not a subject of the signed provenance")
        got = _sha256(p)
        if got != want:
            raise ProvenanceError(f"{rel} has sha256 {got}, the signed provenance says {want}: it was changed")
    return stmt


def verify_state(state_path, jsonl, verify_keys):
    """Check a state.json (exact bytes) and the engines it names against signed provenance."""
    stmt = verify_envelopes(jsonl, verify_keys)
    subj = subjects(stmt)
    data = Path(state_path).read_bytes()
    got = hashlib.sha256(data).hexdigest()
    if subj.get("state.json") != got:
        raise ProvenanceError(f"state.json has sha256 {got}, the signed provenance names {subj.get('state.json')}")
    st = json.loads(data)
    for g in st.get("graphs", []):
        e = g.get("engine")
        if not e:
            continue
        name = "engines/%s/%s" % (g["name"], Path(e["file"]).name)
        if subj.get(name) != e["sha256"]:
            raise ProvenanceError(f"the engine of graph {g['name']} is not a subject of the signed provenance")
    return stmt
