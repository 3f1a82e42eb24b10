"""Small PyTorch modules the recorder and end-to-end tests record."""

import collections
import dataclasses

import torch
from torch import nn


class TwoGraphs(nn.Module):
    """forward(x, mask=None, *, scale=1.0) -> {"y": t, "n": (t, 3)}.

    Called as m(x, mask) it is one AITune graph, as m(x, scale=2.0) another
    (a different set of tensors, and a non-tensor routing key).
    """

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 4)

    def forward(self, x, mask=None, *, scale=1.0):
        y = self.lin(x) * scale
        if mask is not None:
            y = y * mask
        return {"y": y, "n": (torch.tanh(y), 3)}


def two_graphs(seed=0):
    torch.manual_seed(seed)
    return TwoGraphs().eval()


def two_graph_calls(seed=1):
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(1, 8, generator=g), torch.rand(1, 4, generator=g)),
        (torch.randn(4, 8, generator=g), torch.rand(4, 4, generator=g)),
        ((torch.randn(2, 8, generator=g),), {"scale": 2.0}),
    ]


class GrowingTuple(nn.Module):
    """Returns one more tensor for a bigger batch: same inputs, another output structure."""

    def forward(self, x):
        return tuple(x * i for i in range(x.shape[0] + 1))


class CountingOutput(nn.Module):
    """Returns the batch size as a Python int next to the tensor."""

    def forward(self, x):
        return x * 2, int(x.shape[0])


@dataclasses.dataclass
class Result:
    logits: torch.Tensor


class DataclassOutput(nn.Module):
    def forward(self, x):
        return Result(logits=x + 1)


class ObjectLeaf(nn.Module):
    def forward(self, x):
        return {"y": x + 1, "device": x.device}


class IgnoresArgument(nn.Module):
    """Takes a tensor it never reads: the ONNX export drops that input."""

    def forward(self, x, unused):
        return x * 2


class TransformerLayer(nn.Module):
    """nn.TransformerEncoderLayer: under no_grad torch takes its fused fast path (not exportable)."""

    def __init__(self, d=16):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d, 2, 32, batch_first=True)

    def forward(self, x):
        return self.layer(x)


class MaskedAttention(nn.Module):
    """nn.MultiheadAttention with a bool key_padding_mask (True = padding)."""

    def __init__(self, d=16):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, 2, batch_first=True)

    def forward(self, x, pad):
        y, _ = self.attn(x, x, x, key_padding_mask=pad, need_weights=False)
        return y


class PaddedEncoder(nn.Module):
    """nn.TransformerEncoder with a padding mask (dynamic batch and sequence length)."""

    def __init__(self, d=16, layers=2):
        super().__init__()
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 2, 32, batch_first=True), layers)

    def forward(self, x, pad):
        return self.enc(x, src_key_padding_mask=pad)


def padded(batch, seq, d=16, seed=0):
    """(x, pad): row i has i % seq padded positions at its end."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, seq, d, generator=g)
    pad = torch.zeros(batch, seq, dtype=torch.bool)
    for i in range(batch):
        k = i % seq
        if k:
            pad[i, seq - k:] = True
    return x, pad


class TrailingDict(nn.Module):
    """forward(input_ids, options): the last argument a dict of tensors (AITune's own examples)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(32, 8)

    def forward(self, input_ids, options):
        return self.emb(input_ids) * options["mask"][..., None]


class StarArgs(nn.Module):
    """forward(x, *rest)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, *rest):
        y = self.lin(x)
        for r in rest:
            y = y + r
        return y


class VarKeywords(nn.Module):
    """forward(x, *, scale=1.0, **extra): keyword-only with a default, and **kwargs of tensors."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, *, scale=1.0, **extra):
        y = self.lin(x) * scale
        for k in sorted(extra):
            y = y + extra[k]
        return y


class MixedLeaves(nn.Module):
    """A dict argument holding a tensor and non-tensor leaves (a flag, a None)."""

    def forward(self, x, cfg):
        y = x * 2 if cfg["double"] else x
        return y + cfg["bias"] if cfg["extra"] is None else y


class BakedLength(nn.Module):
    """Reads the length as a Python int: the tracer bakes the traced call's length into a Reshape."""

    def forward(self, x):
        n = int(x.shape[1])
        return x.reshape(x.shape[0], 1, 1, n) * 2


Pair = collections.namedtuple("Pair", ["logits", "count"])


class NamedTupleOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        return Pair(self.lin(x), 3)


class OrderedDictOut(nn.Module):
    """What torchvision's segmentation models return: OrderedDict([("out", t), ("aux", t)])."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        y = self.lin(x)
        return collections.OrderedDict([("out", y), ("aux", torch.tanh(y))])


@dataclasses.dataclass
class SegOutput(collections.OrderedDict):
    """A Hugging Face ModelOutput in miniature: a dataclass and an OrderedDict whose items are its set fields."""

    logits: torch.Tensor = None
    hidden: torch.Tensor = None

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is not None:
                self[f.name] = v

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)


class ModelOutputOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        y = self.lin(x)
        return SegOutput(logits=y, hidden=y * 2)
