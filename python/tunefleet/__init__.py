"""tunefleet's Python side: record a PyTorch module into a bundle, load its tuned checkpoint.

    bundle = tunefleet.record(model, "my_model", calls, "bundle")
    # producer submit bundle ...; producer fetch my_model --format aitune --out ckpt
    model = tunefleet.load(MyModel(), "ckpt")

Recording runs AITune's own `ait.Module` in its recording mode, so the graph
specs, tensor names and routing keys in the bundle are the ones AITune
computes; see record.py.
"""

from tunefleet.errors import RecordError, RecordWarning
from tunefleet.load import load
from tunefleet.record import Call, record

__all__ = ["Call", "RecordError", "RecordWarning", "load", "record"]
