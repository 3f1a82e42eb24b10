"""The repository's JSON Schemas (schemas/*.schema.json), for the recorder's tests.

The same files the Go side validates with (package schemas). Debian 12's
jsonschema is 4.10, which has Draft202012Validator but not the `referencing`
library of 4.18+: the cross-file $ref (bundle.json's `aitune` field names
aitune-block.schema.json) is resolved through RefResolver's store, keyed by
each schema's $id.
"""

import json
import warnings

from oracle_env import REPO

SCHEMAS = REPO / "schemas"


def _load():
    return {p.name: json.loads(p.read_text()) for p in sorted(SCHEMAS.glob("*.schema.json"))}


def validator(name):
    """A draft 2020-12 validator of schemas/NAME (e.g. "bundle.schema.json")."""
    import jsonschema

    docs = _load()
    schema = docs[name]
    jsonschema.Draft202012Validator.check_schema(schema)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # RefResolver: gone from 4.18's API, not from 4.10
        resolver = jsonschema.RefResolver.from_schema(schema, store={d["$id"]: d for d in docs.values()})
    return jsonschema.Draft202012Validator(schema, resolver=resolver, format_checker=jsonschema.FormatChecker())


def problems(name, doc):
    """Every schema violation of doc, as "path: message" lines (empty when valid)."""
    return ["/".join(str(p) for p in e.absolute_path) + ": " + e.message for e in validator(name).iter_errors(doc)]
