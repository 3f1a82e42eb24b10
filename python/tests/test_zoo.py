"""The model-zoo tier: real architectures nobody here wrote, from Debian's torchvision (0.14) and
torchaudio (0.13), random weights (no downloads), through the whole path a user takes:

record (checked against eager by `producer bundle check` on every recorded call) -> embedded submit
(ONNX Runtime on the CPU, one candidate, a short bench) -> `fetch --format aitune` -> tunefleet.load
(AITune's own ait.load) -> outputs through AITune's routing and output rebuilding, with ONNX
Runtime's outputs for the checkpoint's own model, equal to eager on a recorded shape and on a shape
in range that was never recorded.

The tier writes a table (graph specs, record / submit / fetch / load seconds, peak RSS, max abs
error) to $TUNEFLEET_ZOO_REPORT (default: zoo-report.md in pytest's base temp directory) and prints
its path; docs/recording-zoo.md holds a copy.
"""

import dataclasses
import json
import os
import resource
import threading
import time

import pytest

from conftest import need_aitune
from test_e2e import producer

need_aitune()

# The long tier: `make test` runs it only when its inputs changed since it last
# passed (.ci/long-tier), `make test-long` always.
pytestmark = pytest.mark.long

import psutil  # noqa: E402
import torch  # noqa: E402

import models  # noqa: E402
import pipeline  # noqa: E402
import tunefleet  # noqa: E402

torchvision = pytest.importorskip("torchvision") if not os.environ.get("CI") else __import__("torchvision")
torchaudio = pytest.importorskip("torchaudio") if not os.environ.get("CI") else __import__("torchaudio")


@dataclasses.dataclass
class Case:
    name: str
    make: object  # () -> module
    calls: object  # () -> recorded calls (positional tuples)
    unseen: object  # () -> (args, {ONNX input name: shape}, [from-onnx --value ...], int range)
    atol: float = 1e-4
    rtol: float = 1e-3


def images(*batches, side=32):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(b, 3, side, side, generator=g),) for b in batches]


def image_unseen(batch=2, side=32):
    return {"input_x": [batch, 3, side, side]}


def tv(fn, **kw):
    def make():
        torch.manual_seed(0)
        m = fn(weights=None, **kw).eval()
        heads = getattr(m, "heads", None)
        if heads is not None:  # ViT initializes its head to zeros: an all-zero output would compare vacuously
            torch.nn.init.normal_(heads.head.weight, std=0.5)
        return m
    return make


def wav2vec2():
    torch.manual_seed(0)
    return torchaudio.models.wav2vec2_base().eval()


def padded_encoder():
    torch.manual_seed(0)
    return models.PaddedEncoder().eval()


def star_args():
    torch.manual_seed(0)
    return models.StarArgs().eval()


def trailing_dict():
    torch.manual_seed(0)
    return models.TrailingDict().eval()


def ids_calls():
    g = torch.Generator().manual_seed(0)
    return [(torch.randint(0, 32, (b, s), generator=g), {"mask": torch.rand(b, s, generator=g)}) for b, s in ((1, 4), (3, 9))]


CASES = [
    Case("resnet18", tv(torchvision.models.resnet18), lambda: images(1, 3), lambda: image_unseen(2)),
    Case("mobilenet_v3_small", tv(torchvision.models.mobilenet_v3_small), lambda: images(1, 3), lambda: image_unseen(2)),
    Case("efficientnet_b0", tv(torchvision.models.efficientnet_b0), lambda: images(1, 3), lambda: image_unseen(2)),
    Case("vit_b_16", tv(torchvision.models.vit_b_16, image_size=32), lambda: images(1, 3), lambda: image_unseen(2)),
    Case("regnet_y_400mf", tv(torchvision.models.regnet_y_400mf), lambda: images(1, 3), lambda: image_unseen(2)),
    Case("fcn_resnet50", tv(torchvision.models.segmentation.fcn_resnet50, weights_backbone=None), lambda: images(1, 2),
         lambda: {"input_x": [2, 3, 32, 32]}),
    Case("wav2vec2_base", wav2vec2,
         lambda: [(torch.randn(1, 1600, generator=torch.Generator().manual_seed(0)),),
                  (torch.randn(2, 2400, generator=torch.Generator().manual_seed(1)),)],
         lambda: {"input_waveforms": [2, 2000]}),
    Case("TransformerEncoder+mask", padded_encoder, lambda: [models.padded(2, 5, seed=1), models.padded(4, 9, seed=2)],
         lambda: ({"input_x": [3, 7, 16], "input_pad": [3, 7]}, ["input_pad=0"])),
    Case("forward(x, *rest)", star_args,
         lambda: [(torch.randn(1, 4), torch.randn(1, 4)), (torch.randn(4, 4), torch.randn(4, 4))],
         lambda: {"input_x": [3, 4], "input_rest_0": [3, 4]}),
    Case("forward(ids, options)", trailing_dict, ids_calls,
         lambda: ({"input_input_ids": [2, 6], "input_options_mask": [2, 6]}, [], "0..31")),
]

