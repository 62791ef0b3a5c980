#!/usr/bin/env bash
# Self-check of hack/commit-msg (make lint runs it): sample messages, good and
# bad, and the warnings each must (or must not) produce. The hook must exit 0
# on every one of them. Runs every sample, then exits 1 if any mismatched.
set -euo pipefail
hook=$(cd "$(dirname "$0")" && pwd)/commit-msg
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# No user or system git config (a core.commentChar there would change the parse).
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
cd "$tmp"

failed=0
n=0
long() { printf "%${1}s" '' | tr ' ' "${2:-x}"; }

# check NAME EXPECT MESSAGE: EXPECT is "none" or a space-separated list of
# subject-length, imperative, second-line, body-line (the warnings that must
# appear; the others must not).
check() {
	local name=$1 expect=$2 msg=$3 err rc=0 kind pat want got
	n=$((n + 1))
	printf '%s' "$msg" >"$tmp/msg"
	err=$("$hook" "$tmp/msg" 2>&1 >/dev/null) || rc=$?
	if ((rc != 0)); then
		echo "FAIL $name: the hook exited $rc (it must never block)"; failed=1
	fi
	for kind in subject-length imperative second-line body-line; do
		case $kind in
		subject-length) pat='the subject is [0-9]+ characters' ;;
		imperative) pat='write it in the imperative' ;;
		second-line) pat='the second line is not blank' ;;
		body-line) pat='body line [0-9]+ is [0-9]+ characters' ;;
		esac
		want=0; [[ " $expect " == *" $kind "* ]] && want=1
		got=0; grep -qE "$pat" <<<"$err" && got=1
		if ((want != got)); then
			echo "FAIL $name: $kind warning $( ((want)) && echo missing || echo unexpected)"
			[[ -n $err ]] && sed 's/^/    /' <<<"$err"
			failed=1
		fi
	done
	if [[ $expect == none && -n $err ]]; then
		echo "FAIL $name: expected no output, got:"; sed 's/^/    /' <<<"$err"; failed=1
	fi
}

check "short imperative subject" none \
	$'Add the nemesis and run it in CI\n'
check "area prefix, body wrapped" none \
	$'fuse: report a write-behind failure on close\n\nThe close returned 0 while the write-behind had failed; measured:\n3 of 3 runs.\n'
check "subject of exactly 72 characters" none \
	"Add $(long 68)"
check "72 characters counted as characters, not bytes" none \
	"Add $(long 68 '→')"
check "imperative words ending in ed/ing" none \
	$'Embed the checksum in the segment header\n'
check "area prefix, then an imperative ending in ing" none \
	$'docs: bring the journal format up to date\n'
check "comments and the verbose diff are not the message" none \
	"Fix the lease renewal

Body.
# Please enter the commit message for your changes.
# $(long 120)
# ------------------------ >8 ------------------------
# Do not modify or remove the line above.
diff --git a/x b/x
+$(long 200)
"
check "leading blank lines are dropped" none \
	$'\n\nFix the lease renewal\n\nBody.\n'
check "body line of exactly 100 characters" none \
	"Fix the lease renewal

$(long 100)
"

check "subject of 73 characters" subject-length \
	"Add $(long 69)"
check "a log line as subject (\"replicated node:\" is no area)" "subject-length imperative" \
	$'replicated node: NodeExpandVolume answers once statfs through the mount sees the new size, the old one is kept\n'
check "past tense" imperative \
	$'Added the nemesis\n'
check "gerund after area prefix" imperative \
	$'fleet: fixing the rollout gate\n'
check "past tense after fixup!" imperative \
	$'fixup! docs: Updated the journal format\n'
check "second line not blank" second-line \
	$'Fix the lease renewal\nit expired early\n'
check "body line of 101 characters" body-line \
	"Fix the lease renewal

short line
$(long 101)
"
check "everything at once" "subject-length imperative second-line body-line" \
	"fuse: reworked $(long 80)
no blank line
$(long 150)
"
check "empty message" none ''
check "only comments" none $'# nothing\n# here\n'

# A custom comment character.
GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.commentChar GIT_CONFIG_VALUE_0=';' \
	check "core.commentChar=;" none \
	"Fix the lease renewal

Body.
; $(long 120)
"

# A missing file is no reason to block either.
if ! "$hook" "$tmp/does-not-exist" 2>/dev/null; then
	echo "FAIL missing file: the hook exited non-zero"; failed=1
fi

if ((failed)); then
	echo "hack/commit-msg-test.sh: FAILED"
	exit 1
fi
echo "hack/commit-msg-test.sh: $n messages ok"
