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


def main():
    exprs = json.load(sys.stdin)
    out = []
    for expr in exprs:
        value = eval(expr)  # test-controlled expressions only
        out.append(pickletools.optimize(pickle.dumps(value, protocol=2)).hex())
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
