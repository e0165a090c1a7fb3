#!/usr/bin/env bash
# scripts/lib/stacks_on_timeout.sh: a command that ends keeps its status and is not held to
# the limit; one that hangs is killed with every process it started, exits 124, and leaves
# each process's threads' stacks behind, by gdb where this machine has it and from /proc
# without it.
#
#   stacks_on_timeout_test.sh SCRIPT
set -u
script="$1"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# The processes whose command line is the hang's "sleep 123.25" or "sleep 123.5" (from /proc:
# a fresh machine may have no procps).
survivors() {
  local cmdline pid
  for cmdline in /proc/[0-9]*/cmdline; do
    pid="${cmdline#/proc/}" && pid="${pid%/cmdline}"
    case "$(tr '\0' ' ' <"$cmdline" 2>/dev/null)" in
      "sleep 123.25 " | "sleep 123.5 ") echo "$pid" ;;
    esac
  done
}

# Its own status, at once.
start=$SECONDS
"$script" 30 bash -c 'exit 3'
rc=$?
((rc == 3)) || fail "a command's own status: got $rc, want 3"
((SECONDS - start < 10)) || fail "a command that ended at once was held $((SECONDS - start)) s"

# A hang of three processes (a shell and its two children), each with a duration no other
# process here has, so that a survivor is found by it.
# (Into a file: a command substitution would wait for every writer of its pipe.)
log="$(mktemp /tmp/stacks-test.XXXXXX)"
trap 'rm -f "$log"' EXIT
for gdb in gdb none; do
  STACKS_GDB=$gdb "$script" 1 bash -c 'sleep 123.25 & sleep 123.5 & wait' >"$log" 2>&1
  rc=$?
  out="$(cat "$log")"
  ((rc == 124)) || fail "[$gdb] a hang's status: got $rc, want 124"
  for what in "(bash): bash -c" "(sleep): sleep 123.25" "(sleep): sleep 123.5"; do
    grep -qF "$what" <<<"$out" || fail "[$gdb] no stacks of '$what' in: $out"
  done
  # gdb's stacks where it may attach (ptrace); /proc's lines without gdb, or where it may not.
  proc_lines() { grep -qE '^thread [0-9]+ \(sleep\): state S, in ' <<<"$out"; }
  if [ "$gdb" = none ] || ! command -v gdb >/dev/null; then
    proc_lines || fail "[$gdb] no /proc thread lines in: $out"
  elif grep -q '(gdb could not attach' <<<"$out"; then
    proc_lines || fail "[$gdb] gdb could not attach, and no /proc thread lines in: $out"
  else
    grep -qE '^#[0-9]+ .*nanosleep' <<<"$out" || fail "[$gdb] no gdb stack through nanosleep in: $out"
  fi
  sleep 0.5
  survivors="$(survivors)"
  if [ -n "$survivors" ]; then
    fail "[$gdb] a process of the hang outlived it: $survivors"
    kill -KILL $survivors 2>/dev/null
  fi
done

# Arguments it cannot take.
"$script" soon true 2>/dev/null
(($? == 2)) || fail "a limit that is no number was taken"

((failures == 0)) && echo "stacks_on_timeout: all checks passed"
exit $((failures == 0 ? 0 : 1))
