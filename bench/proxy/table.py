"""Prints the overhead benchmark (bench/proxy/overhead.sh) as a Markdown table."""
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1])]
max_rows = [r for r in rows if r["rate"] == 0]
fixed_rows = [r for r in rows if r["rate"] != 0]


def ms(us):
    return f"{us / 1000:.3f} ms"


print(f"Maximum throughput (closed loop, {max_rows[0]['summary']['concurrency']} connections, {sys.argv[2]} s):\n")
print("| arm | req/s | proxy CPU µs/req | proxy RSS |")
print("|---|---|---|---|")
for r in max_rows:
    t = r["summary"]
    cpu = r["cpu_s"] * 1e6 / max(t["requests"], 1)
    rss = f"{r['rss_kb'] / 1024:.1f} MiB" if r["rss_kb"] else "-"
    print(f"| {r['arm']} | {t['achieved_rate']:.0f} | {cpu:.1f} | {rss} |" if r["arm"] != "direct" else f"| direct | {t['achieved_rate']:.0f} | - | - |")

rate = fixed_rows[0]["rate"] if fixed_rows else 0
print(f"\nAt {rate:.0f} req/s (75% of the lowest maximum), {sys.argv[3]} s:\n")
print("| arm | p50 | p99 | p99.9 | success | proxy CPU µs/req | proxy RSS |")
print("|---|---|---|---|---|---|---|")
for r in fixed_rows:
    t = r["summary"]
    lat = t["latency_us"]
    cpu = "-" if r["arm"] == "direct" else f"{r['cpu_s'] * 1e6 / max(t['requests'], 1):.1f}"
    rss = "-" if r["arm"] == "direct" else f"{r['rss_kb'] / 1024:.1f} MiB"
    print(f"| {r['arm']} | {ms(lat['p50'])} | {ms(lat['p99'])} | {ms(lat['p999'])} | {t['success_rate'] * 100:.2f}% | {cpu} | {rss} |")
