#!/usr/bin/env bash
# pack.sh puts into .gpucheck/ (ignored by git) what gpu-check.sh needs on a
# bare GPU machine that can fetch nothing: stripped producer and worker
# binaries, the gpu package's test binary, the demo bundle (make demo's),
# ONNX Runtime's library, and redis-server with the libraries Debian links
# it against that a CUDA image may lack. All xz-compressed, to fit the
# device tool's 64 MiB (about 35 MiB with the working tree).
# Usage, from the repository root: internal/testkit/gpucheck/pack.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
P=.gpucheck
rm -rf "$P"; mkdir -p "$P/lib"
grep -qxF '/.gpucheck/' .git/info/exclude || echo '/.gpucheck/' >> .git/info/exclude
make -s ort redis
go build -trimpath -ldflags='-s -w' -o "$P/" ./cmd/producer ./cmd/worker
go test -c -trimpath -ldflags='-s -w' -o "$P/gpu.test" ./gpu
make -s demo-bundle DEMO_WORK="$P/demo" DEMO_BUNDLE="$P/bundle" >/dev/null
rm -rf "$P/demo"
cp -L third_party/onnxruntime/lib/libonnxruntime.so.1.* "$P/"
cp "$(command -v redis-server)" "$P/"
for l in $(ldd "$(command -v redis-server)" | awk '/=> \// {print $3}'); do
	case "$(basename "$l")" in liblzf.so.*|libjemalloc.so.*|libatomic.so.*) cp -L "$l" "$P/lib/";; esac
done
xz -T0 -6 "$P"/producer "$P"/worker "$P"/gpu.test "$P"/libonnxruntime.so.1.* "$P"/redis-server
du -sh "$P"
