#!/usr/bin/env bash
# gpu-check.sh runs on a GPU machine (the device tool's, or any with an
# NVIDIA driver) what no machine without one can: what the machine has
# (driver, CUDA, TensorRT, trtexec), the gpu package's tests against the real
# NVML (TestRealGPU: fingerprint and telemetry while PyTorch keeps the GPU
# busy), `worker info`, and the demo bundle tuned by a real `worker run` on
# the GPU's own class with TensorRT candidates (trtexec from PATH or found on
# disk) beside ONNX Runtime, then fetched. Everything it prints goes to
# $OUT/gpu-check.log; the run's store, logs and metrics to $OUT/run.tgz.
# Needs .gpucheck/ from pack.sh. See docs/development.md, "On a GPU machine".
set -u
P=$(cd "${1:-.gpucheck}" && pwd)
OUT=${OUT:-$(mktemp -d)}
T=/tmp/tunefleet-gpucheck
[ ! -e "$T/redis.pid" ] || kill "$(cat "$T/redis.pid")" 2>/dev/null
rm -rf "$T"; mkdir -p "$T/bin" "$T/work"
exec > >(tee "$OUT/gpu-check.log") 2>&1
sec() { printf '\n=== %s (%s UTC)\n' "$*" "$(date -u +%T)"; }

sec machine
uname -srm; grep PRETTY_NAME /etc/os-release; echo "cpus: $(nproc)"; free -g | head -2
nvidia-smi
nvidia-smi --query-gpu=name,uuid,pci.bus_id,driver_version,compute_cap,memory.total,clocks.max.sm,clocks.max.mem,power.limit,persistence_mode,ecc.mode.current,mig.mode.current --format=csv
nvcc --version 2>&1 | tail -2

sec tensorrt
TRTEXEC=$(command -v trtexec || true)
timeout 60 find /usr /opt /root /home /workspace -xdev \( -name trtexec -o -name 'libnvinfer.so*' -o -name 'libnvonnxparser.so*' \) 2>/dev/null | head -20 | tee "$T/trt-found"
[ -n "$TRTEXEC" ] || TRTEXEC=$(grep '/trtexec$' "$T/trt-found" | head -1)
ldconfig -p | grep -E 'nvinfer|libnvidia-ml|libcuda\.so|libcudnn\.so|libcublas\.so' | head
python3 -c 'import tensorrt; print("python tensorrt", tensorrt.__version__)' 2>&1 | tail -1
python3 -m pip list 2>/dev/null | grep -iE '^(tensorrt|onnxruntime|torch|nvidia-ml-py|cuda-toolkit) '
TRTLIB=$(grep '/libnvinfer.so' "$T/trt-found" | head -1)
[ -z "$TRTLIB" ] || export LD_LIBRARY_PATH=$(dirname "$TRTLIB")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "trtexec: ${TRTEXEC:-none found}; LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
[ -z "$TRTEXEC" ] || "$TRTEXEC" --help 2>&1 | head -3

