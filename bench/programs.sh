# programs.sh -- the bench programs: Debian source package, build recipe, binary, input sets.
# Sourced by bench/run (bash).  To add a program: append its name to PROGRAMS,
# fill PKG, BIN and INPUTS, and write build_NAME.
#
#   PKG[NAME]     Debian source package, fetched with `apt-get source`
#   BIN[NAME]     file name of the binary that build_NAME leaves in OUT
#   INPUTS[NAME]  input sets, one per line: ID GENERATOR SCALE ARGS...
#                 GENERATOR and SCALE go to gen_inputs.py (which writes one
#                 file); in ARGS, @FILE@ stands for that file, a word
#                 <@FILE@ means "the file on standard input", and @OUT@ is a
#                 scratch file for output (never /dev/null: tcc, for one,
#                 unlinks its output file first -- as root that deletes
#                 /dev/null for the whole machine).  The first input
#                 set is the one overhead figures run ("A"); every set is
#                 trained and measured against every other ("train on one,
#                 measure on another").
#   build_NAME SRC OUT  build from a private copy SRC of the unpacked source,
#                 into directory OUT, with $BENCH_CFLAGS (the caller sets
#                 -O2 -g and -fno-omit-frame-pointer or -fomit-frame-pointer).
#                 Builds are minimal: only the one binary, no tests, no docs.
#
# Chosen for different call structure: a compressor with a few hot loops
# (bzip2), a recursive-descent compiler (tcc), a bytecode interpreter with
# C<->Lua re-entry, pcall/longjmp and coroutines (lua5.4), and a database
# engine with a deep parser/planner/VDBE stack (sqlite3).

PROGRAMS=(bzip2 tcc lua sqlite3)
declare -A PKG BIN INPUTS

PKG[bzip2]=bzip2
BIN[bzip2]=bzip2
INPUTS[bzip2]="text bzip2_text 1 -c @FILE@
repetitive bzip2_repetitive 1 -c @FILE@
decompress bzip2_compressed 1 -dc @FILE@"
build_bzip2() {   # upstream Makefile links a shared libbz2 (Debian patch): one static binary instead
  local src=$1 out=$2
  (cd "$src" && gcc $BENCH_CFLAGS -D_FILE_OFFSET_BITS=64 -o "$out/bzip2" \
     blocksort.c huffman.c crctable.c randtable.c compress.c decompress.c bzlib.c bzip2.c)
}

PKG[tcc]=tcc
BIN[tcc]=tcc
INPUTS[tcc]="nested tcc_nested 1 -c @FILE@ -o @OUT@
decls tcc_decls 1 -c @FILE@ -o @OUT@"
build_tcc() {     # --debug: keep the symbol table (tcc's Makefile strips by default)
  local src=$1 out=$2
  (cd "$src" && ./configure --cc=gcc --debug --extra-cflags="$BENCH_CFLAGS" >/dev/null \
     && make -j"$(nproc)" tcc >/dev/null && cp tcc "$out/tcc")
}

PKG[lua]=lua5.4
BIN[lua]=lua
INPUTS[lua]="objects lua_objects 1 @FILE@
strings lua_strings 1 @FILE@"
build_lua() {     # Debian's Makefile goes through libtool; compile the interpreter directly
  local src=$1 out=$2
  (cd "$src/src" \
     && echo '#define DEB_HOST_MULTIARCH "x86_64-linux-gnu"' > lua5.4-deb-multiarch.h \
     && ls *.c | grep -vx 'luac.c' \
        | xargs -P"$(nproc)" -I{} gcc -std=gnu99 $BENCH_CFLAGS -DLUA_COMPAT_5_3 -DLUA_USE_LINUX -c {} \
     && gcc -o "$out/lua" ./*.o -Wl,-E -lm -ldl)
}

PKG[sqlite3]=sqlite3
BIN[sqlite3]=sqlite3
INPUTS[sqlite3]="oltp sqlite_oltp 1 :memory: <@FILE@
analytics sqlite_analytics 1 :memory: <@FILE@"
build_sqlite3() { # make the amalgamation (needs tclsh), then one static-linked shell
  local src=$1 out=$2
  (cd "$src" && ./configure --disable-tcl --disable-readline >/dev/null \
     && make -j"$(nproc)" sqlite3.c shell.c >/dev/null \
     && gcc $BENCH_CFLAGS -DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION \
          -o "$out/sqlite3" shell.c sqlite3.c -lm)
}

# Programs as the distribution ships them: the installed binary (stripped,
# built without frame pointers), no build.  Appended to the programs of the
# full and --quick runs; their one build is called "distro".
#   DISTRO_BIN[NAME]  the installed binary
#   PKG[NAME]         the Debian binary package that installs it (bench/run installs it)
#   DBG[NAME]         its separate debug packages (space-separated: the program's, its
#                     libraries'), each installed by bench/run when Debian's
#                     archive has it (the -dbgsym packages of the debian-debug archive
#                     are not reachable from the bench machines: a -dbg package of the
#                     main archive, or none); libc's (libc6-dbg) comes with scripts/deps
#   INPUTS[NAME]      as above
# gas: binutils' x86-64 assembler -- a table-driven parser and encoder, hash
# tables, an expression evaluator and macro processor, libbfd for the output;
# Debian's main archive has its debug package.
DISTRO_PROGRAMS=(gas)
declare -A DISTRO_BIN DBG
DISTRO_BIN[gas]=/usr/bin/x86_64-linux-gnu-as
PKG[gas]=binutils-x86-64-linux-gnu
DBG[gas]="binutils-x86-64-linux-gnu-dbg libbinutils-dbg"   # gas, and libbfd it links
INPUTS[gas]="insns gas_insns 1 -o @OUT@ @FILE@
macros gas_macros 1 -o @OUT@ @FILE@"

# Packages the builds need beyond build-essential (tclsh for sqlite3's amalgamation).
BUILD_DEPS=(tcl)
