#!/usr/bin/env bash
# test_replay.sh - `kvfsctl replay`: known hit ratios on tiny traces through
# the real engine, Belady's optimum and the gap column, the two-tier
# replay (an L2 model under the engine, ingest modes), --json, and the
# bad-input errors (malformed trace lines with their line number, unknown
# policies, bad capacities and options).
set -u
CTL=${KVFS_CTL_BIN:-$PWD/build/kvfsctl}
if [ ! -x "$CTL" ]; then
	echo "test_replay: no kvfsctl at $CTL (build it first)" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 n=0

ok()   { n=$((n + 1)); printf 'ok %d - %s\n' "$n" "$1"; }
bad()  { n=$((n + 1)); fails=$((fails + 1)); printf 'not ok %d - %s\n' "$n" "$1"; }

# expect_fail NAME WANT_RC STDERR_REGEX ARGS...
expect_fail() {
	local name=$1 want=$2 re=$3; shift 3
	"$CTL" replay "$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	if [ "$rc" -ne "$want" ]; then
		bad "$name: exit $rc, want $want ($(head -c 300 "$tmp/err"))"
	elif ! grep -Eq -- "$re" "$tmp/err"; then
		bad "$name: stderr does not match /$re/: $(head -c 300 "$tmp/err")"
	else
		ok "$name"
	fi
}

# ratio POLICY COLUMN: block_hit = 2, prefix_hit = 3 in the output table
ratio() { awk -v p="$1" -v c="$2" '$1 == p { print $c }' "$tmp/out"; }

# expect_ratios NAME POLICY BLOCK PREFIX ARGS...
expect_ratios() {
	local name=$1 pol=$2 wb=$3 wp=$4; shift 4
	if ! "$CTL" replay "$@" >"$tmp/out" 2>"$tmp/err"; then
		bad "$name: failed: $(head -c 300 "$tmp/err")"
		return
	fi
	local b p
	b=$(ratio "$pol" 2) p=$(ratio "$pol" 3)
	if [ "$b" = "$wb" ] && [ "$p" = "$wp" ]; then
		ok "$name"
	else
		bad "$name: $pol block_hit '$b' prefix_hit '$p', want $wb $wp"
		cat "$tmp/out" >&2
	fi
}

# --- known answers, no eviction (5 unique blocks, room for all).
# Odd whitespace, key order, nested members and a blank line on purpose.
cat >"$tmp/t1.jsonl" <<'J'
{"timestamp": 0, "hash_ids": [1, 2, 3], "output_length": 4}
{"hash_ids":[1,2,3]}

  { "meta" : {"a": [1, {"b": "x\"]"}], "c": null}, "hash_ids" : [ 1 , 2 , 4 ] , "t": -1.5e3 }
{"input_length": 10, "hash_ids": [5, 2, 3], "ok": true}
J
# blocks 12; hits 0+3+2+2 = 7; leading-run hits 0+3+2+0 = 5
for pol in lru fifo s3fifo prefix s2lru belady; do
	expect_ratios "$pol: ratios without eviction" "$pol" 0.5833 0.4167 \
		--policy "$pol" --capacity 100 "$tmp/t1.jsonl"
done
expect_ratios "all + 100%: capacity = unique blocks" s3fifo 0.5833 0.4167 \
	--policy all --capacity 100% "$tmp/t1.jsonl"
if [ "$(grep -Ec '^(lru|fifo|s3fifo|prefix|s2lru|belady) ' "$tmp/out")" = 6 ] &&
   grep -q 'capacity 5 blocks' "$tmp/out" &&
   [ "$(awk '$1 == "belady" { print $4 }' "$tmp/out")" = - ]; then
	ok "--policy all prints one line per policy; 100% of 5 unique is 5"
else
	bad "--policy all output: $(cat "$tmp/out")"
fi

# --- eviction order through the real engine, capacity 2 blocks:
# 1 2 1 3 2. LRU: the hit on 1 saves it, 3 evicts 2, 2 misses: 1 hit.
# FIFO: the hit changes nothing, 3 evicts 1, 2 hits: 2 hits.
printf '{"hash_ids":[%s]}\n' 1 2 1 3 2 >"$tmp/t2.jsonl"
expect_ratios "lru evicts the least recently used" lru 0.2000 0.2000 \
	--policy lru --capacity 2 "$tmp/t2.jsonl"
