"""tunefleet.record: AITune's recording mode, then a bundle (README "Bundle format").

The module is wrapped with AITune's `ait.Module` and called once per call in
recording mode, with the call's batch size in AITune's global context (what
`ait.tune` does for each batch of its dataset), with gradients enabled as
AITune's exporter has them (export.py) and outputs detached. AITune
decides the graph specs: which calls share a graph, shape labels
(`batch0`/`dim1`), min/max shapes, batch multipliers. Each graph spec is then
exported to ONNX and every call becomes a sample of its graph: its inputs and
the module's own (eager) outputs as reference outputs.

The bundle is written in a staging directory beside `out_dir` and renamed
into place only when it is complete and (when the `producer` binary is
found) validated and checked: every recorded call is run through its
exported graph with ONNX Runtime and compared with the eager outputs
(`producer bundle check`). An error leaves nothing behind.
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

from tunefleet import probe, structure
from tunefleet.errors import RecordError, RecordWarning
from tunefleet.export import export_graph
from tunefleet.tensors import write_tensor

BUNDLE_FORMAT = "tunefleet.bundle/v1"
BLOCK_FORMAT = "aitune.block/v1"


@dataclasses.dataclass
class Call:
    """One call of the module: module(*args, **kwargs).

    batch_size is the value AITune's global context holds during the call
    (ait.tune sets it from its DataLoader); None means the size of axis 0 of
    the call's first tensor argument.
    """

    args: tuple = ()
    kwargs: dict = dataclasses.field(default_factory=dict)
    batch_size: int | None = None


def _as_call(c, i):
    if isinstance(c, Call):
        return c
    if isinstance(c, tuple):
        return Call(args=c)
    if isinstance(c, torch.Tensor):
        return Call(args=(c,))
    raise RecordError(f"calls[{i}] is a {type(c).__qualname__}: give a tunefleet.Call, a tuple of positional arguments or a tensor")


def _is_default(param, value):
    """value is param's default: a None, bool, int, float or str default, the same type and equal."""
    if param is None or param.default is inspect.Parameter.empty:
        return False
    d = param.default
    return (d is None and value is None) or (
        isinstance(d, (bool, int, float, str)) and type(value) is type(d) and value == d)


def _without_defaults(sig, call):
    """call with the arguments that only repeat a default left out (trailing positionals, keywords).

    AITune keys a graph on every non-tensor argument it is given (strict
    mode), and binds without applying defaults: m(x, scale=1.0) and m(x)
    would be two graphs, each from fewer calls (fixed shapes). An argument
    equal to its default is the same call, so it is recorded as omitted: one
    graph. At deploy AITune routes a module with one graph to it whatever
    the arguments; with several, the omitted form is the one that routes.
    """
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    kwargs = {k: v for k, v in call.kwargs.items() if not _is_default(sig.parameters.get(k), v)}
    args = list(call.args)
    while args and len(args) <= len(positional) and _is_default(positional[len(args) - 1], args[-1]):
        args.pop()
    if len(args) == len(call.args) and len(kwargs) == len(call.kwargs):
        return call
    return Call(args=tuple(args), kwargs=kwargs, batch_size=call.batch_size)


def _first_tensor(obj):
    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        for v in obj:
            t = _first_tensor(v)
            if t is not None:
                return t
    return None


def _check_name(name):
    if not isinstance(name, str) or not name:
        raise RecordError(f"name must be a non-empty string, got {name!r}")
    if "/" in name:
        raise RecordError(f"name {name!r} contains '/': AITune names modules and checkpoints without '/' (use '_' or '.')")
    if name in (".", "..") or any(ord(ch) < 32 for ch in name):
        raise RecordError(f"name {name!r} is not usable as a checkpoint folder name")


