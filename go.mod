module github.com/tunefleet/tunefleet

go 1.26

require (
	github.com/spf13/cobra v1.10.2
	github.com/x448/float16 v0.8.4
	github.com/yalue/onnxruntime_go v1.27.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
)