expect_ratios "fifo evicts the oldest insertion" fifo 0.4000 0.4000 \
	--policy fifo --capacity 2 "$tmp/t2.jsonl"
expect_ratios "--chunk-bytes and --opt=value" lru 0.2000 0.2000 \
	--policy=lru --capacity=2 --chunk-bytes 8192 "$tmp/t2.jsonl"
# Belady: 3 finds 1 (never used again) and itself (never used again) the
# farthest: it is not admitted, so 2 hits: 2 hits.
expect_ratios "belady: the newcomer used never again is not admitted" \
	belady 0.4000 0.4000 --policy belady --capacity 2 "$tmp/t2.jsonl"

# --- all four policies through the real engine on a small trace (60
# requests: shared document prefixes, Zipf-like popularity, one-time scans;
# capacity 20 of 176 unique blocks). The expected ratios come from an
# independent Python model of each policy (LRU, FIFO, S3-FIFO as in the
# paper with threshold 1, prefix: leaves first, LRU, deeper first).
cat >"$tmp/t3.jsonl" <<'J'
{"hash_ids": [5000, 5001, 5002, 5003, 5004, 5005]}
{"hash_ids": [0, 1, 2, 3, 5010]}
{"hash_ids": [5011, 5012, 5013, 5014, 5015, 5016, 5017]}
{"hash_ids": [5021, 5022, 5023, 5024]}
{"hash_ids": [200, 5031]}
{"hash_ids": [100, 5032]}
{"hash_ids": [5033, 5034, 5035, 5036]}
{"hash_ids": [5043, 5044, 5045, 5046]}
{"hash_ids": [200, 201, 202, 203, 204, 5053]}
{"hash_ids": [0, 1, 5054]}
{"hash_ids": [200, 5055]}
{"hash_ids": [200, 201, 202, 203, 5056]}
{"hash_ids": [100, 101, 5057]}
{"hash_ids": [700, 701, 702, 5058]}
{"hash_ids": [5059, 5060, 5061, 5062]}
{"hash_ids": [0, 1, 2, 5069]}
{"hash_ids": [500, 501, 502, 503, 504, 505, 5070]}
{"hash_ids": [200, 5071]}
{"hash_ids": [5072, 5073, 5074, 5075, 5076, 5077]}
{"hash_ids": [5082, 5083, 5084, 5085, 5086]}
{"hash_ids": [5092, 5093, 5094, 5095, 5096, 5097]}
{"hash_ids": [900, 5102]}
{"hash_ids": [200, 201, 202, 5103]}
{"hash_ids": [100, 101, 5104]}
{"hash_ids": [100, 5105]}
{"hash_ids": [100, 101, 102, 5106]}
{"hash_ids": [5107, 5108, 5109, 5110, 5111, 5112, 5113, 5114]}
{"hash_ids": [200, 201, 202, 203, 5117]}
{"hash_ids": [5118, 5119, 5120, 5121, 5122, 5123]}
{"hash_ids": [100, 101, 5128]}
{"hash_ids": [200, 201, 202, 203, 5129]}
{"hash_ids": [5130, 5131, 5132, 5133, 5134]}
{"hash_ids": [5140, 5141, 5142, 5143]}
{"hash_ids": [700, 701, 702, 703, 5150]}
{"hash_ids": [5151, 5152, 5153, 5154, 5155, 5156]}
{"hash_ids": [0, 1, 5161]}
{"hash_ids": [500, 501, 502, 5162]}
{"hash_ids": [1100, 1101, 1102, 5163]}
{"hash_ids": [900, 5164]}
{"hash_ids": [5165, 5166, 5167, 5168]}
{"hash_ids": [5175, 5176, 5177, 5178]}
{"hash_ids": [5185, 5186, 5187, 5188, 5189, 5190, 5191]}
{"hash_ids": [5195, 5196, 5197, 5198, 5199]}
{"hash_ids": [5205, 5206, 5207, 5208, 5209, 5210]}
{"hash_ids": [200, 201, 202, 5215]}
{"hash_ids": [300, 5216]}
{"hash_ids": [500, 501, 502, 503, 504, 505, 5217]}
{"hash_ids": [100, 101, 5218]}
{"hash_ids": [100, 101, 5219]}
{"hash_ids": [5220, 5221, 5222]}
{"hash_ids": [100, 5230]}
{"hash_ids": [0, 5231]}
{"hash_ids": [200, 201, 202, 5232]}
{"hash_ids": [0, 1, 5233]}
{"hash_ids": [0, 1, 2, 5234]}
{"hash_ids": [200, 201, 202, 203, 5235]}
{"hash_ids": [5236, 5237, 5238, 5239, 5240, 5241]}
{"hash_ids": [100, 101, 5246]}
{"hash_ids": [0, 1, 2, 5247]}
{"hash_ids": [100, 101, 102, 5248]}
J
expect_ratios "lru on a mixed trace" lru 0.1315 0.1315 \
	--policy all --capacity 20 "$tmp/t3.jsonl"
