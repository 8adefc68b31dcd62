#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2015
# Unit: the Dockerfile's runtime stage installs every shared library the
# binary needs (and the librdkafka the build stage builds from source needs). There is no Docker engine here, so the check works from the
# built binary on this Debian bookworm host, the same release as the image:
#  - each library the binary links directly (DT_NEEDED) resolves, with ldd, to
#    a file of a Debian package that the runtime stage's `apt-get install`
#    names explicitly (libc6, libstdc++6 and libgcc-s1 come with the base);
#  - each library loaded indirectly belongs to a named package, the base, or
#    the Depends closure of the named packages (apt installs those);
#  - the runtime stage is debian:bookworm-slim, installs no -dev package,
#    runs as 65532:65532 and has the binary as its entrypoint; the build stage
#    is debian:bookworm and builds without tests.
# Usage: dockerfile_runtime_libs.sh <path to the built outbox-operator> [Dockerfile]
source "$(dirname "$0")/lib.sh"

binary=${1:-}
dockerfile=${2:-$REPO_ROOT/Dockerfile}
[ -n "$binary" ] || die "usage: $0 <path to the built outbox-operator binary> [Dockerfile]"
[ -x "$binary" ] || die "$binary is not an executable file (build the outbox-operator target first)"
[ -f "$dockerfile" ] || die "$dockerfile not found"
for tool in ldd readelf dpkg dpkg-query; do
  command -v "$tool" >/dev/null || die "$tool is needed"
done
. /etc/os-release
[ "${ID:-}" = debian ] && [ "${VERSION_ID:-}" = 12 ] ||
  die "this host is ${PRETTY_NAME:-unknown}; package names only match the image on Debian 12 (bookworm)"

# --- the Dockerfile's stages ----------------------------------------------------------
# Join continuation lines, then split into stages at each FROM.
joined=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$dockerfile")
stage_count=$(grep -c '^FROM ' <<<"$joined")
[ "$stage_count" -ge 2 ] && pass "multi-stage build ($stage_count stages)" || fail "the Dockerfile is not multi-stage"
build_stage=$(awk '/^FROM /{n++} n==1' <<<"$joined")
runtime_stage=$(awk -v last="$stage_count" '/^FROM /{n++} n==last' <<<"$joined")
expect_contains "build stage is debian:bookworm" "$(head -1 <<<"$build_stage")" "FROM debian:bookworm "
expect_contains "build stage builds without tests" "$build_stage" "-DOUTBOX_BUILD_TESTS=OFF"
expect_contains "runtime stage is debian:bookworm-slim" "$(head -1 <<<"$runtime_stage")" "FROM debian:bookworm-slim"
expect_contains "runtime stage runs as 65532:65532" "$(grep '^USER ' <<<"$runtime_stage")" "USER 65532:65532"
expect_contains "entrypoint is the binary" "$(grep '^ENTRYPOINT ' <<<"$runtime_stage")" '["/usr/local/bin/outbox-operator"]'

# The package names on the runtime stage's apt-get install line(s).
mapfile -t runtime_pkgs < <(grep -o 'apt-get install[^&;]*' <<<"$runtime_stage" |
  tr -s ' ' '\n' | grep -v -e '^apt-get$' -e '^install$' -e '^-' -e '^$' | sort -u)
