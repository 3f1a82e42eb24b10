"""README "Record a PyTorch module": record a small MLP into mlp-bundle/ (in the current directory)."""

import torch
import tunefleet


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(64, 10)

    def forward(self, x):
        return torch.relu(self.lin(x))


torch.manual_seed(0)
model = MLP().eval()
calls = [(torch.randn(1, 64),), (torch.randn(8, 64),)]  # batch 1 and 8: AITune labels axis 0 "batch0"
tunefleet.record(model, "demo.MLP", calls, "mlp-bundle")
