"""Each graph run once more, at sizes inside its dynamic range that no call had, before the bundle ships.

A graph traced from one call can have a size of that call baked in (a length
read as a Python number, a branch taken on one): every recorded call may
still reproduce (they were the tracer's own sizes, or the same ones), and
the engine fails at deploy on a size the ranges allow. So for every dynamic
axis label of a graph (AITune's `batch0`, `dim1`, …), the recorder makes one
probe call: the first recorded call's inputs cut or repeated along that axis
to a size in range that no call had, run through the module (eager, the
module is at hand) and through the exported graph (`producer bundle check`,
ONNX Runtime, as for the recorded calls). A mismatch is a RecordError naming
the axis, the size and the lines torch's tracer warned about.

The probes live in a bundle of their own beside the staging directory and
are never part of the recorded bundle: what was recorded stays what ships.
"""

import dataclasses
import inspect
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

from tunefleet.errors import RecordError
from tunefleet.tensors import write_tensor


@dataclasses.dataclass
class Probe:
    graph: str  # bundle graph name
    spec_name: str  # AITune's graph spec name
    label: str  # the dynamic axis label
    size: int
    recorded: list  # sizes the recorded calls had on that label
    lo: int
    hi: int
    where: list  # ["input_x axis 2", ...]
    inputs: list  # tensors, in the graph's input order
    outputs: list  # eager outputs, in the graph's output order


def _labels(decls):
    """{label: (min, max, [(input index, axis)])} of a graph's dynamic axes."""
    out = {}
    for j, d in enumerate(decls):
        for a, dim in enumerate(d["shape"]):
            if not isinstance(dim, str):
                continue
            lo, hi = d["min_shape"][a], d["max_shape"][a]
            if dim in out:
                plo, phi, axes = out[dim]
                out[dim] = (max(plo, lo), min(phi, hi), axes + [(j, a)])
            else:
                out[dim] = (lo, hi, [(j, a)])
    return out


def _candidates(lo, hi, recorded):
    """Sizes to try, most telling first: odd sizes near the middle, then any other size no call had."""
    mid = (lo + hi) // 2
    order = [mid | 1, mid, (mid | 1) + 2, lo + 1, hi - 1]
    seen = []
    for n in order:
        if lo <= n <= hi and n not in recorded and n not in seen:
            seen.append(n)
    return seen[:3]


