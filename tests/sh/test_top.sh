#!/usr/bin/env bash
# test_top.sh - `kvfsctl top` against a real mount (L1 + L2) under load (a
# writer/reader loop): in tmux (a real terminal) the frame shows the tier
# rows and the traffic, `q` exits with status 0 and SIGTERM kills it, the
# terminal's mode restored both times; without a terminal --once prints one
# frame with no escape codes, and --json one parsable object a line.
set -u
CTL=${KVFS_CTL_BIN:-$PWD/build/kvfsctl}
PY=/usr/bin/python3
. "$(dirname "$0")/kvfs_mount.sh"
for f in "$CTL" "$MOUNT"; do
	if [ ! -x "$f" ]; then
		echo "test_top: no $f (build it first)" >&2
		exit 1
	fi
done
for c in tmux fusermount3 "$PY"; do
	if ! command -v "$c" >/dev/null; then
		echo "test_top: skip: $c not installed (make deps)"
		exit 77
	fi
done
tmp=$(mktemp -d /tmp/kvfs-top.XXXXXX)
sock=kvfs-top-$$
loadpid=
cleanup() {
	[ -n "$loadpid" ] && kill "$loadpid" 2>/dev/null && wait "$loadpid" 2>/dev/null
	tmux -L "$sock" kill-server 2>/dev/null
	# kill-server leaves the socket files of this run's servers behind
	rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/kvfs-top-$$"*
	kvfs_sh_umount "$tmp/m" || echo "not ok - daemon lingered"
	rm -rf "$tmp"
}
trap cleanup EXIT
fails=0 n=0
ok()  { n=$((n + 1)); printf 'ok %d - %s\n' "$n" "$1"; }
bad() { n=$((n + 1)); fails=$((fails + 1)); printf 'not ok %d - %s\n' "$n" "$1"; }

mkdir "$tmp/l2" && kvfs_sh_mount "$tmp/m" -o "l1_size=8M,l2_dir=$tmp/l2,l2_size=256M" || exit 1
mkdir "$tmp/m/ns" || exit 1
head -c 262144 /dev/urandom >"$tmp/blob"
# the load: 256 KiB chunks written and read back, and older ones read again
# (L1 holds 32 of them: the rest come back from L2)
load() {
	local i=0
	while :; do
		i=$((i + 1))
		cp "$tmp/blob" "$tmp/m/ns/$(printf '%032x' "$i")" 2>/dev/null
		cat "$tmp/m/ns/$(printf '%032x' "$i")" >/dev/null 2>&1
		[ "$i" -gt 64 ] &&
			cat "$tmp/m/ns/$(printf '%032x' $((i - 60)))" >/dev/null 2>&1
	done
}
load &
loadpid=$!
sleep 1