CASES += [
    # MNASNet refuses to load without its state dict version, which AITune's storage drops:
    # tunefleet.load hands it back (the recorder warns that a bare ait.load cannot).
    Case("mnasnet0_5", tv(torchvision.models.mnasnet0_5), lambda: images(1, 3), lambda: image_unseen(2)),
    Case("inception_v3 (aux)", tv(torchvision.models.inception_v3, aux_logits=True, init_weights=False),
         lambda: images(1, 2, side=299), lambda: {"input_x": [3, 3, 299, 299]}),
    Case("densenet121", tv(torchvision.models.densenet121), lambda: images(1, 3), lambda: image_unseen(2)),
    # aten::zero (its attention zeroes a slice of the key bias) has no symbolic at any opset of torch 1.13:
    # the recorder gives it zeros_like for the export
    Case("swin_v2_t", tv(torchvision.models.swin_v2_t), lambda: images(1, 2, side=64), lambda: image_unseen(3, side=64)),
]

# Refused at record time, each with what to do in its message, and nothing written.
REFUSED = [
    # a length the tracer fixed: caught at a length no call had
    ("conv_tasnet", lambda: conv_tasnet(), lambda: [(torch.randn(1, 1, 800),), (torch.randn(1, 1, 1200),)],
     r"wrong at dim2=1001 \(input_input axis 2\).*recorded: 800, 1200.*conv_tasnet\.py:\d+"),
    # torch 1.13's exporter writes a Concat of mismatched ranks for this Emformer at any batch size and opset
    ("emformer", lambda: emformer(), lambda: [emformer_call(1, seed=2), emformer_call(3, seed=1)],
     r"graph 0 \(traced from calls\[1\]\): ONNX Runtime cannot load the exported graph.*Concat.*malformed export"),
]


def conv_tasnet():
    torch.manual_seed(0)
    return torchaudio.models.ConvTasNet(num_sources=2, enc_kernel_size=16, enc_num_feats=32, msk_kernel_size=3,
                                        msk_num_feats=16, msk_num_hidden_feats=32, msk_num_layers=2,
                                        msk_num_stacks=1).eval()


def emformer():
    torch.manual_seed(0)
    return torchaudio.models.Emformer(input_dim=16, num_heads=2, ffn_dim=32, num_layers=2, segment_length=4,
                                      right_context_length=1).eval()


def emformer_call(batch, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, 10, 16, generator=g), torch.full((batch,), 10))


@pytest.mark.parametrize("case", REFUSED, ids=[c[0] for c in REFUSED])
def test_zoo_model_is_refused_at_record_with_what_to_do(tmp_path, case):
    name, make, calls, message = case
    t0 = time.perf_counter()
    with pytest.raises(tunefleet.RecordError, match=message):
        tunefleet.record(make(), "zoo.refused", calls(), tmp_path / "bundle", producer=producer())
    assert not list(tmp_path.iterdir())
    ROWS.append(dict(model=name + " — refused at record", specs="", record=time.perf_counter() - t0, submit=0, fetch=0,
                     load=0, cpu=0, rss=0, err_recorded=None, err_unseen=0.0, scale=0.0))


ROWS = []


class PeakRSS:
    """Samples the RSS of this process and of its children (producer and its ONNX Runtime workers)."""

    def __init__(self):
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            try:
                for p in [me] + me.children(recursive=True):
                    total += p.memory_info().rss
            except psutil.Error:
                pass
            self.peak = max(self.peak, total)
            self._stop.wait(0.05)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