def record(module, name, calls, out_dir, dynamic_shapes=None, *, producer=None, check_report=None):
    """Record `module` over `calls` and write a tunefleet bundle to `out_dir` (which must not exist).

    calls: an iterable of tunefleet.Call, tuples of positional arguments, or tensors.
    dynamic_shapes: AITune's explicit dynamic shapes ({path: (int | ait.DynamicDim | ait.BatchDim, ...)}).
    producer: path of the `producer` binary that validates the bundle and checks that every graph
    reproduces every recorded call (`producer bundle check`: ONNX Runtime on the CPU); None looks for
    $TUNEFLEET_PRODUCER, then `producer` on PATH (no binary: not checked); False skips the check.

    check_report: a dict that, when given, receives `producer bundle check -o json`'s report (every
    sample's outputs with their largest |graph - eager| difference).

    Returns the bundle directory. Raises RecordError for bad input.
    """
    _check_name(name)
    if not isinstance(module, torch.nn.Module):
        raise RecordError(f"module must be a torch.nn.Module, got {type(module).__qualname__}")
    calls = [_as_call(c, i) for i, c in enumerate(calls)]
    if not calls:
        raise RecordError("calls is empty: record needs at least one call of the module")
    out_dir = Path(out_dir)
    if out_dir.exists() or out_dir.is_symlink():
        raise RecordError(f"{out_dir} already exists: remove it or choose another output directory")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        graphs, probes, tracer = _record_into(module, name, calls, stage, dynamic_shapes)
        report = _check(stage, producer, graphs)
        if check_report is not None and report is not None:
            check_report.update(report)
        probe.check(_producer_binary(producer), stage, probes, tracer)
        os.rename(stage, out_dir)
    except RecordError:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    except Exception as e:
        # A safety net: what the steps above did not foresee is still the
        # recorder's one error type, with what failed.
        shutil.rmtree(stage, ignore_errors=True)
        raise RecordError(f"recording {name!r} failed: {type(e).__name__}: {_short(e)}") from e
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return out_dir


def _record_into(module, name, calls, stage, dynamic_shapes):
    import aitune.torch as ait
    from aitune.exceptions import AITuneUserInputError
    from aitune.global_context import BATCH_SIZE_KEY, global_context
    from aitune.torch.config import config
    from aitune.torch.module_registry import MODULE_REGISTRY
    from aitune.torch.module.sample_metadata import SampleMetadata

    had_forward = "forward" in module.__dict__
    # The defaults' values (AITune's ForwardSignature keeps only whether there is one).
    try:
        defaults = inspect.signature(module.forward)
    except (TypeError, ValueError):
        defaults = inspect.Signature()
    try:
        wrapped = ait.Module(module, name=name, dynamic_shapes=dynamic_shapes)
    except (AITuneUserInputError, ValueError, TypeError) as e:
        raise RecordError(f"dynamic_shapes: {e}") from e
    try:
        wrapped.enable_recording()
        recording = wrapped.module
        signature = recording.forward_signature
        per_call = []  # (graph spec, normalized (args, kwargs), outputs)
        for i, call in enumerate(calls):
            try:
                bound = signature.normalize(call.args, call.kwargs)
            except TypeError as e:
                raise RecordError(f"calls[{i}] does not fit {type(module).__qualname__}.forward: {e}") from e
            call = _without_defaults(defaults, call)
            bound = signature.normalize(call.args, call.kwargs)
            bs = call.batch_size
            if bs is None:
                first = _first_tensor(bound.arguments)
                if first is None or first.dim() == 0:
                    raise RecordError(f"calls[{i}] has no tensor argument with a batch axis 0: give Call(..., batch_size=N)")
                bs = first.shape[0]
            key = SampleMetadata.from_inputs(bound.arguments, strict=config.strict_mode)
            with global_context:
                global_context.set(BATCH_SIZE_KEY, bs)
                try:
                    # Gradients as the exporter has them (export.py): the
                    # references are then the function the graph computes.
                    with torch.enable_grad():
                        out = _detached(wrapped(*call.args, **call.kwargs))
                except AITuneUserInputError as e:
                    raise RecordError(f"calls[{i}]: {e}") from e
                except ValueError as e:
                    if "Cannot update shapes seen" not in str(e):
                        raise RecordError(f"calls[{i}]: {type(module).__qualname__}.forward raised {type(e).__name__}: {_short(e)}") from e
                    first_i = next(j for j, (s, _, _) in enumerate(per_call) if s.input_spec == key)
                    raise RecordError(
                        f"calls[{first_i}] and calls[{i}] take the same inputs (AITune graph "
                        f"{recording._graph_specs[key].name}) but return differently structured outputs; "
                        f"one graph must always return the same tensors at the same places, with the same ranks"
                    ) from e
                except RecordError:
                    raise
                except Exception as e:
                    raise RecordError(f"calls[{i}]: {type(module).__qualname__}.forward raised {type(e).__name__}: {_short(e)}") from e
            spec = recording._graph_specs[key]
            per_call.append((spec, (bound.args, bound.kwargs), out))
        try:
            recording.validate_dynamic_shape_paths_recorded()
        except AITuneUserInputError as e:
            raise RecordError(f"dynamic_shapes: {e}") from e
        graphs = []  # (spec, [(sample, outputs)])
        for spec, sample, out in per_call:
            entry = next((g for g in graphs if g[0] is spec), None)
            if entry is None:
                entry = (spec, [])
                graphs.append(entry)
            entry[1].append((sample, out))
        # Checks first (no export work for a recording that cannot be written).
        blocks = {}
        for index, (spec, runs) in enumerate(graphs):
            first = structure.graph_block(spec, runs[0][1])
            for k, (_, out) in enumerate(runs[1:], start=1):
                if structure.skeleton(out) != first["output_skeleton"]:
                    i0 = _index_of(per_call, runs[0][1])
                    ik = _index_of(per_call, out)
                    raise RecordError(
                        f"calls[{i0}] and calls[{ik}] take the same inputs (AITune graph {spec.name}) but return "
                        f"different non-tensor output values or containers: {first['output_skeleton']} vs "
                        f"{structure.skeleton(out)}; AITune rebuilds every output from the first one"
                    )
            if not spec.output_spec.tensor_data:
                raise RecordError(f"graph {spec.name}: the module returned no tensor; there is nothing to tune")
            blocks[str(index)] = first
    finally:
        _unwrap(module, wrapped, had_forward, MODULE_REGISTRY, name)
    manifest, tracer = _write_bundle(module, name, graphs, blocks, stage, dynamic_shapes)
    _warn_fixed(graphs, manifest, per_call)
    probes = probe.make(module, graphs, lambda i: (manifest["graphs"][i]["inputs"], manifest["graphs"][i]["outputs"]))
    checked = [(spec, [_index_of(per_call, out) for _, out in runs], _traced(spec, runs)) for spec, runs in graphs]
    return checked, probes, tracer


