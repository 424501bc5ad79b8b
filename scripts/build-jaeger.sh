#!/usr/bin/env bash
# Builds a real Jaeger (the v2, OpenTelemetry-collector based `cmd/jaeger` binary) from the Go
# module proxy, caches it, writes a loopback-only in-memory config next to it, and prints the
# binary's path as its last line of stdout. Used by the tier-2 OTLP trace-export test.
#
# Plain `go install github.com/jaegertracing/jaeger/cmd/jaeger@v1.76.0` does NOT work: the
# module's go.mod has a `replace` directive (github.com/Shopify/sarama), and Go refuses
# `go install pkg@version` for such modules. So, as build-apiserver.sh does, this script
# downloads the module's source (go mod download), copies it to a temp dir and runs
# `go install ./cmd/jaeger` inside it with GOBIN pointing into the temp dir, which honours the
# module's own go.mod/go.sum exactly. Module v1.76.0 is the release "v1.76.0 / v2.13.0".
# First build: about 6-10 minutes (6m14s measured) plus module downloads on 2 cores (nice 19,
# GOMAXPROCS=2 unless set); later calls return the cached binary at once.
#
# Usage: build-jaeger.sh [JAEGER_MODULE_VERSION]   (default v1.76.0)
# Env:   TAILGUARD_TOOLS  cache dir (default ~/.cache/tailguard-tools)
# Out:   $TAILGUARD_TOOLS/jaeger-<ver>        the binary
#        $TAILGUARD_TOOLS/jaeger-<ver>.yaml   config (written/refreshed on every call)
#
# Running it (every listener on 127.0.0.1; ports come from the environment, defaults shown):
#   JAEGER_OTLP_HTTP_PORT=4318   OTLP/HTTP receiver: POST /v1/traces (protobuf or JSON)
#   JAEGER_QUERY_HTTP_PORT=16686 query API: GET /api/traces/<traceId>, /api/v3/traces/<traceId>
#   JAEGER_HEALTH_PORT=13133     health check: GET /status -> 503 while starting, 200 when ready
#   JAEGER_OTLP_GRPC_PORT=0      OTLP/gRPC receiver (0 = any free port; it always listens)
#   JAEGER_QUERY_GRPC_PORT=0     query gRPC API (0 = any free port; it always listens)
#     JAEGER_OTLP_HTTP_PORT=... JAEGER_QUERY_HTTP_PORT=... JAEGER_HEALTH_PORT=... \
#       "$bin" --config "$bin.yaml"
#   Ready about 50-100 ms after start (poll /status until 200); a port already in use makes it
#   exit 1 at once ("bind: address already in use"); SIGTERM shuts it down cleanly (exit 0).
#   Write -> read is synchronous (no batch processor): a trace is queryable as soon as the
#   POST /v1/traces has answered 200.
#   Without --config the binary runs its built-in all-in-one config (memory storage, but it
#   listens on many fixed ports), so always pass --config.
set -euo pipefail
ver=${1:-v1.76.0}
mod=github.com/jaegertracing/jaeger
dir=${TAILGUARD_TOOLS:-$HOME/.cache/tailguard-tools}
bin=$dir/jaeger-$ver
conf=$bin.yaml

die() { echo "build-jaeger: ERROR: $*" >&2; exit 1; }

write_config() {
  local tmp
  tmp=$(mktemp "$dir/.jaeger-yaml.XXXXXX")
  cat >"$tmp" <<'YAML'
# Jaeger v2 config for tailguard tests: in-memory storage, every listener on 127.0.0.1.
# Ports are read from the environment when Jaeger starts (collector ${env:VAR:-default} syntax).
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info

extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    http:
      endpoint: "127.0.0.1:${env:JAEGER_QUERY_HTTP_PORT:-16686}"
    grpc:
      endpoint: "127.0.0.1:${env:JAEGER_QUERY_GRPC_PORT:-0}"
  healthcheckv2:
    use_v2: true
    http:
      endpoint: "127.0.0.1:${env:JAEGER_HEALTH_PORT:-13133}"

receivers:
  otlp:
    protocols:
      http:
        endpoint: "127.0.0.1:${env:JAEGER_OTLP_HTTP_PORT:-4318}"
      grpc:
        endpoint: "127.0.0.1:${env:JAEGER_OTLP_GRPC_PORT:-0}"

exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
YAML
  if cmp -s "$tmp" "$conf"; then rm -f "$tmp"; else chmod 644 "$tmp"; mv -f "$tmp" "$conf"; fi
}

mkdir -p "$dir"
if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
  write_config
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || die "go is not installed (needed to build Jaeger $ver)"
echo "build-jaeger: building $mod/cmd/jaeger@$ver into $bin (first time: about 6-10 minutes)" >&2
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

if ! GOFLAGS=-mod=mod go mod download -json "$mod@$ver" >"$work/dl.json" 2>"$work/dl.err"; then
  cat "$work/dl.err" "$work/dl.json" >&2
  die "cannot download module $mod@$ver from the Go module proxy (see above)"
fi
src=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' "$work/dl.json")
[ -n "$src" ] && [ -d "$src" ] || die "unexpected 'go mod download' output: $(cat "$work/dl.json")"
cp -r "$src" "$work/src" && chmod -R u+w "$work/src"
cd "$work/src"
rm -f go.work go.work.sum
pkg=$mod/internal/version
ldflags="-X $pkg.latestVersion=$ver -X $pkg.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
if ! GOWORK=off GOBIN="$work/bin" GOMAXPROCS=${GOMAXPROCS:-2} \
     nice -n 19 go install -buildvcs=false -trimpath -ldflags "$ldflags" ./cmd/jaeger >&2; then
  die "go install of $mod/cmd/jaeger@$ver FAILED (go output above); nothing was cached"
fi
[ -x "$work/bin/jaeger" ] || die "go install succeeded but $work/bin/jaeger is missing"
"$work/bin/jaeger" --version >&2 || die "the freshly built $work/bin/jaeger does not run"
mv -f "$work/bin/jaeger" "$bin.tmp"
mv -f "$bin.tmp" "$bin"
write_config
echo "$bin"
