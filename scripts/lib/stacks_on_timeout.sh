#!/usr/bin/env bash
# stacks_on_timeout.sh SECONDS COMMAND...: runs COMMAND as timeout(1) would (exit 124 when
# it runs past SECONDS, else COMMAND's own status), but before killing it writes to stderr
# the stack of every thread of every process it started: with gdb where the machine has it,
# else eu-stack, else what /proc says of each thread (its name, state, the kernel function it
# sleeps in, and its kernel stack where readable). A run that hangs then leaves in its log
# where each thread stood, which a plain timeout does not: a GPU lease of minutes cannot be
# spent finding that out a second time.
#
# COMMAND runs in a process group of its own (setsid), so that the processes it starts (ranks
# under a launcher) are found, and killed, with it. STACKS_GDB names the debugger (default gdb;
# "none" skips it).
set -u
if (($# < 2)) || ! [[ "$1" =~ ^[0-9]+$ ]]; then
  echo "usage: stacks_on_timeout.sh SECONDS COMMAND..." >&2
  exit 2
fi
limit="$1"
shift
marks="$(mktemp -d /tmp/loom-stacks.XXXXXX)"
trap 'rm -rf "$marks"' EXIT

# The processes of process group $1, the group's leader first.
members() {
  local group="$1" stat pid rest
  for stat in /proc/[0-9]*/stat; do
    # Fields after the command's name (which may hold spaces) in ")": state, ppid, pgrp.
    rest="$(cat "$stat" 2>/dev/null)" || continue
    pid="${stat#/proc/}" && pid="${pid%/stat}"
    rest="${rest##*) }"
    read -r _ _ pgrp _ <<<"$rest"
    [ "$pgrp" = "$group" ] && echo "$pid"
  done | sort -n
}

# Every thread's stack of process $1, by the best means the machine has.
stacks_of() {
  local pid="$1" gdb="${STACKS_GDB:-gdb}" out tid
  echo "== process $pid ($(cat "/proc/$pid/comm" 2>/dev/null)): $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
  if [ "$gdb" != none ] && command -v "$gdb" >/dev/null; then
    out="$(timeout 60 "$gdb" -batch -nx -p "$pid" -ex 'thread apply all bt' 2>&1 |
           grep -vE '^\[(New LWP|Thread debugging|Inferior)|^Using host libthread_db|No such file or directory\.$')"
    if grep -q '^Thread ' <<<"$out"; then
      echo "$out"
      return
    fi
    echo "   ($gdb could not attach: $(tail -n 1 <<<"$out"))"
  fi
  if command -v eu-stack >/dev/null && out="$(timeout 60 eu-stack -p "$pid" 2>&1)"; then
    echo "$out"
    return
  fi
  for tid in $(ls "/proc/$pid/task" 2>/dev/null); do
    echo "thread $tid ($(cat "/proc/$pid/task/$tid/comm" 2>/dev/null)):" \
         "state $(awk '{print $3}' "/proc/$pid/task/$tid/stat" 2>/dev/null)," \
         "in $(cat "/proc/$pid/task/$tid/wchan" 2>/dev/null || echo '?')"
    sed 's/^/    /' "/proc/$pid/task/$tid/stack" 2>/dev/null
  done
}

setsid "$@" &
pid=$!
(
  sleep "$limit" &
  sleeper=$!
  trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
  wait "$sleeper"
  kill -0 "$pid" 2>/dev/null || exit 0
  touch "$marks/timed-out"
  {
    echo "stacks_on_timeout: still running after ${limit}s; every thread's stack, then SIGKILL:"
    for p in $(members "$pid"); do stacks_of "$p"; done
  } >&2
  kill -KILL -- "-$pid" 2>/dev/null
) &
watcher=$!
wait "$pid" 2>/dev/null  # (bash's own "Killed" line: the lines above say it)
rc=$?
kill "$watcher" 2>/dev/null
wait "$watcher" 2>/dev/null
[ -e "$marks/timed-out" ] && exit 124
exit "$rc"