def _resize(t, axis, n):
    """t cut or repeated along axis to length n (real values, not random: masks and ids stay valid)."""
    have = t.shape[axis]
    if n <= have:
        return t.narrow(axis, 0, n).contiguous()
    reps = -(-n // have)
    return torch.cat([t] * reps, dim=axis).narrow(axis, 0, n).contiguous()


def make(module, graphs, decls_of):
    """The probes of every graph: graphs is [(spec, [((args, kwargs), outputs)])], decls_of(index) -> (inputs, outputs) decls."""
    from tunefleet.export import rebuild
    from tunefleet.record import _detached
    from tunefleet import structure

    probes = []
    for gi, (spec, runs) in enumerate(graphs):
        in_decls, _ = decls_of(gi)
        labels = _labels(in_decls)
        if not labels:
            continue
        locs = [loc for loc, _ in spec.input_spec.tensor_data]
        paths = [tuple(k for k, _ in loc._access_path) for loc in locs]
        out_locs = [loc for loc, _ in spec.output_spec.tensor_data]
        bounds = [spec.forward_signature.normalize(a, k) for (a, k), _ in runs]
        values = [[loc.get_value(b.arguments) for loc in locs] for b in bounds]
        skeleton = structure.skeleton(runs[0][1])
        for label, (lo, hi, axes) in labels.items():
            if lo >= hi:
                continue
            recorded = sorted({v[j].shape[a] for v in values for j, a in axes})
            for n in _candidates(lo, hi, recorded):
                new = list(values[0])
                for j, a in axes:
                    new[j] = _resize(new[j], a, n)
                arguments = rebuild(dict(bounds[0].arguments), (), dict(zip(paths, new)))
                bound = inspect.BoundArguments(bounds[0].signature, arguments)
                try:
                    with torch.enable_grad():
                        out = _detached(module(*bound.args, **bound.kwargs))
                    if structure.skeleton(out) != skeleton:
                        continue
                    outs = [loc.get_value(out) for loc in out_locs]
                except Exception:
                    # The module itself does not take this size (a stride, a fixed table):
                    # not the graph's fault; try another.
                    continue
                if not all(isinstance(o, torch.Tensor) for o in outs):
                    continue
                where = [f"{in_decls[j]['name']} axis {a}" for j, a in axes]
                probes.append(Probe(str(gi), spec.name, label, n, recorded, lo, hi, where, new, outs))
                break
    return probes


def check(binary, stage, probes, tracer_lines):
    """Run the probes through their graphs with `producer bundle check`; RecordError on the first that fails.

    tracer_lines: {bundle graph name: ["file.py:123: message", ...]} from the export.
    """
    if binary is None or not probes:
        return
    manifest = json.loads((stage / "bundle.json").read_text())
    pdir = Path(tempfile.mkdtemp(prefix=".probe.", dir=stage.parent))
    try:
        graphs, index = [], []
        for g in manifest["graphs"]:
            mine = [p for p in probes if p.graph == g["name"]]
            if not mine:
                continue
            gdir = pdir / "graphs" / g["name"]
            gdir.mkdir(parents=True)
            src = stage / g["onnx"]
            for f in [src, src.with_name(src.name + ".data")]:
                if f.exists():
                    _link(f, gdir / f.name)
            samples = []
            for k, p in enumerate(mine):
                sdir = gdir / "samples" / str(k)
                sdir.mkdir(parents=True)
                for j, t in enumerate(p.inputs):
                    write_tensor(sdir / f"input_{j}.pb", t)
                for j, t in enumerate(p.outputs):
                    write_tensor(sdir / f"output_{j}.pb", t)
                samples.append(f"graphs/{g['name']}/samples/{k}")
                index.append((g["name"], k, p))
            graphs.append({**g, "onnx": f"graphs/{g['name']}/{src.name}", "samples": samples})
        probe_manifest = {k: v for k, v in manifest.items() if k not in ("graphs", "aitune")}
        probe_manifest["model"] = manifest["model"]
        probe_manifest["graphs"] = graphs
        (pdir / "bundle.json").write_text(json.dumps(probe_manifest, indent=2) + "\n")
        try:
            res = subprocess.run([binary, "bundle", "check", "-o", "json", str(pdir)], capture_output=True, text=True)
        except OSError as e:
            raise RecordError(f"cannot run the producer binary {binary!r} to check the bundle: {e}") from e
        if res.returncode == 0:
            return
        try:
            report = json.loads(res.stdout)
        except ValueError:
            report = None
        if not report or report.get("ok") is not False or not report.get("graphs"):
            raise RecordError(f"producer bundle check of the unrecorded-size probes failed (exit {res.returncode}): "
                              f"{(res.stderr.strip() or res.stdout.strip())[:500]}")
        by_graph = {g["name"]: r for g, r in zip(graphs, report["graphs"])}
        for gname, k, p in index:
            r = by_graph.get(gname)
            if r is None:
                continue
            if r.get("error"):
                s = {"error": r["error"]}
            else:
                s = r["samples"][k]
            if s.get("ok", not s.get("error") and not s.get("outputs")):
                continue
            raise RecordError(_explain(p, s, tracer_lines.get(gname, [])))
    finally:
        shutil.rmtree(pdir, ignore_errors=True)


def _explain(p, s, lines):
    from tunefleet.record import _ort_message

    if s.get("error"):
        what = f"ONNX Runtime cannot run it there: {_ort_message(s['error'])}"
    else:
        bad = s["outputs"][0]
        what = f"{bad['output']}: {bad['message'][:300]}"
    rec = ", ".join(map(str, p.recorded))
    msg = (f"graph {p.spec_name}: the exported graph is wrong at {p.label}={p.size} ({', '.join(p.where)}), a size inside "
           f"the recorded range {p.lo}..{p.hi} that no call had (recorded: {rec}); eager runs it, the graph does not — "
           f"{what}. The tracer baked a value of the traced call into the graph, so the engine would fail at deploy on "
           f"such sizes. ")
    if lines:
        msg += "torch's tracer warned at: " + "; ".join(lines[:5]) + ". "
    msg += ("Compute sizes with tensor operations there (x.shape[i] stays symbolic; int(), .item(), math on sizes do "
            "not), or record with that axis fixed (dynamic_shapes) so the engine refuses other sizes")
    return msg


def _link(src, dst):
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
