"""CPU test stand-in for NVIDIA's nvtx package: annotations are no-ops."""

from nvtx.nvtx import annotate, mark, pop_range, push_range  # noqa: F401
