module github.com/tunefleet/tunefleet

go 1.26

require (
	github.com/x448/float16 v0.8.4
	google.golang.org/protobuf v1.36.12
)

require github.com/yalue/onnxruntime_go v1.27.0 // indirect
