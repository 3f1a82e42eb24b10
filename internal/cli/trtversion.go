package cli

import "context"

// tensorRTVersion reports the TensorRT version and build of the trtexec
// this worker would run ("" when there is none).
func tensorRTVersion(ctx context.Context) (string, string) { return "", "" }
