"""Small PyTorch modules the recorder and end-to-end tests record."""

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
