# tests/sh/check.sh - sourced by tests/sh/test_*.sh that report one line
# per check: `check DESCRIPTION COMMAND...` runs COMMAND, prints "ok: ..."
# or "FAIL: ..." and sets fail=1 on failure; end the test with `exit $fail`.
fail=0
check() { # description command...
	if "${@:2}"; then
		echo "ok: $1"
	else
		echo "FAIL: $1"
		fail=1
	fi
}
