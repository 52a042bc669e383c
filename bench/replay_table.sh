#!/usr/bin/env bash
# replay_table.sh - every L1 policy at 1/5/10/20/40% of the unique blocks
# on the shipped trace and on generated ones (bench/gen_trace.py, seed 1),
# as markdown: block hit / prefix hit / share of the LRU-to-Belady
# prefix-hit gap closed. Then the worst gap closed per policy (what the
# default policy= is chosen by), and the two-tier replay (L1 10% over an
# L2 model of 20%) per ingest mode.
#
#   bench/replay_table.sh [KVFSCTL] [SHIPPED_TRACE]
set -eu
CTL=${1:-$PWD/build/kvfsctl}
SHIPPED=${2:-$(dirname "$0")/../../shared/data/synthetic_trace.jsonl}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
traces=()
if [ -r "$SHIPPED" ]; then
	cp "$SHIPPED" "$tmp/shipped.jsonl"
	traces+=(shipped)
fi
for k in chat agent sysprompt mixed; do
	python3 "$(dirname "$0")/gen_trace.py" --kind "$k" --seed 1 >"$tmp/$k.jsonl"
	traces+=("$k")
done
for tr in "${traces[@]}"; do
	"$CTL" replay --policy all --capacity 1%,5%,10%,20%,40% --json \
		"$tmp/$tr.jsonl" >"$tmp/$tr.json"
done
python3 - "$tmp" "${traces[@]}" <<'P'
import json, sys
tmp, traces = sys.argv[1], sys.argv[2:]
worst = {}
for tr in traces:
    d = json.load(open(f"{tmp}/{tr}.json"))
    pols = [r["policy"] for r in d["capacities"][0]["results"]]
    print(f"\n**{tr}** ({d['requests']} requests, {d['blocks']} blocks, "
          f"{d['unique']} unique): block hit / prefix hit / gap closed\n")
    print("| capacity | " + " | ".join(pols) + " |")
    print("|---" * (len(pols) + 1) + "|")
    for c in d["capacities"]:
        cells = []
        for r in c["results"]:
            g = r["gap_closed"]
            gs = "-" if g is None else f"{g:+.2f}"
            cells.append(f"{r['block_hit']:.3f} / {r['prefix_hit']:.3f} / {gs}")
            lru = [x for x in c["results"] if x["policy"] == "lru"][0]
            # worst case against LRU, in prefix-hit points
            dp = r["prefix_hit"] - lru["prefix_hit"]
            worst[r["policy"]] = min(worst.get(r["policy"], 1), dp)
        print(f"| {c['capacity_pct']:.0f}% | " + " | ".join(cells) + " |")
print("\n**worst prefix-hit difference against LRU, over every trace and "
      "capacity** (the default is the best of these):\n")
print("| " + " | ".join(worst) + " |")
print("|---" * len(worst) + "|")
print("| " + " | ".join(f"{v:+.4f}" for v in worst.values()) + " |")
P
for tr in "${traces[@]}"; do
	echo
	echo "**$tr, two tiers** (L1 10%, L2 model 20% of unique blocks):"
	echo
	"$CTL" replay --policy lru --capacity 10% --l2-capacity 20% \
		--ingest each "$tmp/$tr.jsonl" | sed -n '2,$p'
done
