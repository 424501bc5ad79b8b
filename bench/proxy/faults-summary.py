#!/usr/bin/env python3
"""The tables of bench/proxy/faults.sh, from the directory it wrote (its OUT).

matrix/ARM-FAULT/ and soak/ARM/ each hold load.json (`tailguard load --json`), the proxy's own
counters (tailguard: proxy-metrics.txt, proxy-endpoints.json; HAProxy: proxy-stats.csv) and,
for the soak, proc.txt (label, RSS KiB, open descriptors of the proxy). Prints one table per
part, then for every run that lost requests which seconds they were lost in and how.
"""
import csv
import json
import os
import re
import sys

FAULTS = ["none", "down", "pause", "slow", "fail503", "two-down", "all-down"]
WHAT = {
    "none": "no fault",
    "down": "one down (refused)",
    "pause": "one paused",
    "slow": "one slow x10",
    "fail503": "one 50% 503",
    "two-down": "two of three down",
    "all-down": "all down 5 s",
}


def ms(us):
    v = us / 1000
    return f"{v:.3g}" if v < 1000 else f"{v:,.0f}"


def lost(s):
    """The requests that were not OK, by status code and error kind."""
    parts = [f"{k}={v}" for k, v in sorted(s.get("status_codes", {}).items()) if not k.startswith(("1", "2", "3", "4"))]
    parts += [f"{k}={v}" for k, v in sorted(s.get("errors", {}).items())]
    return " ".join(parts) or "-"


def proxy_view(d):
    """The proxy's own counters for the run: what it retried, hedged, ejected or redispatched."""
    m = os.path.join(d, "proxy-metrics.txt")
    if os.path.exists(m):
        sums = {}
        for line in open(m):
            x = re.match(r"tailguard_proxy_(\w+?)(?:_total)?(?:\{[^}]*\})? ([0-9.e+]+)$", line)
            if x:
                sums[x[1]] = sums.get(x[1], 0) + float(x[2])
        keys = ["retries", "retry_budget_exhausted", "hedges", "hedge_wins", "hedge_budget_exhausted"]
        out = [f"{k}={int(sums.get(k, 0))}" for k in keys]
        probes = {}
        for line in open(m):
            x = re.match(r'tailguard_proxy_probes_total\{.*class="(\w+)"\} ([0-9.e+]+)$', line)
            if x:
                probes[x[1]] = probes.get(x[1], 0) + int(float(x[2]))
        out.append("probes " + "/".join(f"{k}={probes.get(k, 0)}" for k in ["ok", "distrusted", "failed", "skipped"]))
        try:  # /endpoints' `ejections` counts failure-accrual trips; `state` shows an outlier ejection
            eps = json.load(open(os.path.join(d, "proxy-endpoints.json")))
            es = [e for svc in eps.values() for e in svc]
            out.append(f"accrual_trips={sum(e.get('ejections', 0) for e in es)}")
            out.append("end_states=" + ",".join(e.get("state", "?") for e in es))
        except (OSError, ValueError, AttributeError, TypeError):
            pass
        return " ".join(out)
    c = os.path.join(d, "proxy-stats.csv")
    if os.path.exists(c):
        rows = list(csv.DictReader(line.lstrip("# ") for line in open(c)))
        be = next((r for r in rows if r.get("pxname") == "be" and r.get("svname") == "BACKEND"), {})
        return " ".join(f"{k}={be.get(k) or 0}" for k in ["wretr", "wredis", "econ", "eresp", "hrsp_5xx"])
    return ""


def cpu(d, s):
    """The proxy's CPU (user + system) per request over the run, in µs."""
    try:
        a, b, hz = (int(x) for x in open(os.path.join(d, "cpu.txt")).read().split())
        return f"{(b - a) / hz * 1e6 / max(1, s['requests']):.0f}µs"
    except (OSError, ValueError):
        return "-"