[ ${#runtime_pkgs[@]} -gt 0 ] || die "no apt-get install line in the runtime stage"
pass "runtime stage installs: ${runtime_pkgs[*]}"
dev=$(printf '%s\n' "${runtime_pkgs[@]}" | grep -e '-dev$' || true)
expect_eq "no -dev package in the runtime stage" "$dev" ""
for p in "${runtime_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
    fail "runtime package $p is not a bookworm package installed on this host (misspelt?)"
done

# --- what the binary loads ---------------------------------------------------------------
in_list() { local x=$1; shift; local y; for y in "$@"; do [ "$x" = "$y" ] && return 0; done; return 1; }
base_pkgs=(libc6 libstdc++6 libgcc-s1)
# Package of a library file, without the :arch suffix. ldd may print /lib/... while
# dpkg knows /usr/lib/... (merged /usr) or the reverse: try both.
pkg_of() {
  local f=$1 alt out
  case $f in /usr/lib/*) alt=${f#/usr} ;; /lib/*) alt=/usr$f ;; *) alt=$f ;; esac
  out=$( (dpkg -S "$f" 2>/dev/null || dpkg -S "$alt" 2>/dev/null || dpkg -S "$(readlink -f "$f")" 2>/dev/null) | head -1) || true
  [ -n "$out" ] || return 1
  echo "${out%%:*}" | sed 's/:.*//'
}

ldd_out=$(ldd "$binary") || die "ldd $binary failed"
missing=$(grep 'not found' <<<"$ldd_out" || true)
expect_eq "every library resolves" "$missing" ""
declare -A path_of=()
while read -r soname _ path _; do
  [[ "$path" == /* ]] && path_of[$soname]=$path
done < <(grep '=>' <<<"$ldd_out")

needed_of() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
mapfile -t needed < <(needed_of "$binary")
[ ${#needed[@]} -gt 0 ] || die "$binary has no DT_NEEDED entries (static?)"
# Libraries the build stage makes from source (scripts/librdkafka.sh into /usr/local) and
# the runtime stage copies: not from a package, so what they link counts as linked directly.
# The C++ library first: it links the C one, which the binary may not name itself.
built_sonames=(librdkafka++.so.1 librdkafka.so.1)
expect_contains "build stage builds librdkafka from source" "$build_stage" "scripts/librdkafka.sh /usr/local"
expect_contains "runtime stage copies the build stage's /out" "$runtime_stage" "COPY --from=build /out/ /"
expect_contains "runtime stage refreshes the loader cache for /usr/local/lib" "$runtime_stage" "RUN ldconfig"
for so in "${built_sonames[@]}"; do
  in_list "$so" "${needed[@]}" || continue
  expect_contains "build stage puts $so into /out" "$build_stage" "/out/usr/local/lib/$so"
  [ -n "${path_of[$so]:-}" ] || continue
  for dep in $(needed_of "${path_of[$so]}"); do
    [[ $dep == ld-linux* ]] && continue # the dynamic loader: libc6, in the base image
    in_list "$dep" "${needed[@]}" || needed+=("$dep")
  done
done
for so in "${needed[@]}"; do
  path=${path_of[$so]:-}
  if [ -z "$path" ]; then fail "direct dependency $so did not resolve"; continue; fi
  if in_list "$so" "${built_sonames[@]}"; then pass "direct $so: built from source by the build stage"; continue; fi
  pkg=$(pkg_of "$path") || { fail "direct dependency $so ($path) is not from a Debian package"; continue; }
  if in_list "$pkg" "${runtime_pkgs[@]}"; then pass "direct $so from $pkg: installed by the runtime stage"
  elif in_list "$pkg" "${base_pkgs[@]}"; then pass "direct $so from $pkg: in the base image"
  else fail "direct $so comes from package $pkg, which the runtime stage does not install"
  fi
done

# Depends closure of the named packages (what apt pulls in), from the local dpkg database.
declare -A closure=()
queue=("${runtime_pkgs[@]}" "${base_pkgs[@]}")
while [ ${#queue[@]} -gt 0 ]; do
  p=${queue[0]}; queue=("${queue[@]:1}")
  [ -n "${closure[$p]:-}" ] && continue
  closure[$p]=1
  deps=$(dpkg-query -W -f='${Pre-Depends}, ${Depends}' "$p" 2>/dev/null || true)
  # Each comma-separated item may list alternatives (a | b); take every installed one.
  while read -r d; do
    [ -n "$d" ] || continue
    dpkg-query -W -f='${Status}' "$d" 2>/dev/null | grep -q 'install ok installed' && queue+=("$d")
  done < <(tr ',|' '\n' <<<"$deps" | sed -e 's/([^)]*)//g' -e 's/:any//' -e 's/^ *//' -e 's/ *$//')
done
indirect_bad=()
for so in "${!path_of[@]}"; do
  in_list "$so" "${needed[@]}" && continue
  pkg=$(pkg_of "${path_of[$so]}") || { indirect_bad+=("$so (no package)"); continue; }
  [ -n "${closure[$pkg]:-}" ] || indirect_bad+=("$so ($pkg)")
done
expect_eq "every indirect library comes with the named packages (${#path_of[@]} libraries, closure of ${#closure[@]} packages)" \
  "${indirect_bad[*]}" ""

# A named package the binary does not need is dead weight (ca-certificates is data, not a library).
for p in "${runtime_pkgs[@]}"; do
  [ "$p" = ca-certificates ] && continue
  used=0
  for so in "${needed[@]}"; do
    [ -n "${path_of[$so]:-}" ] && [ "$(pkg_of "${path_of[$so]}")" = "$p" ] && used=1
  done
  [ $used = 1 ] && pass "runtime package $p is linked directly" ||
    printf 'note  runtime package %s is not linked directly (kept for a transitive or dlopen use?)\n' "$p"
done
finish