sec unpack
for f in "$P"/*.xz; do
	b=$(basename "$f" .xz)
	if command -v xz >/dev/null; then xz -dc "$f" >"$T/bin/$b"
	else python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"))' "$f" "$T/bin/$b"; fi
	chmod +x "$T/bin/$b"
done
ls -la "$T/bin"
export ONNXRUNTIME_SHARED_LIBRARY_PATH=$(ls "$T"/bin/libonnxruntime.so.1.*)

sec nvml: gpu package tests on the real driver
(cd "$T" && TUNEFLEET_REAL_GPU=1 "$T/bin/gpu.test" -test.count=1 2>&1 | tail -20)
# TestRealGPU again while PyTorch keeps the GPU idle, lightly busy (small fp16
# products, synchronised one by one, like a small engine's benchmark) and
# fully busy (bf16 8192^3 products): what the Monitor's verdict is under each.
for load in idle light heavy; do
	sec "nvml: telemetry, GPU $load"
	rm -f "$T/busy"
	python3 - "$T/busy" "$load" <<'PY' &
import sys, time, torch
n = {"idle": 0, "light": 1024, "heavy": 8192}[sys.argv[2]]
if n:
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16 if n > 4096 else torch.float16)
    (a @ a); torch.cuda.synchronize()
open(sys.argv[1], "w").close()
t = time.time(); k = 0
while n and time.time() - t < 8:
    if n > 4096:
        for _ in range(20): a @ a
        k += 20
    else:
        a @ a; k += 1
    torch.cuda.synchronize()
if n: print(f"load: {k} products {n}^3 in {time.time()-t:.1f} s, {k*2*n**3/(time.time()-t)/1e12:.1f} TFLOP/s")
PY
	LOAD=$!
	for _ in $(seq 60); do [ -e "$T/busy" ] && break; sleep 0.5; done
	(cd "$T" && TUNEFLEET_REAL_GPU=1 TUNEFLEET_REAL_GPU_WATCH=5s "$T/bin/gpu.test" -test.run 'TestRealGPU' -test.v -test.count=1 2>&1 |
		grep -vE '^=== (RUN|PAUSE|CONT)' | if [ $load = idle ]; then cat; else sed -n '/telemetry over/,$p'; fi)
	wait $LOAD
done

sec worker info
ARGS=(); [ -z "$TRTEXEC" ] || ARGS=(--trtexec "$TRTEXEC")
"$T/bin/worker" info "${ARGS[@]}"
"$T/bin/worker" info "${ARGS[@]}" -o json >"$T/worker-info.json"
CLASS=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["class"])' "$T/worker-info.json")
echo "class: $CLASS"

sec fleet: the demo bundle on $CLASS
R=redis://127.0.0.1:6399 S=file://$T/store
(cd "$T" && LD_LIBRARY_PATH="$P/lib" "$T/bin/redis-server" --port 6399 --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --pidfile "$T/redis.pid" --logfile "$T/redis.log")
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/6399) 2>/dev/null && break; sleep 0.1; done
"$T/bin/worker" run --redis $R --store "$S" --work-dir "$T/work" "${ARGS[@]}" --health 127.0.0.1:8081 -v >"$T/worker.log" 2>&1 &
W=$!
ALLOW=(); [ "$CLASS" != cpu ] || ALLOW=(--allow-trt-on-cpu)
time "$T/bin/producer" submit "$P/bundle" --redis $R --store "$S" --target "$CLASS" "${ALLOW[@]}" \
	--candidates trt:fp16,trt:fp32,ort:cpu:all --strategy max-throughput --bench-time 500ms \
	--wait --wait-timeout 5m -o json >"$T/submit.json"
echo "submit exit $?"
RUN=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d=d[0] if isinstance(d,list) else d; print(d.get("run") or d.get("run_id") or "")' "$T/submit.json" 2>/dev/null)
curl -s 127.0.0.1:8081/metrics | grep -E '^tunefleet_(gpu|worker|tasks)' >"$T/metrics.txt"
[ -z "$RUN" ] || "$T/bin/producer" status "$RUN" --redis $R --store "$S"
"$T/bin/producer" fetch demo_model --platform "$CLASS" --store "$S" --out "$T/deploy" && find "$T/deploy" -type f | sort
kill -TERM $W; wait $W; echo "worker exit $?"
kill "$(cat "$T/redis.pid")"
tail -40 "$T/worker.log"
for f in $(find "$T/store" -path '*/graphs/*/result.json' -not -path '*/attempts/*' | sort); do python3 - "$f" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
w = r.get("winner") or {}
print(f"graph {r['graph']} on {r['platform']}: winner {w.get('candidate')} ({w.get('reason')})")
for c in r.get("results", []):
    f = c.get("failure") or {}
    line = f"  {c['candidate']}: {c['status']}, build {c.get('build_ns', 0)/1e9:.2f} s"
    if f:
        line += f"; {f.get('class')}/{f.get('kind')}: {f.get('message', '')[:300]}"
    for b in c.get("benchmarks", []):
        line += f"\n    batch {b['batch_size']}: {b['throughput']:.4g} samples/s, p50 {b['p50_ms']:.4g} ms, cv {b['cv']:.3f}"
        if b.get("telemetry"): line += f", telemetry {b['telemetry']} {b.get('telemetry_problems') or ''}"
    print(line)
PY
done
(cd "$T" && tar czf "$OUT/run.tgz" --exclude='*.onnx' store worker.log redis.log metrics.txt submit.json worker-info.json trt-found 2>/dev/null)
sec done