# --- in tmux: a terminal of 110x30
pane() { tmux -L "$sock" capture-pane -p -t top; }
wait_for() { # REGEX FILE: up to 10 s
	for _ in $(seq 100); do
		grep -Eq -- "$1" "$2" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
# the pane runs top, then records its status and the terminal's mode
cat >"$tmp/pane.sh" <<EOF
echo \$\$ >"$tmp/pid"
"$CTL" top -d 0.5 "$tmp/m"
echo \$? >"$tmp/status"
stty -a >"$tmp/stty"
sleep 60
EOF
tmux -L "$sock" -f /dev/null new-session -d -s top -x 110 -y 30 \
	"exec bash $tmp/pane.sh" || { echo "not ok - tmux new-session"; exit 1; }
for _ in $(seq 60); do
	pane >"$tmp/frame"
	grep -q '^L3 ' "$tmp/frame" && grep -Eq 'publishes +[1-9][0-9]*/s' "$tmp/frame" &&
		break
	sleep 0.25
done
sleep 1.2 # a frame with the reads of old chunks in it
pane >"$tmp/frame"
echo "--- tmux capture of kvfsctl top under load:"
cat "$tmp/frame"
echo "---"
grep -q '^kvfs top - ' "$tmp/frame" && grep -q '(q quits)' "$tmp/frame" &&
	ok "top in tmux: the header" || bad "top in tmux: no header"
grep -Eq '^TIER +HIT% +HITS/s +ASKED/s +CHUNKS +BYTES +CAPACITY' "$tmp/frame" &&
	grep -Eq '^L1 +[0-9.]+ ' "$tmp/frame" && grep -Eq '^L2 +[0-9.-]+ ' "$tmp/frame" &&
	grep -Eq '^L3 +- +off' "$tmp/frame" &&
	ok "top in tmux: L1, L2 and L3 rows" || bad "top in tmux: tier rows"
grep -Eq 'publishes +[1-9][0-9]*/s' "$tmp/frame" &&
	grep -Eq 'in +[0-9]+\.[0-9]{3} GB/s +out +[0-9]+\.[0-9]{3} GB/s' "$tmp/frame" &&
	ok "top in tmux: the load shows (publishes/s, GB/s)" ||
	bad "top in tmux: no traffic"
grep -Eq '^L2 use [0-9.]+%' "$tmp/frame" && ok "top in tmux: L2 use" ||
	bad "top in tmux: L2 use"
grep -Eq 'evictions +[0-9]+/s' "$tmp/frame" && grep -q 'promotions ' "$tmp/frame" &&
	grep -Eq 'leases [0-9]+ active' "$tmp/frame" && grep -Eq 'errors [0-9]+ ' "$tmp/frame" &&
	ok "top in tmux: evictions, promotions, leases, errors" ||
	bad "top in tmux: counters"
[ "$(grep -c '^kvfs top - ' "$tmp/frame")" = 1 ] &&
	ok "top in tmux: redraws in place (one frame on the screen)" ||
	bad "top in tmux: frames scroll"
tmux -L "$sock" send-keys -t top q
if wait_for . "$tmp/status" && [ "$(cat "$tmp/status")" = 0 ]; then
	ok "top in tmux: q exits with status 0"
else
	bad "top in tmux: q: status '$(cat "$tmp/status" 2>/dev/null)'"
fi
wait_for . "$tmp/stty"
grep -Eq '(^| )icanon' "$tmp/stty" && grep -Eq '(^| )echo( |$)' "$tmp/stty" &&
	ok "top in tmux: the terminal is canonical with echo again after q" ||
	bad "top in tmux: terminal not restored: $(grep -o -- '-*icanon\|-*echo ' "$tmp/stty" | tr '\n' ' ')"
tmux -L "$sock" kill-server 2>/dev/null

# SIGTERM: the terminal restored, and top dies of the signal (143)
rm -f "$tmp/status" "$tmp/stty" "$tmp/pid"
sock=$sock-term # a server of its own: the last one may still be exiting
tmux -L "$sock" -f /dev/null new-session -d -s top -x 110 -y 30 \
	"exec bash $tmp/pane.sh" || bad "tmux new-session (SIGTERM case)"
wait_for . "$tmp/pid"
for _ in $(seq 50); do pane | grep -q '^L1 ' && break; sleep 0.1; done
toppid=$(pgrep -P "$(cat "$tmp/pid")" -x kvfsctl)
if [ -n "$toppid" ] && kill -TERM "$toppid" && wait_for . "$tmp/status"; then
	[ "$(cat "$tmp/status")" = 143 ] && ok "top: SIGTERM ends it (status 143)" ||
		bad "top: SIGTERM: status $(cat "$tmp/status")"
	wait_for . "$tmp/stty"
	grep -Eq '(^| )icanon' "$tmp/stty" &&
		ok "top: the terminal is restored after SIGTERM" ||
		bad "top: terminal not restored after SIGTERM"
else
	bad "top: no top process to signal (pane pid $(cat "$tmp/pid" 2>/dev/null))"
fi
tmux -L "$sock" kill-server 2>/dev/null

# ^Z then fg: top takes its own terminal mode again (q works without
# Enter), and q exits 0 with the shell's mode restored. (While stopped the
# mode is bash's whatever top does: bash resets it when a job stops, so
# only the way back is tested.)
sock=$sock-tstp
tmux -L "$sock" -f /dev/null new-session -d -s top -x 110 -y 30 \
	"exec bash --norc --noprofile -i" || bad "tmux new-session (^Z case)"
sleep 0.3
tmux -L "$sock" send-keys -t top "stty -g >$tmp/g0; $CTL top -d 0.3 $tmp/m" Enter
for _ in $(seq 50); do pane | grep -q '^L1 ' && break; sleep 0.1; done
tmux -L "$sock" send-keys -t top C-z
sleep 0.5
tmux -L "$sock" send-keys -t top "stty -g >$tmp/g1; fg" Enter
wait_for . "$tmp/g1"
sleep 0.8
tmux -L "$sock" send-keys -t top q
sleep 0.5
tmux -L "$sock" send-keys -t top "echo status=\$?; stty -g >$tmp/g2" Enter
wait_for . "$tmp/g2"
pane | grep -q '^status=0$' && cmp -s "$tmp/g0" "$tmp/g2" &&
	ok "top: after fg, q exits 0 with the terminal restored" ||
	bad "top: after fg: $(pane | grep status=) $(cat "$tmp/g2")"
tmux -L "$sock" kill-server 2>/dev/null

# stdin not the terminal (top < /dev/null): q cannot quit, so no q hint
sock=$sock-nostdin
tmux -L "$sock" -f /dev/null new-session -d -s top -x 110 -y 30 \
	"exec bash -c '\"\$0\" top -d 0.3 \"\$1\" </dev/null; sleep 60' \"$CTL\" \"$tmp/m\"" ||
	bad "tmux new-session (stdin case)"
for _ in $(seq 50); do pane >"$tmp/frame"; grep -q '^L1 ' "$tmp/frame" && break; sleep 0.1; done
grep -q '^kvfs top - ' "$tmp/frame" && ! grep -q 'q quits' "$tmp/frame" &&
	ok "top < /dev/null on a terminal: no '(q quits)'" ||
	bad "top < /dev/null on a terminal: $(head -1 "$tmp/frame")"
tmux -L "$sock" kill-server 2>/dev/null

# --- no terminal: --once is one frame, no escape codes
"$CTL" top --once -d 0.5 "$tmp/m" >"$tmp/once" 2>"$tmp/err"
rc=$?
[ "$rc" = 0 ] && [ "$(grep -c '^kvfs top - ' "$tmp/once")" = 1 ] &&
	grep -q '^L1 ' "$tmp/once" && grep -q '^L2 ' "$tmp/once" &&
	ok "top --once: one frame, exit 0" || bad "top --once: exit $rc: $(cat "$tmp/once" "$tmp/err")"
if grep -q "$(printf '\033')" "$tmp/once" || grep -q 'q quits' "$tmp/once"; then
	bad "top --once to a pipe: escape codes or a q hint"
else
	ok "top --once to a pipe: no escape codes"
fi
"$CTL" top -n 2 -d 0.3 "$tmp/m" >"$tmp/two" 2>&1
[ "$(grep -c '^kvfs top - ' "$tmp/two")" = 2 ] &&
	ok "top -n 2 to a pipe: two frames" || bad "top -n 2: $(cat "$tmp/two")"

# --- --json: one object a line, the load in it
"$CTL" top --json --iterations 3 --interval 0.4 "$tmp/m" >"$tmp/json" 2>"$tmp/err"
rc=$?
if [ "$rc" = 0 ] && "$PY" - "$tmp/json" <<'PY'; then
import json, sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if l]
assert len(lines) == 3, len(lines)
for l in lines:
    o = json.loads(l)
    assert set(o["tiers"]) == {"l1", "l2", "l3"}, o["tiers"]
    assert o["tiers"]["l1"]["enabled"] and o["tiers"]["l2"]["enabled"]
    assert not o["tiers"]["l3"]["enabled"]
    assert 0.3 < o["interval_s"] < 2, o["interval_s"]
    for k in ("in_bytes_per_s", "out_bytes_per_s", "publishes_per_s",
              "evictions_per_s", "promotions_per_s", "leases", "errors",
              "l2_use"):
        assert k in o, k
assert max(json.loads(l)["publishes_per_s"] for l in lines) > 0
assert max(json.loads(l)["in_bytes_per_s"] for l in lines) > 0
r = json.loads(lines[-1])["tiers"]["l1"]["hit_ratio"]
assert r is None or 0 <= r <= 1, r
PY
	ok "top --json: 3 lines of JSON with every tier and the load"
else
	bad "top --json: exit $rc: $(head -c 600 "$tmp/json") $(cat "$tmp/err")"
fi

printf '1..%d\n' "$n"
[ "$fails" = 0 ]
