# Cache entries that any number of scripts may fill at once, and that a fill killed half way
# cannot poison. Sourced, not run.
# shellcheck shell=bash disable=SC2034  # OUTBOX_CACHE is read by the scripts that source this
#
# An entry is a directory. It is trusted only when its seal (ENTRY/.complete) names the key
# it was filled for AND the digest of what it held when sealed (every file's path and size,
# every symlink's target): a stamp alone proves nothing once a file has gone missing or been
# truncated. A fill runs under the entry's lock (ENTRY.lock beside it), into a new directory
# beside the entry (ENTRY.fill-PID, same filesystem), is sealed there, and replaces the
# entry with renames: a reader sees the old entry or the new one, never half of one. A fill
# killed half way leaves only its ENTRY.fill-* directory, which the next filler removes
# (holding the lock, it knows nobody is filling it).
#
# Fills that cannot move once built (a prefix compiled into rpaths) fill the entry in place
# under the lock instead (cache_fill_in_place): the seal is still the last thing written, and
# an unsealed or damaged entry is emptied before the next fill.

# The cache's root: XDG_CACHE_HOME is honoured, so a fresh cache is one variable away.
OUTBOX_CACHE="${TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/outbox-operator-testbed}"

# cache_digest DIR: what DIR holds, as one line (bytecode Python writes beside its sources
# on import is left out: using an entry must not unseal it).
cache_digest() {
  (cd "$1" && find . \( -name __pycache__ -o -name '*.pyc' \) -prune -o -path ./.complete -prune -o \
    \( -type f -printf 'f %P %s\n' \) -o \( -type l -printf 'l %P %l\n' \) | LC_ALL=C sort | sha256sum | cut -c1-64)
}

# cache_sealed DIR KEY: true when DIR was sealed for KEY and still holds what it held then.
cache_sealed() {
  local seal="$1/.complete" key digest
  [ -f "$seal" ] || return 1
  { read -r key && read -r digest; } <"$seal" || return 1
  [ "$key" = "$2" ] && [ "$digest" = "$(cache_digest "$1")" ]
}

# cache_seal DIR KEY: records KEY and DIR's digest (the last step of a fill).
cache_seal() {
  printf '%s\n%s\n' "$2" "$(cache_digest "$1")" >"$1/.complete.tmp"
  mv -f "$1/.complete.tmp" "$1/.complete"
}

# cache_lock ENTRY: waits for ENTRY's lock and holds it until the calling (sub)shell exits.
# The descriptor is closed in the children of service processes started later (the test
# bed's spawn closes fd 9; fills here run in subshells that end with the fill).
cache_lock() {
  mkdir -p "$(dirname "$1")"
  exec {cache_lock_fd}>"$1.lock"
  flock "$cache_lock_fd"
}

# cache_fill ENTRY KEY FILL [ARG...]: makes ENTRY a sealed fill for KEY. FILL is called as
# `FILL DIR ARG...` with an empty DIR to fill, in a subshell with errexit (its lock and its
# directory changes end with it); a failing FILL leaves ENTRY as it was and returns its
# status. Quick when ENTRY is sealed for KEY already. Call it as a plain command, not inside
# `if`, `||` or `&&`: there bash ignores errexit inside FILL too.
cache_fill() {
  local entry=$1 key=$2 fill=$3
  shift 3
  cache_sealed "$entry" "$key" && return 0
  (
    cache_lock "$entry" || exit 1
    cache_sealed "$entry" "$key" && exit 0
    rm -rf "$entry".fill-* "$entry".old-*  # left by fills that were killed: nobody fills them now
    work="$entry.fill-$BASHPID"
    mkdir -p "$work" || exit 1
    (set -e; "$fill" "$work" "$@")
    rc=$?
    if [ "$rc" -ne 0 ]; then rm -rf "$work"; exit "$rc"; fi
    cache_seal "$work" "$key" || exit 1
    if [ -e "$entry" ]; then mv -T "$entry" "$entry.old-$BASHPID" || exit 1; fi
    mv -T "$work" "$entry" || exit 1
    rm -rf "$entry.old-$BASHPID"
  )
}

# cache_fill_in_place ENTRY KEY FILL [ARG...]: as cache_fill, for fills that must be built at
# ENTRY's own path; FILL is called as `FILL ENTRY ARG...` with ENTRY emptied first.
cache_fill_in_place() {
  local entry=$1 key=$2 fill=$3
  shift 3
  cache_sealed "$entry" "$key" && return 0
  (
    cache_lock "$entry" || exit 1
    cache_sealed "$entry" "$key" && exit 0
    rm -rf "$entry" && mkdir -p "$entry" || exit 1
    (set -e; "$fill" "$entry" "$@")
    rc=$?; [ "$rc" -eq 0 ] || exit "$rc"
    cache_seal "$entry" "$key"
  )
}

# cache_prune ENTRY...: removes entries nobody is filling (their lock is free), with their
# locks: older versions of an entry once the current one is sealed.
cache_prune() {
  local e fd
  for e in "$@"; do
    [ -e "$e" ] || continue
    exec {fd}>"$e.lock"
    # The lock file stays: a waiter may hold it open already.
    if flock -n "$fd"; then rm -rf "$e" "$e".fill-* "$e".old-*; fi
    exec {fd}>&-
  done
}
