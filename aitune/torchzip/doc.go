// Package torchzip writes and checks the zip container of torch.save
// (PyTorch's "zip file format", version 3): every record stored
// uncompressed under one top-level folder, data.pkl holding the pickle,
// version "3\n", byteorder "little", .format_version "1",
// .storage_alignment "64" and .data/serialization_id, with each record's
// data aligned to 64 bytes by padding in a zip extra field, as torch's
// PyTorchStreamWriter does.
//
// It knows nothing of AITune, jobs or storage: package aitune hands it a
// pickle. Read applies the rules torch's reader (PyTorchStreamReader) does,
// so tests can check a written archive against them.
package torchzip
