// Package childenv builds the environment of the processes a worker starts
// to run untrusted or third-party code: ONNX Runtime session children and
// trtexec. They get an allow-list of the worker's variables (paths,
// locale, the GPU and library settings they need), never the rest: the
// worker's environment holds S3 keys and the Redis password, and a model
// or a plugin library read by those processes is input from outside.
package childenv
