#!/usr/bin/env bash
# build.sh -- build the libFuzzer harnesses with clang (ASan + UBSan + libFuzzer), outside meson's gcc build.
#
# Usage: tests/fuzz/build.sh OUTDIR [NAME...]     (NAME: pathmap samples fde ...; default: all)
#
# Every lib/*.c is compiled with coverage and sanitizers into OUTDIR/obj/,
# archived into OUTDIR/libicpp-fuzz.a, and each OUTDIR/fuzz_NAME is linked
# from tests/fuzz/fuzz_NAME.c and that archive (the linker takes only the
# modules a harness needs).  Out-of-date files only; concurrent runs (meson
# runs the fuzz tests in parallel) serialize on OUTDIR/.lock.  A lib file that
# does not compile is reported and left out: only a harness that needs it
# fails (to link).
#
# Exits 77 (meson's "skipped") when clang or its libFuzzer runtime is missing,
# after saying which Debian packages provide them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
out=${1:?usage: build.sh OUTDIR [NAME...]}
shift
mkdir -p "$out/obj"
out=$(cd "$out" && pwd)

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in "$here"/fuzz_*.c; do n=${f##*/fuzz_}; names+=("${n%.c}"); done
fi

cc=${CLANG:-}
if [ -z "$cc" ]; then
  for c in clang clang-14 clang-15 clang-16; do
    if command -v "$c" >/dev/null; then cc=$c; break; fi
  done
fi
if [ -z "$cc" ]; then
  echo "fuzz: SKIPPED: clang not found (Debian: apt-get install clang libclang-rt-14-dev)"
  exit 77
fi

exec 9>"$out/.lock"
flock 9

# Can this clang link a libFuzzer binary?  (libclang-rt-14-dev holds the runtime.)
probe=$out/.probe-ok
if [ ! -f "$probe" ] || [ "$(cat "$probe")" != "$(command -v "$cc")" ]; then
  printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n' \
    >"$out/.probe.c"
  if ! "$cc" -fsanitize=fuzzer,address,undefined "$out/.probe.c" -o "$out/.probe" 2>"$out/.probe.log"; then
    echo "fuzz: SKIPPED: $cc cannot link -fsanitize=fuzzer,address,undefined (libFuzzer runtime missing?"
    echo "      Debian: apt-get install clang libclang-rt-14-dev):"
    sed 's/^/      /' "$out/.probe.log" | head -5
    exit 77
  fi
  command -v "$cc" >"$probe"
fi

cflags=(-g -O1 -fno-omit-frame-pointer -std=gnu11 -D_GNU_SOURCE -Wall -Wno-unused-parameter
        -DPACKAGE='"icpp"' -DPACKAGE_VERSION='"0.1.0"'
        -fno-sanitize-recover=all -I"$src/lib" -I"$here")
# shellcheck disable=SC2054  # -Wl,--as-needed is one argument
libs=(-Wl,--as-needed -ldw -lelf -lbfd -lpfm -lZydis -lz)

# newer TARGET FILE...: is any FILE newer than TARGET (or TARGET missing)?
newer() {
  local t=$1; shift
  [ -e "$t" ] || return 0
  local f
  for f in "$@"; do [ "$f" -nt "$t" ] && return 0; done
  return 1
}

headers=("$src"/lib/*.h "$here/build.sh")
objs=()
changed=0
for c in "$src"/lib/*.c; do
  o=$out/obj/$(basename "${c%.c}").o
  if newer "$o" "$c" "${headers[@]}"; then
    rm -f "$o"
    if "$cc" "${cflags[@]}" -fsanitize=fuzzer-no-link,address,undefined -c "$c" -o "$o" 2>"$o.log"; then
      rm -f "$o.log"
      changed=1
    else
      echo "fuzz: warning: lib/$(basename "$c") does not compile with $cc; left out of the fuzzers:"
      head -5 "$o.log" | sed 's/^/      /'
      rm -f "$o"
      changed=1
      continue
    fi
  fi
  objs+=("$o")
done
# Objects of lib files that are gone.
for o in "$out"/obj/*.o; do
  [ -e "$o" ] || continue
  [ -e "$src/lib/$(basename "${o%.o}").c" ] || { rm -f "$o"; changed=1; }
done
ar=$out/libicpp-fuzz.a
if [ $changed = 1 ] || [ ! -f "$ar" ]; then
  rm -f "$ar"
  ar rcs "$ar" "${objs[@]}"
fi

status=0
for n in "${names[@]}"; do
  h=$here/fuzz_$n.c
  bin=$out/fuzz_$n
  [ -f "$h" ] || { echo "fuzz: no harness $h"; status=1; continue; }
  if newer "$bin" "$h" "$here/fuzz.h" "$ar" "${headers[@]}"; then
    if ! "$cc" "${cflags[@]}" -fsanitize=fuzzer,address,undefined "$h" "$ar" "${libs[@]}" -o "$bin.tmp"; then
      echo "fuzz: building fuzz_$n failed"
      status=1
      continue
    fi
    mv "$bin.tmp" "$bin"
  fi
done
exit $status
