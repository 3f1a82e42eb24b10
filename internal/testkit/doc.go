// Package testkit is the folder of tunefleet's test harnesses and test
// suites: real services on loopback (testsvc), the pipeline run as a user
// runs it (stack, e2e, faults, hostile, memtest, scalebench), fixture models
// and bundles (onnxtest, bundletest, orttest, realmodels), the trtexec
// stand-in (trtreplay), the deployment checks (deploycheck) and the small
// generators the demo and goldens use (tools). Nothing under it ships: no
// package outside internal/testkit and _test.go files may import it (a test
// in internal/testkit/deploycheck checks the binaries' import graphs).
package testkit
