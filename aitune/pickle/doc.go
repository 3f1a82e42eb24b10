// Package pickle writes Python pickles (protocol 2) from a small value
// model: None, bool, int, float, str, bytes, list, tuple, ordered dict,
// global references and calls (a global applied to an argument tuple).
//
// It exists so that Go can write the object graph of an AITune checkpoint
// (see package aitune), which torch.load reads with Python's pickle module.
// Objects are built the simplest robust way, by calling their constructors
// (GLOBAL + argument tuple + REDUCE), never with NEWOBJ/BUILD, so the
// output does not depend on a class's internal __dict__ or __slots__.
//
// The output is deterministic: the same value always gives the same bytes,
// and for values without repeated references the bytes equal what Python's
// pickle.dumps(v, protocol=2) writes once pickletools.optimize has dropped
// its unused memo PUTs. The writer never memoizes (no PUT/GET), so shared
// references are written twice; no value this project writes needs
// identity.
//
// There is no reader: tests read the output back with Python itself.
package pickle