# belady: pinned from this implementation; gap_closed = (policy - lru) /
# (belady - lru) on prefix hits.
for want in "fifo 0.1076 0.0837 -0.286" "s3fifo 0.2191 0.2191 0.524" \
	    "prefix 0.1474 0.1474 0.095" \
	    "belady 0.2988 0.2988 1.000" "lru 0.1315 0.1315 0.000"; do
	set -- $want
	if [ "$(ratio "$1" 2) $(ratio "$1" 3) $(ratio "$1" 4)" = "$2 $3 $4" ]; then
		ok "$1 on a mixed trace"
	else
		bad "$1 on a mixed trace: $(ratio "$1" 2) $(ratio "$1" 3) $(ratio "$1" 4), want $2 $3 $4"
	fi
done

# s2lru: its shadows pick second-sight admission here, so the one-off scan
# blocks leave from probation and the re-read documents are kept. Its
# filter and sample hash keys with the process's random seed, so it moves
# a little between runs (0.2271 to 0.2510 seen): pinned to a range well
# above LRU's 0.1315.
p=$(ratio s2lru 3)
if awk -v p="$p" 'BEGIN { exit !(p >= 0.2150 && p <= 0.2988) }'; then
	ok "s2lru on a mixed trace (prefix hit $p)"
else
	bad "s2lru on a mixed trace: prefix hit '$p', want 0.2150..0.2988"
fi

# --- capacity lists and --json: one document, every capacity, LRU and
# Belady always there (the ends of the gap).
if "$CTL" replay --policy s3fifo --capacity 10,20 --json "$tmp/t3.jsonl" \
	>"$tmp/out" 2>"$tmp/err" &&
   /usr/bin/python3 - "$tmp/out" <<'P'
import json, sys
d = json.load(open(sys.argv[1]))
caps = d["capacities"]
assert [c["capacity"] for c in caps] == [10, 20], caps
assert d["unique"] == 176 and d["requests"] == 60
r = {x["policy"]: x for x in caps[1]["results"]}
assert set(r) == {"s3fifo"}, r
assert abs(r["s3fifo"]["prefix_hit"] - 0.2191) < 1e-4, r
assert abs(r["s3fifo"]["gap_closed"] - 0.524) < 1e-3, r
P
then
	ok "--json: capacity list, ratios and gap"
else
	bad "--json: $(head -c 400 "$tmp/out") $(head -c 300 "$tmp/err")"
fi

# --- two tiers: L1 of 1 block over an L2 model of 4 (FIFO), trace
# 1 2 1 2 1. evicted: every victim is written (1, 2), then all three
# re-reads come from L2. twice: first sights are not written; 1 and 2 come
# back as misses (second sights), so they are written when evicted, and
# only the last read hits L2. hot (2 L1 hits): nothing qualifies.
printf '{"hash_ids":[%s]}\n' 1 2 1 2 1 >"$tmp/t4.jsonl"
"$CTL" replay --policy lru --capacity 1 --l2-capacity 4 --ingest each \
	"$tmp/t4.jsonl" >"$tmp/out" 2>"$tmp/err"
