#!/usr/bin/env bash
# Regenerates docs/readme/*.md, the per-verb copies of the README's sections, from README.md.
# Run after editing a verb's section of the README; CI does not check them.
set -euo pipefail
cd "$(dirname "$0")/.."
section() { # $1 = heading that starts the section, $2 = heading of the next one
  awk -v start="$1" -v stop="$2" '
    index($0, start) == 1 { on = 1 }
    on && index($0, stop) == 1 && index($0, start) != 1 { exit }
    on { print }' README.md | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' | sed 's#](docs/img/#](../img/#g'
}
section '## `tailguard load`' '## `tailguard serve`' > docs/readme/load.md
section '## `tailguard serve`' '## Simulating balancers' > docs/readme/serve.md
section '## Simulating balancers' '## `tailguard proxy`' > docs/readme/sim.md
section '## `tailguard proxy`' '## `tailguard demo`' > docs/readme/proxy.md
section '## `tailguard demo`' '## Benchmark results' > docs/readme/bench.md