def _warn_fixed(graphs, manifest, per_call):
    """A graph from one call has every shape fixed, batch included: say so, and which axis could have varied."""
    import warnings

    for (spec, runs), g in zip(graphs, manifest["graphs"]):
        if len(runs) > 1 or any(isinstance(d, str) for t in g["inputs"] for d in t["shape"]):
            continue
        i = _index_of(per_call, runs[0][1])
        shapes = ", ".join(f"{t['name']} {t['shape']}" for t in g["inputs"][:4])
        warnings.warn(RecordWarning(
            f"graph {spec.name} was recorded from one call (calls[{i}]): its shapes are fixed, batch included "
            f"({shapes}), and its engine refuses any other; record calls of two batch sizes (axis 0 of "
            f"{g['inputs'][0]['name'] if g['inputs'] else 'the first input'}) or give dynamic_shapes to let them vary"),
            stacklevel=4)


def _short(e, n=600):
    s = str(e).strip()
    return s if len(s) <= n else s[:n] + "…"


def _detached(obj):
    """obj with every tensor detached, containers kept (the autograd graph is not kept alive)."""
    from tunefleet.export import rebuild
    from aitune.torch.module.locator import Locator

    leaves = {tuple(k for k, _ in loc._access_path): v.detach()
              for loc, v in Locator.find_leaves(obj, only_tensors=True) if v.requires_grad}
    return rebuild(obj, (), leaves) if leaves else obj


def _index_of(per_call, out):
    return next(i for i, (_, _, o) in enumerate(per_call) if o is out)


def _unwrap(module, wrapped, had_forward, registry, name):
    """Give the user's module back as it was: original forward, no registry entry."""
    if had_forward:
        module.forward = wrapped._self_orig_forward
    else:
        module.__dict__.pop("forward", None)
    registry.unregister(name)


