// Package gpu tells a worker what platform it is and watches the GPU while
// it benchmarks.
//
// A Fingerprint describes the machine: on a GPU machine every NVIDIA device
// (name, UUID, compute capability, memory, PCI bus id), the driver and CUDA
// driver versions and the TensorRT version and build (given by the caller,
// which reads them from trtexec); on a machine without a usable driver the
// CPU (model, instruction-set flags of interest, cores) and the ONNX Runtime
// version. From it come the platform key, under which engines, results and
// timing caches are stored and which never mixes GPU models, compute
// capabilities, TensorRT builds or driver majors (Fingerprint.PlatformKey),
// and the target class, which names the queue the worker serves
// (Fingerprint.Class, Queues).
//
// Detection goes through go-nvml's nvml.Interface, so tests run against
// go-nvml's fake DGX machines (pkg/nvml/mock/dgxa100, dgxh100, ...) and the
// worker opens libnvidia-ml.so.1 only at run time (DetectDefault). Two rules
// from the reference notes are kept everywhere: no NVML function is called
// after Init failed (doing so kills the process with a symbol lookup error,
// it is not a Go panic), and a function newer than the oldest supported
// driver is called only after Extensions().LookupSymbol found it; when it is
// missing the fingerprint or the telemetry degrades and says so.
//
// A Monitor samples one GPU during a benchmark (clocks, clock event or
// "throttle" reasons, temperature, power, energy, ECC counters, Xid events)
// and its Report says whether the measurement can be trusted
// (Report.Verdict): ok, rerun (the GPU throttled or its clocks moved), or
// reject (new uncorrectable ECC errors, an Xid event, a lost GPU).
//
// ParseKey reads a platform key back (a CPU key's ISA tier and the flags
// it implies, a GPU key's compute capability and TensorRT release), for
// deploy tooling that names its target by key.
//
// Routing helpers: Queues (the queues a worker serves), CheckPlatform (refuse
// work meant for another platform) and Fingerprint.VisibleDevices (pin one
// task to one GPU with CUDA_VISIBLE_DEVICES).
package gpu
