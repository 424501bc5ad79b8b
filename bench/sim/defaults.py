#!/usr/bin/env python3
"""The proxy's default against an earlier build's, on every built-in sim scenario.

Usage: bench/sim/defaults.py OLD_TAILGUARD NEW_TAILGUARD [--seeds 1,2,3,4,5] [--only a,b]
       bench/sim/defaults.py OLD_TAILGUARD NEW_TAILGUARD --live ROUNDS [--only a,b]

With `--live`, the same two arms run live instead (`tailguard bench FILE`, each through an
in-process proxy on a fresh fleet), on `add-steps`, `slow-middle` and `gc-pause` (seeds 000,
002, 004) unless `--only` says otherwise, OLD and NEW interleaved for ROUNDS rounds; prints
each run's p99 and the medians, and exits 1 when NEW's median p99 is more than 10% above OLD's.

For each built-in scenario (as NEW prints it) and each seed, runs one arm with the proxy's
default client settings: OLD with the settings it had (P2C peak EWMA without the pending age,
retries, accrual), NEW with its own (the pending age, rescue). Prints p99, p99.9, success
within the deadline and extra load (attempts per request - 1) per scenario and seed, and the
worst relative change of each; exits 1 when a change is past the issue's bounds (2% relative
on the three figures, 5 points of extra load). A scenario with several clients runs them all.
"""
import json
import subprocess
import sys
import tempfile

OLD_ARM = """arms:
  - name: default
    balancer: {kind: p2c, load: peak-ewma}
    classifier: retryable-read-5xx
    retries: {}
    accrual: {kind: io.l5d.consecutiveFailures}
"""
NEW_ARM = OLD_ARM + "    rescue_stalled: true\n"


def scenario_text(new, name):
    text = subprocess.run([new, "sim", name, "--print-scenario"], check=True,
                          capture_output=True, text=True).stdout
    head = text[:text.index("\narms:") + 1]
    if name == "stall":  # a built-in fleet the older build may not have
        fleet = subprocess.run(["awk", "/^const STALL: &str = \"\\\\$/{f=1;next} f&&/^\";/{exit} f"],
                               input=open("crates/fleet/src/builtin.rs").read(),
                               capture_output=True, text=True).stdout
        indented = "".join("  " + line + "\n" for line in fleet.splitlines()
                           if not line.startswith("#"))
        head = head.replace("fleet: stall\n", "fleet:\n" + indented)
    return head


def run(binary, text, arm, seed):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f, \
            tempfile.NamedTemporaryFile(suffix=".json") as out:
        f.write(text + arm)
        f.flush()
        subprocess.run([binary, "sim", f.name, "--seed", str(seed), "--json", out.name],
                       check=True, capture_output=True)
        arm = json.load(open(out.name))["arms"][0]
    lat = arm["latency_us"]
    return {
        "p99": lat["p99"], "p999": lat["p999"],
        "within": arm["success_within_deadline"],
        "extra": arm["attempts"] / max(arm["requests"], 1) - 1.0,
    }


def run_live(binary, text, arm):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f, \
            tempfile.NamedTemporaryFile(suffix=".json") as out:
        f.write(text + arm)
        f.flush()
        subprocess.run([binary, "bench", f.name, "--arms", "default", "--no-sim", "--no-live",
                        "--json", out.name], check=True, capture_output=True)
        report = json.load(open(out.name))
    return report


def live(old, new, rounds, names):
    import statistics
    bad = []
    for name in names:
        text = scenario_text(new, name)
        p99 = {"old": [], "new": []}
        for r in range(rounds):
            for which, binary, arm in (("old", old, OLD_ARM), ("new", new, NEW_ARM)):
                report = run_live(binary, text, arm)
                value = find_p99(report)
                p99[which].append(value)
                print(f"{name:12} round {r + 1} {which}: p99 {value / 1e3:.1f} ms", flush=True)
        a, b = statistics.median(p99["old"]), statistics.median(p99["new"])
        print(f"{name:12} median p99: old {a / 1e3:.1f} ms, new {b / 1e3:.1f} ms"
              f" ({(b / a - 1) * 100:+.1f}%)", flush=True)
        if b > a * 1.10:
            bad.append(f"{name}: median p99 {a} -> {b}")
    print("\n".join(["", "past the bound:"] + bad) if bad else "\nall within 10%")
    sys.exit(1 if bad else 0)


def find_p99(report):
    """The one arm's p99 in microseconds."""
    return report["arms"][0]["latency_us"]["p99"]


def main():
    old, new = sys.argv[1], sys.argv[2]
    if "--live" in sys.argv:
        names = ["add-steps", "slow-middle", "gc-pause"]
        if "--only" in sys.argv:
            names = sys.argv[sys.argv.index("--only") + 1].split(",")
        live(old, new, int(sys.argv[sys.argv.index("--live") + 1]), names)
    seeds = [1, 2, 3, 4, 5]
    if "--seeds" in sys.argv:
        seeds = [int(s) for s in sys.argv[sys.argv.index("--seeds") + 1].split(",")]
    names = subprocess.run([new, "sim", "--list"], check=True, capture_output=True,
                           text=True).stdout.split()
    if "--only" in sys.argv:
        names = sys.argv[sys.argv.index("--only") + 1].split(",")
    bad = []
    print(f"{'scenario':14} {'seed':>4} {'p99 old':>9} {'new':>9} {'p99.9 old':>10} {'new':>9}"
          f" {'<=dl old':>9} {'new':>8} {'extra old':>9} {'new':>7}")
    for name in names:
        text = scenario_text(new, name)
        for seed in seeds:
            a = run(old, text, OLD_ARM, seed)
            b = run(new, text, NEW_ARM, seed)
            print(f"{name:14} {seed:>4} {a['p99']/1e3:>8.1f}m {b['p99']/1e3:>8.1f}m"
                  f" {a['p999']/1e3:>9.1f}m {b['p999']/1e3:>8.1f}m"
                  f" {a['within']*100:>8.2f}% {b['within']*100:>7.2f}%"
                  f" {a['extra']*100:>8.2f}% {b['extra']*100:>6.2f}%")
            for key in ("p99", "p999"):
                if b[key] > a[key] * 1.02:
                    bad.append(f"{name} seed {seed}: {key} {a[key]} -> {b[key]}")
            if b["within"] < a["within"] * 0.98:
                bad.append(f"{name} seed {seed}: within deadline {a['within']} -> {b['within']}")
            if b["extra"] > a["extra"] + 0.05:
                bad.append(f"{name} seed {seed}: extra load {a['extra']} -> {b['extra']}")
    print("\n".join(["", "past the bounds:"] + bad) if bad else "\nall within the bounds")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