def load(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return None


def where(name, s):
    """Seconds (from the run's start) in which requests were not OK, and how."""
    bad = []
    for i, iv in enumerate(s.get("intervals", [])):
        n = iv["requests"] - iv["good"]
        if n:
            bad.append(f"{iv['start_s']:.0f}s:{n}({lost(iv)})")
    if bad:
        print(f"  {name}: " + ", ".join(bad))


def run_order(run):
    """Fault by fault as the matrix runs them, tailguard before HAProxy."""
    arm, fault = run.split("-", 1)
    return (FAULTS.index(fault) if fault in FAULTS else len(FAULTS), arm != "tailguard", run)


def matrix(out):
    d = os.path.join(out, "matrix")
    if not os.path.isdir(d):
        return
    runs = sorted(os.listdir(d), key=run_order)
    print("## fault matrix (open loop; fault from 5 s to 5 s before the end)\n")
    print(f"{'arm':10} {'fault':19} {'requests':>8} {'OK':>7} {'success':>8} {'p50 ms':>7} {'p99 ms':>7} {'p99.9 ms':>8} {'max ms':>7} {'cpu/req':>7}  not OK")
    found = []
    for r in runs:
        arm, fault = r.split("-", 1)
        s = load(os.path.join(d, r, "load.json"))
        if not s:
            print(f"{arm:10} {WHAT.get(fault, fault):19} (no result)")
            continue
        found.append((r, s))
        lat = s["latency_us"]
        print(f"{arm:10} {WHAT.get(fault, fault):19} {s['requests']:8} {s['good']:7} {100 * s['success_rate']:7.2f}% "
              f"{ms(lat['p50']):>7} {ms(lat['p99']):>7} {ms(lat['p999']):>8} {ms(lat['max']):>7} {cpu(os.path.join(d, r), s):>7}  {lost(s)}")
    print("\nthe proxies' own counters per run:")
    for r, _ in found:
        print(f"  {r}: {proxy_view(os.path.join(d, r))}")
    print("\nwhere the requests that were not OK were lost (second of the run: count(how)):")
    for r, s in found:
        where(r, s)
    print()


def soak(out):
    d = os.path.join(out, "soak")
    if not os.path.isdir(d):
        return
    print("## soak (one backend down every 20 s, rotating)\n")
    print(f"{'arm':10} {'scheduled':>9} {'sent':>9} {'OK':>9} {'success':>8} {'p99 ms':>7} {'RSS MiB start/end':>18} {'fds start/end':>14} {'cpu/req':>7}  not OK")
    for arm in sorted(os.listdir(d), reverse=True):
        s = load(os.path.join(d, arm, "load.json"))
        if not s:
            print(f"{arm:10} (no result)")
            continue
        proc = {}
        for line in open(os.path.join(d, arm, "proc.txt")):
            f = line.split()
            if len(f) == 3:
                proc[f[0]] = (int(f[1]) / 1024, int(f[2]))
        st, en = proc.get("start", (0, 0)), proc.get("end", (0, 0))
        scheduled = sum(iv["target"] for iv in s.get("intervals", []))
        print(f"{arm:10} {scheduled:9} {s['requests']:9} {s['good']:9} {100 * s['success_rate']:7.3f}% {ms(s['latency_us']['p99']):>7} "
              f"{st[0]:8.1f} / {en[0]:6.1f} {st[1]:6} / {en[1]:5} {cpu(os.path.join(d, arm), s):>7}  {lost(s)}")
    print("\nthe proxies' own counters, and RSS (MiB) / descriptors every 20 s:")
    for arm in sorted(os.listdir(d), reverse=True):
        print(f"  {arm}: {proxy_view(os.path.join(d, arm))}")
        samples = [line.split() for line in open(os.path.join(d, arm, "proc.txt"))]
        print("    " + " ".join(f"{f[0]}:{int(f[1]) / 1024:.1f}/{f[2]}" for f in samples if len(f) == 3))
    print("\nwhere the requests that were not OK were lost (second of the run: count(how)):")
    for arm in sorted(os.listdir(d), reverse=True):
        s = load(os.path.join(d, arm, "load.json"))
        if s:
            where(arm, s)


if __name__ == "__main__":
    matrix(sys.argv[1])
    soak(sys.argv[1])