def _input_shapes(spec, sample):
    bound = spec.forward_signature.normalize(*sample)
    return [tuple(loc.get_value(bound.arguments).shape) for loc, _ in spec.input_spec.tensor_data]


def _traced(spec, runs):
    """Which of a graph's calls to trace: the most general one (fewest size-1 axes, then the largest sizes).

    The tracer specializes what it sees: a size-1 axis can become a broadcast
    or a squeeze that is wrong for every other size, while a graph traced from
    the most general call serves the smaller ones. Ties keep the first call.
    """
    def generality(k):
        dims = [n for sh in _input_shapes(spec, runs[k][0]) for n in sh]
        return (sum(n != 1 for n in dims), sum(dims))

    return max(range(len(runs)), key=lambda k: (generality(k), -k))


def _write_bundle(module, name, graphs, blocks, stage, dynamic_shapes):
    versions = structure.module_versions(module)
    structure.check_loadable(module, versions)
    manifest_graphs = []
    tracer = {}
    for index, (spec, runs) in enumerate(graphs):
        g = str(index)
        gdir = stage / "graphs" / g
        gdir.mkdir(parents=True)
        tracer[g] = export_graph(module, spec, runs[_traced(spec, runs)][0], gdir / "model.onnx")
        samples = []
        for k, ((args, kwargs), out) in enumerate(runs):
            sdir = gdir / "samples" / str(k)
            sdir.mkdir(parents=True)
            bound = spec.forward_signature.normalize(args, kwargs)
            for j, (loc, _) in enumerate(spec.input_spec.tensor_data):
                write_tensor(sdir / f"input_{j}.pb", loc.get_value(bound.arguments))
            for j, (loc, _) in enumerate(spec.output_spec.tensor_data):
                write_tensor(sdir / f"output_{j}.pb", loc.get_value(out))
            samples.append(f"graphs/{g}/samples/{k}")
        manifest_graphs.append({
            "name": g,
            "onnx": f"graphs/{g}/model.onnx",
            "inputs": structure.tensor_decls(spec.input_spec, "input"),
            "outputs": structure.tensor_decls(spec.output_spec, "output"),
            "samples": samples,
        })
    manifest = {"format": BUNDLE_FORMAT, "model": name}
    ds = structure.bundle_dynamic_shapes(dynamic_shapes)
    if ds:
        manifest["dynamic_shapes"] = ds
    manifest["graphs"] = manifest_graphs
    signature = graphs[0][0].forward_signature
    manifest["aitune"] = {
        "format": BLOCK_FORMAT,
        "name": name,
        "forward_signature": signature.to_dict(),
        "graphs": blocks,
    }
    if versions:
        manifest["aitune"]["module_versions"] = versions
    (stage / "bundle.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest, tracer


def _producer_binary(producer):
    if producer is False:
        return None
    if producer:
        return str(producer)
    return os.environ.get("TUNEFLEET_PRODUCER") or shutil.which("producer")


def _check(stage, producer, graphs):
    """`producer bundle check`: the bundle is valid and every graph reproduces every recorded call.

    The check runs each sample through its exported graph with ONNX Runtime
    (CPU, optimizations off) and compares with the eager outputs under the
    correctness check's tolerances, as a worker would; a graph that fails
    here would fail on every worker.
    graphs: [(AITune GraphSpec, [call index of each sample])] in bundle order.
    """
    binary = _producer_binary(producer)
    if binary is None:
        return
    try:
        res = subprocess.run([binary, "bundle", "check", "-o", "json", str(stage)], capture_output=True, text=True)
    except OSError as e:
        raise RecordError(f"cannot run the producer binary {binary!r} to check the bundle: {e}") from e
    try:
        report = json.loads(res.stdout)
    except ValueError:
        report = None
    if res.returncode == 0:
        return report
    if report is not None and report.get("ok") is False and report.get("graphs"):
        raise RecordError(_explain(report, graphs, stage))
    what = {2: "rejected the bundle", 3: "could not run ONNX Runtime"}.get(res.returncode, "failed")
    raise RecordError(f"producer bundle check {what} (exit {res.returncode}): {_short(res.stderr.strip() or res.stdout.strip())}")


def _graph_ops(stage, gi):
    """The operator types of bundle graph gi's exported ONNX graph (its proto only, no weights)."""
    import onnx

    try:
        model = onnx.load(str(stage / "graphs" / str(gi) / "model.onnx"), load_external_data=False)
    except Exception:
        return set()
    return {n.op_type for n in model.graph.node}


def _cause_from_graph(stage, gi, error):
    """A cause that the exported graph itself shows, more telling than the generic one, or ""."""
    ops = _graph_ops(stage, gi)
    dynamic = sorted(ops & {"NonMaxSuppression", "NonZero"})
    if dynamic:
        return (f"the graph has outputs whose size depends on the data ({', '.join(dynamic)}): detection "
                f"post-processing (box selection, non-maximum suppression) does not export to a graph that "
                f"reproduces eager; record the network without it (the backbone and head, returning raw boxes and "
                f"scores, as torchvision's model.backbone and model.head give them) and run the post-processing "
                f"in Python")
    if error and "Where node" in error and "broadcast" in error:
        return ("a Where whose operands ONNX Runtime cannot broadcast: an indexed assignment with a mask (x[mask] = v, "
                "as wav2vec2/HuBERT do with lengths) exports that way; write it as torch.where(mask[..., None], v, x), "
                "or record without the mask (equal lengths, no lengths argument)")
    return ""


def _explain(report, graphs, stage):
    """The first failing call of the check report, named as the user knows it."""
    from aitune.torch.utils.tensor import format_tensor_name

    for gi, g in enumerate(report["graphs"]):
        spec, call_of, tk = graphs[gi]
        traced = call_of[tk]
        if g.get("error"):
            return (f"graph {spec.name} (traced from calls[{traced}]): ONNX Runtime cannot load the exported graph: "
                    f"{_short(g['error'])}" + (f" ({g['cause']})" if g.get("cause") else ""))
        display = {format_tensor_name(loc.path, "output"): loc.display_path for loc, _ in spec.output_spec.tensor_data}
        traced_ok = _sample_ok(g["samples"][tk]) if len(g["samples"]) > tk else False
        # The traced call's own failure first: it is the graph's, not a size's.
        order = [tk] + [k for k in range(len(g["samples"])) if k != tk] if len(g["samples"]) > tk else range(len(g["samples"]))
        for k in order:
            s = g["samples"][k]
            if _sample_ok(s):
                continue
            i = call_of[k]
            if k != tk and traced_ok:
                cause = (f"the graph reproduces calls[{traced}], the call it was traced from, but not calls[{i}]: the tracer "
                         f"baked a value of calls[{traced}] into the graph, most likely a shape (a size read as a Python "
                         f"number: int(x.shape[1]), x.size(1) in arithmetic, .item(), .tolist(), len(x), or a data-dependent "
                         f"length) or a branch taken on one. Compute it with tensor operations, or fix that axis "
                         f"with dynamic_shapes")
            else:
                cause = _cause_from_graph(stage, gi, s.get("error")) or (
                    f"the graph does not reproduce calls[{traced}], the call it was traced from: an operation "
                    f"torch.onnx exports differently from eager (randomness, an in-place update of an input, "
                    f"a non-deterministic op)")
            if s.get("error"):
                return f"calls[{i}] (graph {spec.name}): ONNX Runtime cannot run the exported graph: {_ort_message(s['error'])}; {cause}"
            bad = s["outputs"][0]
            where = display.get(bad["output"], bad["output"])
            return f"calls[{i}] (graph {spec.name}), {where} ({bad['output']}): {_short(bad['message'], 400)}; {cause}"
    return "producer bundle check failed without naming a call"


def _ort_message(err):
    """ONNX Runtime's run error without its source paths: the node and what it said."""
    import re

    m = re.search(r"running (\w+) node\. Name:'([^']*)' Status Message: (.*)", err, re.S)
    if not m:
        return _short(err, 500)
    op, node, status = m.groups()
    status = re.sub(r"^\S+\.(h|cc):\d+ .*? was false\. ", "", status.strip(), flags=re.S)
    return f"{op} node {node!r}: {_short(status, 400)}"


def _sample_ok(s):
    return s.get("ok", not s.get("error") and not s.get("outputs"))
