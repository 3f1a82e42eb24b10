"""`pip install ./python` brings every runtime dependency of tunefleet: each third-party module that
tunefleet/ imports (at the top or inside a function) is a dependency in pyproject.toml, except AITune
itself, which is installed beside it from its own source (pyproject.toml says why)."""

import ast
import pathlib
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
# import name -> distribution name, where they differ
DIST = {"yaml": "pyyaml"}
NOT_FROM_PYPI = {"aitune"}


def imported_modules():
    found = {}
    for path in sorted((ROOT / "tunefleet").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for n in names:
                found.setdefault(n.split(".")[0], path.name)
    return found


def test_every_third_party_import_is_a_dependency():
    deps = {d.split(";")[0].split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower()
            for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    stdlib = set(sys.stdlib_module_names)
    missing = {m: where for m, where in imported_modules().items()
               if m not in stdlib and m != "tunefleet" and m not in NOT_FROM_PYPI and DIST.get(m, m).lower() not in deps}
    assert not missing, f"imported by tunefleet/ but not in pyproject.toml's dependencies: {missing}"
