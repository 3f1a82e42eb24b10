"""Test oracle for package pickle: what Python itself writes.

Reads a JSON list of Python expressions on stdin, evaluates each, and prints
a JSON list with, for each, the hex of
pickletools.optimize(pickle.dumps(value, protocol=2)). optimize drops the
memo PUTs Python adds and the Go writer does not, so for values without
repeated references the two byte strings must be equal.
"""

import collections  # noqa: F401  (used by the expressions)
import datetime  # noqa: F401
import json
import pickle
import pickletools
import sys


Point = collections.namedtuple("Point", ["x", "y"])


class Output(collections.OrderedDict):
    """An OrderedDict subclass with instance state (as Hugging Face's ModelOutput has)."""

    def __init__(self, items=(), **state):
        super().__init__(items)
        self.__dict__.update(state)


def main():
    exprs = json.load(sys.stdin)
    out = []
    for expr in exprs:
        value = eval(expr)  # test-controlled expressions only
        out.append(pickletools.optimize(pickle.dumps(value, protocol=2)).hex())
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