got=$(awk '$1 == "lru" { printf "%s:%s:%s:%s ", $2, $4, $6, $7 }' "$tmp/out")
if [ "$got" = "evicted:0.6000:0.6000:2 hot:0.0000:0.0000:0 twice:0.2000:0.2000:2 all:0.6000:0.6000:2 " ]; then
	ok "two tiers: hits and L2 writes per ingest mode"
else
	bad "two tiers: got '$got'"
	cat "$tmp/out" >&2
fi

# --- unknown policy: exit 2 and the list of valid names.
expect_fail "unknown policy" 2 'unknown policy .*lru.*fifo.*s3fifo.*prefix.*s2lru.*belady' \
	--policy lfu --capacity 10 "$tmp/t1.jsonl"
expect_fail "unknown option" 2 "Try 'kvfsctl replay --help'" \
	--policy lru --capacity 10 --frobnicate "$tmp/t1.jsonl"
expect_fail "--ingest without --l2-capacity" 2 'needs --l2-capacity' \
	--policy lru --capacity 10 --ingest twice "$tmp/t1.jsonl"
expect_fail "bad --ingest" 2 'bad --ingest' \
	--policy lru --capacity 10 --l2-capacity 10 --ingest sometimes "$tmp/t1.jsonl"
expect_fail "bad --l2-capacity" 2 'bad --l2-capacity' \
	--policy lru --capacity 10 --l2-capacity -3 "$tmp/t1.jsonl"
expect_fail "empty capacity list" 2 'bad --capacity' \
	--policy lru --capacity , "$tmp/t1.jsonl"
expect_fail "two traces" 2 'one trace only' \
	--policy lru --capacity 10 "$tmp/t1.jsonl" "$tmp/t1.jsonl"
if "$CTL" replay --help >"$tmp/out" 2>"$tmp/err" && [ ! -s "$tmp/err" ] &&
   grep -q -- '--l2-capacity' "$tmp/out" && grep -q 'belady' "$tmp/out"; then
	ok "--help: stdout, exit 0"
else
	bad "--help: $(head -c 300 "$tmp/err")"
fi
expect_fail "missing --policy" 2 'usage' --capacity 10 "$tmp/t1.jsonl"
expect_fail "bad capacity" 2 'bad --capacity' \
	--policy lru --capacity 0 "$tmp/t1.jsonl"
expect_fail "bad percentage" 2 'bad --capacity' \
	--policy lru --capacity x% "$tmp/t1.jsonl"
expect_fail "missing trace file" 1 'nope.jsonl' \
	--policy lru --capacity 10 "$tmp/nope.jsonl"

# --- malformed lines: the line number in the error, non-zero exit.
i=0
for badline in \
	'{"hash_ids": [1, 2, 3}' \
	'{"hash_ids": [1, 2.5]}' \
	'{"hash_ids": [1, -2]}' \
	'{"hash_ids": "1,2"}' \
	'{"timestamp": 3}' \
	'{"hash_ids": [1, 2]} x' \
	'{"hash_ids": [1], "hash_ids": [2]}' \
	'{"hash_ids": [1], "s": "unterminated}' \
	'[1, 2, 3]' \
	'{"hash_ids": [99999999999999999999999]}' \
	'not json'; do
	i=$((i + 1))
	{ printf '{"hash_ids": [1, 2]}\n{"hash_ids": [3]}\n'; printf '%s\n' "$badline"
	  printf '{"hash_ids": [4]}\n'; } >"$tmp/bad$i.jsonl"
	expect_fail "malformed line $i ($badline)" 1 "bad$i.jsonl:3:.*malformed" \
		--policy lru --capacity 10 "$tmp/bad$i.jsonl"
done
: >"$tmp/empty.jsonl"
expect_fail "empty trace" 1 'no requests' --policy lru --capacity 10 "$tmp/empty.jsonl"

printf '%d tests, %d failed\n' "$n" "$fails"
[ "$fails" -eq 0 ]