def cpu_seconds():
    """user + system CPU of this process and of its children that have ended (producer runs)."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def specs(bundle):
    m = json.loads((bundle / "bundle.json").read_text())
    parts = []
    for g in m["graphs"]:
        ins = ", ".join(f"{d['name']}{d['shape']}".replace("'", "") for d in g["inputs"])
        outs = ", ".join(f"{d['name']}{d['shape']}".replace("'", "") for d in g["outputs"])
        parts.append(f"{g['name']}: {ins} → {outs}")
    return "; ".join(parts)


@pytest.fixture(scope="module", autouse=True)
def report(tmp_path_factory):
    yield
    if not ROWS:
        return
    path = os.environ.get("TUNEFLEET_ZOO_REPORT") or str(tmp_path_factory.getbasetemp() / "zoo-report.md")
    lines = ["| model | graph specs | record s | submit s | fetch s | load s | CPU s | peak RSS MiB | max abs err (recorded) | max abs err (unseen) | max abs eager (unseen) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in ROWS:
        lines.append(f"| {r['model']} | {r['specs']} | {r['record']:.1f} | {r['submit']:.1f} | {r['fetch']:.1f} | {r['load']:.1f} "
                     f"| {r['cpu']:.0f} | {r['rss'] / 2**20:.0f} | {'within tolerance' if r['err_recorded'] is None else format(r['err_recorded'], '.2e')} | {r['err_unseen']:.2e} | {r['scale']:.2e} |")
    total = sum(r["record"] + r["submit"] + r["fetch"] + r["load"] for r in ROWS)
    cpu = sum(r["cpu"] for r in ROWS)
    lines.append("")
    lines.append(f"{len(ROWS)} models, {total:.0f} s wall in record/submit/fetch/load, {cpu:.0f} CPU s in all "
                 f"(≈ {cpu / 2:.0f} s on 2 idle cores), load average {os.getloadavg()[0]:.1f} at the end; torch {torch.__version__}, "
                 f"torchvision {torchvision.__version__}, torchaudio {torchaudio.__version__}, {os.cpu_count()} CPUs.")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"\nzoo table: {path}")


def unseen_args(case, fed):
    if case.name == "forward(ids, options)":
        return (fed["input_input_ids"], {"mask": fed["input_options_mask"]})
    if case.name == "TransformerEncoder+mask":
        return (fed["input_x"], fed["input_pad"])
    return tuple(fed.values())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_zoo_model_records_tunes_and_loads(tmp_path, case):
    bin_ = producer()
    module = case.make()
    calls = case.calls()
    name = "zoo." + "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in case.name)
    cpu0 = cpu_seconds()
    with PeakRSS() as rss:
        t0 = time.perf_counter()
        checked = {}
        bundle = tunefleet.record(module, name, calls, tmp_path / "bundle", producer=bin_, check_report=checked)
        t_record = time.perf_counter() - t0
        err_recorded = pipeline.max_check_diff(checked)
        ckpt, t_submit, t_fetch = pipeline.tune(bin_, bundle, name, tmp_path)
        t0 = time.perf_counter()
        loaded = pipeline.Loaded(case.make(), ckpt)
        t_load = time.perf_counter() - t0
        unseen = case.unseen()
        shapes, values, ints = (unseen + ([], "0..9")[len(unseen) - 1:]) if isinstance(unseen, tuple) else (unseen, [], "0..9")
        fed, engine = pipeline.ort_outputs(bin_, loaded.model(0), shapes, tmp_path / "ort", values=values, int_range=ints)
        args = unseen_args(case, fed)
        got = loaded.call(0, args, {}, fed, engine)
        with torch.no_grad():
            want = module(*args)
        err_unseen = pipeline.max_abs_err(got, want)
    # Random weights can make outputs tiny (efficientnet's are ~1e-17): errors count relative to the
    # output's own scale, which must not be zero (a zero output would match anything vacuously).
    scale = max(t.abs().max().item() for t in pipeline.leaves(want) if t.numel())
    assert scale > 0, "the eager output is all zeros: the comparison would be vacuous"
    assert (err_recorded is None or err_recorded <= case.atol * max(1.0, scale)) and err_unseen <= case.rtol * scale, (err_recorded, err_unseen, scale)
    ROWS.append(dict(model=case.name, specs=specs(bundle), record=t_record, submit=t_submit, fetch=t_fetch,
                     load=t_load, cpu=cpu_seconds() - cpu0, rss=max(rss.peak, 0), err_recorded=err_recorded, err_unseen=err_unseen, scale=scale))
