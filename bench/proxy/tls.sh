#!/usr/bin/env bash
# TLS on both sides of the hop: tailguard and HAProxy, each with TLS from the client (ALPN,
# HTTP/1.1 here) and TLS to one nginx HTTPS backend (a certificate from a test CA, checked for
# its name: `client.tls` with `trustCerts` and `commonName`; HAProxy's `ssl verify required
# ca-file ... sni ... verifyhost ...`), plus the same two in cleartext for scale. Each arm is
# driven to its maximum closed-loop rate in turn, ROUNDS times, interleaved; prints req/s and
# the proxy's CPU µs per request (user + system) per run, then the medians per arm.
# Usage: bench/proxy/tls.sh TAILGUARD_BIN [SECONDS] [ROUNDS] [CONNS]
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib.sh
bin=$1 secs=${2:-10} rounds=${3:-3} conns=${4:-32}
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; sleep 0.2; rm -rf "$dir"' EXIT

# A test CA and a certificate it signed for backend.test and 127.0.0.1, used by every server.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj "/CN=tailguard bench CA" -keyout "$dir/ca-key.pem" -out "$dir/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=backend.test" \
  -keyout "$dir/key.pem" -out "$dir/req.pem" 2>/dev/null
printf 'subjectAltName=DNS:backend.test,IP:127.0.0.1\n' >"$dir/ext"
openssl x509 -req -in "$dir/req.pem" -CA "$dir/ca.pem" -CAkey "$dir/ca-key.pem" \
  -CAcreateserial -days 2 -extfile "$dir/ext" -out "$dir/cert.pem" 2>/dev/null
cat "$dir/cert.pem" "$dir/key.pem" >"$dir/both.pem"

# nginx: cleartext on 18301 (as ab.sh), HTTPS on 18302.
cat >"$dir/nginx.conf" <<EOF
worker_processes 1;
daemon off;
error_log stderr warn;
pid $dir/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:18301; location / { return 200 "ok\n"; } }
  server {
    listen 127.0.0.1:18302 ssl;
    ssl_certificate $dir/cert.pem; ssl_certificate_key $dir/key.pem;
    location / { return 200 "ok\n"; }
  }
}
EOF
nginx -p "$dir" -c "$dir/nginx.conf" & pids+=($!)

cat >"$dir/tailguard-tls.yaml" <<EOF
admin: {ip: 127.0.0.1, port: 18362}
servers: [{ip: 127.0.0.1, port: 18361, tls: {certPath: $dir/cert.pem, keyPath: $dir/key.pem}}]
services:
  - name: web
    upstreams: [127.0.0.1:18302]
    protocol: http1
    client:
      tls: {commonName: backend.test, trustCerts: [$dir/ca.pem]}
EOF
cat >"$dir/haproxy.cfg" <<EOF
global
  nbthread 1
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  http-reuse always
frontend plain
  bind 127.0.0.1:18321
  default_backend plain
backend plain
  server s1 127.0.0.1:18301
frontend tls
  bind 127.0.0.1:18371 ssl crt $dir/both.pem alpn h2,http/1.1
  default_backend tls
backend tls
  server s1 127.0.0.1:18302 ssl verify required ca-file $dir/ca.pem sni str(backend.test) verifyhost backend.test alpn http/1.1
EOF
"$bin" proxy --config "$dir/tailguard-tls.yaml" --threads 1 2>"$dir/tls.log" & tls_pid=$!
pids+=($tls_pid)
"$bin" proxy --listen 127.0.0.1:18351 --admin 127.0.0.1:18352 --upstream 127.0.0.1:18301 \
  --threads 1 2>"$dir/plain.log" & plain_pid=$!
pids+=($plain_pid)
haproxy -f "$dir/haproxy.cfg" -db 2>"$dir/haproxy.log" & ha_pid=$!
pids+=($ha_pid)
wait_ready 18301 18351 18321
for port in 18361 18371; do
  for _ in $(seq 50); do
    curl -skf "https://127.0.0.1:$port/" >/dev/null 2>&1 && break
    sleep 0.1
  done
done
declare -A url=([tailguard]=http://127.0.0.1:18351/ [haproxy]=http://127.0.0.1:18321/
  [tailguard-tls]=https://127.0.0.1:18361/ [haproxy-tls]=https://127.0.0.1:18371/)
declare -A pid=([tailguard]=$plain_pid [haproxy]=$ha_pid [tailguard-tls]=$tls_pid
  [haproxy-tls]=$ha_pid)
ticks() { awk '{print $14, $15}' "/proc/$1/stat"; } # user and system
for r in $(seq "$rounds"); do
  for arm in tailguard haproxy tailguard-tls haproxy-tls; do
    read -r u0 s0 < <(ticks "${pid[$arm]}")
    "$bin" load --rate 0 -c "$conns" -d "${secs}s" -q --insecure --http1 \
      --json "$dir/out.json" "${url[$arm]}" >/dev/null
    read -r u1 s1 < <(ticks "${pid[$arm]}")
    cpu_row "$dir/out.json" "$arm" "$r" "$((u1 - u0))" "$((s1 - s0))" 13 | tee -a "$dir/rows"
  done
done
medians "$dir/rows" \
  'median {arm:13} {m[0]:9.0f} req/s  cpu {m[1]:5.1f} us/req (user {m[2]:4.1f} sys {m[3]:4.1f}) over {runs} runs' \
  3 6 9 11
