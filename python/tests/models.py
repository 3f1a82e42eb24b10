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


class CurrentModelOutput(collections.OrderedDict):
    """transformers.utils.ModelOutput as current transformers writes it (4.4x): the parts a checkpoint meets,
    among them its own __reduce__, which passes the dataclass fields to the class (so pickle gives
    Class(*fields), then items and state, not an OrderedDict's Class())."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.__class__ != CurrentModelOutput and not dataclasses.is_dataclass(self):
            raise TypeError(f"{self.__module__}.{self.__class__.__name__} is not a dataclass")

    def __post_init__(self):
        class_fields = dataclasses.fields(self)
        first_field = getattr(self, class_fields[0].name)
        other_fields_are_none = all(getattr(self, f.name) is None for f in class_fields[1:])
        if other_fields_are_none and not isinstance(first_field, torch.Tensor):
            if isinstance(first_field, dict):
                iterator, first_field_iterator = first_field.items(), True
            else:
                try:
                    iterator, first_field_iterator = iter(first_field), True
                except TypeError:
                    first_field_iterator = False
            if first_field_iterator:
                for idx, element in enumerate(iterator):
                    if not isinstance(element, (list, tuple)) or len(element) != 2 or not isinstance(element[0], str):
                        if idx == 0:
                            self[class_fields[0].name] = first_field
                        else:
                            raise ValueError(f"Cannot set key/value for {element}")
                        break
                    setattr(self, element[0], element[1])
                    if element[1] is not None:
                        self[element[0]] = element[1]
            elif first_field is not None:
                self[class_fields[0].name] = first_field
        else:
            for f in class_fields:
                v = getattr(self, f.name)
                if v is not None:
                    self[f.name] = v

    def __delitem__(self, *args, **kwargs):
        raise Exception(f"You cannot use ``__delitem__`` on a {self.__class__.__name__} instance.")

    def setdefault(self, *args, **kwargs):
        raise Exception(f"You cannot use ``setdefault`` on a {self.__class__.__name__} instance.")

    def pop(self, *args, **kwargs):
        raise Exception(f"You cannot use ``pop`` on a {self.__class__.__name__} instance.")

    def update(self, *args, **kwargs):
        raise Exception(f"You cannot use ``update`` on a {self.__class__.__name__} instance.")

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __reduce__(self):
        if not dataclasses.is_dataclass(self):
            return super().__reduce__()
        callable, _args, *remaining = super().__reduce__()
        args = tuple(getattr(self, f.name) for f in dataclasses.fields(self))
        return callable, args, *remaining

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class DepthOutput(CurrentModelOutput):
    predicted_depth: torch.Tensor = None
    hidden_states: tuple = None
    attentions: tuple = None


class CurrentModelOutputOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        y = self.lin(x)
        return DepthOutput(predicted_depth=y, hidden_states=(y * 2,))
