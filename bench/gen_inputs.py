#!/usr/bin/env python3
"""gen_inputs.py -- the bench programs' input sets, generated deterministically.

Every input is a pure function of (generator, scale): a fixed-seed PRNG, no
clock, no system state, so two machines (or two runs) measure the same work.
`scale` 1.0 is sized for ~0.3-1 s of the uninstrumented -O2 build on the
2-core development VM; --smoke and --quick pass smaller scales.

Usage: gen_inputs.py OUTDIR GENERATOR SCALE     writes OUTDIR/<file>, prints its path
       gen_inputs.py --list                     the generators
The program table (programs.sh) names the generator of each input set.
"""
import bz2
import random
import sys

# ---------------------------------------------------------------- helpers

def _words(r, n):
    """n pseudo-words with a Zipf-like weight each (English-ish text)."""
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    lw = [12, 9, 8, 8, 7, 7, 6, 6, 6, 4, 4, 3, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1]
    words = ["".join(r.choices(letters, lw, k=r.randint(1, 10))) for _ in range(n)]
    cum, acc = [], 0.0
    for i in range(n):
        acc += 1.0 / (i + 1)
        cum.append(acc)
    return words, cum


def _text(seed, nbytes):
    r = random.Random(seed)
    words, cum = _words(r, 8000)
    out, n = [], 0
    while n < nbytes:
        line = " ".join(r.choices(words, cum_weights=cum, k=r.randint(5, 16)))
        line = line[0].upper() + line[1:] + r.choice([".", ".", ".", "?", "!", ";"]) + "\n"
        out.append(line)
        n += len(line)
    return "".join(out)[:nbytes].encode()

# ---------------------------------------------------------------- bzip2

def bzip2_text(scale):
    """English-like text: mainSort, the common compression path."""
    return "text.txt", _text(11, int(4_000_000 * scale))


def bzip2_repetitive(scale):
    """Long runs of short units with rare noise: bzip2 gives up on mainSort
    and takes fallbackSort -- a different set of call paths."""
    r = random.Random(12)
    nbytes = int(4_500_000 * scale)
    out = bytearray()
    while len(out) < nbytes:
        unit = bytes(r.randrange(256) for _ in range(r.randint(1, 6)))
        out += unit * r.randint(200, 6000)
        if r.random() < 0.3:
            out += bytes(r.randrange(256) for _ in range(r.randint(1, 40)))
    return "repetitive.bin", bytes(out[:nbytes])


def bzip2_compressed(scale):
    """A .bz2 of other text (stdlib bz2, level 9): the decompressor's paths."""
    return "text2.txt.bz2", bz2.compress(_text(13, int(6_000_000 * scale)), 9)

# ---------------------------------------------------------------- tcc

def _c_expr(r, depth, names):
    if depth <= 0 or r.random() < 0.15:
        return r.choice(names) if r.random() < 0.6 else str(r.randint(0, 999))
    k = r.random()
    if k < 0.55:
        op = r.choice(["+", "-", "*", "^", "|", "&", "<<", ">>", "<", "==", "&&", "||"])
        return "(" + _c_expr(r, depth - 1, names) + " " + op + " " + _c_expr(r, depth - 1, names) + ")"
    if k < 0.7:
        return "(" + _c_expr(r, depth - 1, names) + " ? " + _c_expr(r, depth - 2, names) + " : " \
               + _c_expr(r, depth - 2, names) + ")"
    if k < 0.85:
        return "-(" + _c_expr(r, depth - 1, names) + ")"
    return "h(" + _c_expr(r, depth - 1, names) + ", " + _c_expr(r, depth - 2, names) + ")"


def _c_block(r, depth, names, out, ind):
    for _ in range(r.randint(1, 3)):
        k = r.random()
        if depth > 0 and k < 0.35:
            out.append(ind + "if (" + _c_expr(r, 2, names) + ") {")
            _c_block(r, depth - 1, names, out, ind + " ")
            out.append(ind + "} else {")
            _c_block(r, depth - 1, names, out, ind + " ")
            out.append(ind + "}")
        elif depth > 0 and k < 0.55:
            out.append(ind + "while (" + _c_expr(r, 2, names) + ") {")
            _c_block(r, depth - 1, names, out, ind + " ")
            out.append(ind + " break;")
            out.append(ind + "}")
        else:
            out.append(ind + r.choice(names) + " = " + _c_expr(r, r.randint(1, 4), names) + ";")


def tcc_nested(scale):
    """Deeply nested expressions and blocks: the recursive-descent parser and
    code generator recurse tens of levels deep."""
    r = random.Random(21)
    # 24 function bodies, each compiled many times under new names: the
    # program's size grows with scale, its set of call paths does not (every
    # distinct nesting of statements and operators is a new call path of the
    # parser: random bodies alone would make training cost grow with scale).
    bodies = []
    for t in range(24):
        body = []
        _c_block(r, r.randint(3, 6), ["a", "b", "c", "x"], body, " ")
        e = "a"     # one very deep expression: 40-120 levels of recursion
        for d in range(r.randint(40, 120)):
            e = "(" + e + " + " + str(d) + ")" if d % 3 else "h(" + e + ", b)"
        body.append(" c = " + e + ";")
        bodies.append("\n".join(body))
    out = ["static int h(int a, int b) { return a * 31 + b; }"]
    for i in range(int(1500 * scale)):
        out.append("int f%d(int a, int b) {" % i)
        out.append(" int c = a ^ b, x = %d;" % i)
        out.append(bodies[i % len(bodies)])
        out.append(" return c + x;")
        out.append("}")
    return "nested.c", ("\n".join(out) + "\n").encode()


def tcc_paths(scale):
    """As many call paths as possible per byte (not an input set of programs.sh: the
    large path map of RESULTS.md section 6).  Every function has its own random body
    and one very deep expression whose every level is a random operator of another
    precedence (a call, a conditional, a negation...): each level reaches the parser's
    recursion through another chain of functions, so nearly every prefix of every
    expression is a new call path.  Scale 1 (64 functions): ~270 k paths."""
    r = random.Random(23)
    forms = ["(%s + %d)", "(%s * %d)", "(%s << %d)", "(%s == %d)", "(%s && %d)", "-(%s - %d)",
             "h(%s, %d)", "(%s ? %d : b)", "(%s | %d)"]
    out = ["static int h(int a, int b) { return a * 31 + b; }"]
    for i in range(max(1, int(64 * scale))):
        body = []
        _c_block(r, r.randint(3, 6), ["a", "b", "c", "x"], body, " ")
        e = "a"
        for d in range(r.randint(40, 120)):
            e = r.choice(forms) % (e, d)
        out.append("int f%d(int a, int b) {" % i)
        out.append(" int c = a ^ b, x = %d;" % i)
        out.extend(body)
        out.append(" c = " + e + ";")
        out.append(" return c + x;")
        out.append("}")
    return "paths.c", ("\n".join(out) + "\n").encode()


def tcc_decls(scale):
    """Wide, flat code: macros with arguments, structs, enums, switch tables,
    initialized arrays and strings -- the preprocessor, type and data paths."""
    r = random.Random(22)
    out = ["#define MAX(a, b) ((a) > (b) ? (a) : (b))",
           "#define CLAMP(v, lo, hi) MAX(lo, ((v) < (hi) ? (v) : (hi)))",
           "#define FIELD(t, n) t n; t n##_shadow",
           "#define STR(x) #x",
           "typedef unsigned long size_t;",
           "int printf(const char *, ...);"]
    for i in range(int(7000 * scale)):
        nf = r.randint(2, 8)
        out.append("enum e%d { %s };" % (i, ", ".join("E%d_%d = %d" % (i, k, k * 3) for k in range(nf))))
        out.append("struct s%d { %s };" % (i, " ".join(
            "FIELD(%s, f%d);" % (r.choice(["int", "long", "char *", "double", "unsigned short"]), k)
            for k in range(nf))))
        out.append("static const int tab%d[] = { %s };" % (i, ", ".join(str(r.randint(-99, 999))
                                                                       for _ in range(r.randint(8, 40)))))
        out.append("static const char *msg%d = STR(message_%d) \"%s\";" % (
            i, i, "".join(r.choices("abcdefgh ", k=r.randint(5, 60)))))
        out.append("int g%d(struct s%d *p, int v) {" % (i, i))
        out.append(" switch (v) {")
        for k in range(nf):
            out.append("  case E%d_%d: v = CLAMP(v + tab%d[%d], -5, 500); break;" % (i, k, i, k % 8))
        out.append("  default: v = MAX(v, (int)sizeof(struct s%d));" % i)
        out.append(" }")
        out.append(" p->f0_shadow = p->f0;")
        out.append(" return v + msg%d[0];" % i)
        out.append("}")
    return "decls.c", ("\n".join(out) + "\n").encode()

# ---------------------------------------------------------------- lua

def lua_objects(scale):
    """Objects, closures, recursion and sorting with a Lua comparator:
    the interpreter's call, table and GC paths."""
    n = max(1, int(240 * scale))
    src = """
local Account = {}
Account.__index = Account
function Account.new(id, balance) return setmetatable({id = id, balance = balance, log = {}}, Account) end
function Account:deposit(v) self.balance = self.balance + v; self.log[#self.log + 1] = v end
function Account:withdraw(v)
  if v > self.balance then error("insufficient funds") end
  self.balance = self.balance - v
end
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local function ack(m, n)
  if m == 0 then return n + 1 end
  if n == 0 then return ack(m - 1, 1) end
  return ack(m - 1, ack(m, n - 1))
end
local function counter()
  local c = 0
  return function(d) c = c + (d or 1); return c end
end
local total = 0
for round = 1, %d do
  local accts = {}
  for i = 1, 400 do accts[i] = Account.new(i, (i * 7919) %% 1000) end
  for i = 1, 4000 do
    local a = accts[(i * 31) %% #accts + 1]
    a:deposit(i %% 97)
    local ok = pcall(a.withdraw, a, (i * 13) %% 300)
    if not ok then total = total + 1 end
  end
  table.sort(accts, function(x, y) return x.balance < y.balance or (x.balance == y.balance and x.id < y.id) end)
  local c = counter()
  for i = 1, 2000 do c(i %% 3) end
  total = total + fib(16) + ack(2, 40) + c() + #accts[1].log
  collectgarbage("step")
end
print(total)
""" % n
    return "objects.lua", src.encode()


def lua_strings(scale):
    """String building, formatting and pattern matching, coroutines:
    lstrlib's matcher and the string table, a different mix from objects.lua."""
    n = max(1, int(100 * scale))
    src = """
local words = {}
local seed = 12345
local function rnd(m) seed = (seed * 1103515245 + 12345) %% 2147483648; return seed %% m end
for i = 1, 3000 do
  local w = {}
  for k = 1, rnd(8) + 2 do w[k] = string.char(97 + rnd(26)) end
  words[i] = table.concat(w)
end
local function producer(n)
  return coroutine.wrap(function()
    for i = 1, n do coroutine.yield(words[rnd(#words) + 1]) end
  end)
end
local count = 0
for round = 1, %d do
  local parts = {}
  for w in producer(3000) do parts[#parts + 1] = string.format("%%s=%%d;", w, #w) end
  local s = table.concat(parts)
  for k, v in s:gmatch("(%%a+)=(%%d+);") do count = count + #k - tonumber(v) end
  local t = s:gsub("[aeiou]+", string.upper):gsub("(%%u)(%%l)", "%%2%%1")
  count = count + #t + select(2, s:gsub("%%d", ""))
  local up = {}
  for i = 1, 500 do up[i] = (words[i]:rep(3)):upper():reverse():sub(2, -2) end
  count = count + #table.concat(up, ",")
end
print(count)
""" % n
    return "strings.lua", src.encode()

# ---------------------------------------------------------------- sqlite3

def sqlite_oltp(scale):
    """Many small statements: parse, prepare, B-tree point lookups and
    updates through an index, inside transactions."""
    r = random.Random(41)
    rows = int(50000 * scale)
    out = ["PRAGMA journal_mode=OFF;",
           "CREATE TABLE acct(id INTEGER PRIMARY KEY, owner TEXT, branch INTEGER, balance INTEGER);",
           "CREATE TABLE hist(id INTEGER PRIMARY KEY, acct INTEGER, delta INTEGER, note TEXT);",
           "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < %d) "
           "INSERT INTO acct SELECT x, 'owner' || (x * 7919 %% 1000), x %% 50, x * 37 %% 10000 FROM n;" % rows,
           "CREATE INDEX acct_owner ON acct(owner);",
           "CREATE INDEX acct_branch ON acct(branch, balance);",
           "BEGIN;"]
    for i in range(int(40000 * scale)):
        a = r.randint(1, rows)
        k = r.random()
        if k < 0.4:
            out.append("SELECT balance FROM acct WHERE id = %d;" % a)
        elif k < 0.7:
            d = r.randint(-500, 500)
            out.append("UPDATE acct SET balance = balance + %d WHERE id = %d;" % (d, a))
            out.append("INSERT INTO hist(acct, delta, note) VALUES (%d, %d, 'n%d');" % (a, d, i))
        elif k < 0.85:
            out.append("SELECT count(*), sum(balance) FROM acct WHERE owner = 'owner%d';" % r.randint(0, 999))
        else:
            out.append("SELECT id FROM acct WHERE branch = %d AND balance > %d ORDER BY balance LIMIT 3;"
                       % (r.randint(0, 49), r.randint(0, 9000)))
        if i % 1000 == 999:
            out.append("COMMIT; BEGIN;")
    out.append("COMMIT;")
    out.append("SELECT count(*), sum(delta) FROM hist;")
    return "oltp.sql", ("\n".join(out) + "\n").encode()


def sqlite_analytics(scale):
    """Few large queries: joins, grouping, window functions, sorting, a
    recursive CTE and string functions -- the VDBE's heavy operators."""
    rows = int(100000 * scale)
    out = ["CREATE TABLE t(id INTEGER PRIMARY KEY, g INTEGER, k TEXT, v REAL);",
           "CREATE TABLE d(g INTEGER PRIMARY KEY, name TEXT);",
           "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < %d) "
           "INSERT INTO t SELECT x, x %% 97, printf('%%08x', x * 2654435761 %% 4294967296), "
           "(x * 7919 %% 10007) / 7.0 FROM n;" % rows,
           "WITH RECURSIVE n(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM n WHERE x < 96) "
           "INSERT INTO d SELECT x, 'group-' || x FROM n;",
           "SELECT d.name, count(*), round(avg(t.v), 3), max(t.k) FROM t JOIN d USING (g) "
           "GROUP BY d.name ORDER BY 3 DESC LIMIT 5;",
           "SELECT g, v, rank() OVER (PARTITION BY g ORDER BY v DESC) AS r FROM t "
           "ORDER BY r, g LIMIT 5;",
           "SELECT substr(k, 1, 2) AS p, count(*), group_concat(id, ',') IS NOT NULL FROM t "
           "WHERE k LIKE '%a%' GROUP BY p ORDER BY 2 DESC LIMIT 5;",
           "SELECT count(*), round(sum(a.v * b.v), 1) FROM t a JOIN t b ON b.id = a.id + 97 AND a.g = b.g;",
           "WITH RECURSIVE c(x, y) AS (SELECT 1, 1 UNION ALL SELECT x + 1, (y * 31 + x) %% 1000003 "
           "FROM c WHERE x < %d) SELECT sum(y) FROM c;" % (rows * 2),
           "SELECT upper(k), length(replace(k, '0', '')), instr(k, 'f') FROM t ORDER BY k DESC LIMIT 3;",
           "CREATE INDEX t_k ON t(k);",
           "SELECT count(DISTINCT substr(k, 3, 3)) FROM t;"]
    return "analytics.sql", ("\n".join(out) + "\n").encode()


_GAS_OPS = ["addq %rax, %rbx", "subl $12, %ecx", "imulq %rsi, %rdi", "leaq 8(%rsp,%rcx,4), %rdx",
            "movl %eax, -20(%rbp)", "xorl %r8d, %r9d", "shrq $3, %r10", "cmpq %r11, %r12", "testb $1, %al",
            "movsd (%rdi), %xmm0", "addsd %xmm1, %xmm0", "pushq %r13", "popq %r13", "movzbl (%rsi), %eax",
            "cvtsi2sd %eax, %xmm2", "vpaddd %ymm1, %ymm2, %ymm3", "andq $-16, %rsp", "notl %edx"]


def gas_insns(scale):
    """Functions of mixed x86-64 instructions with forward and backward local
    jumps (branch relaxation), calls, data references and CFI directives:
    the instruction parser, encoder and relaxation."""
    r = random.Random(71)
    out = ["\t.text\n"]
    nf = int(8000 * scale) + 2
    for f in range(nf):
        out.append("\t.globl f%d\n\t.type f%d, @function\nf%d:\n\t.cfi_startproc\n" % (f, f, f))
        nl = r.randint(3, 12)
        for b in range(nl):
            out.append(".L%d_%d:\n" % (f, b))
            for _ in range(r.randint(2, 14)):
                out.append("\t%s\n" % r.choice(_GAS_OPS))
            k = r.random()
            if k < 0.4:
                out.append("\tj%s .L%d_%d\n" % (r.choice(["e", "ne", "l", "g", "be", "a"]), f, r.randrange(nl)))
            elif k < 0.6:
                out.append("\tcall f%d\n" % r.randrange(nf))
            elif k < 0.75:
                out.append("\tmovq tab%d(%%rip), %%rax\n" % r.randrange(64))
        out.append("\tret\n\t.cfi_endproc\n\t.size f%d, .-f%d\n" % (f, f))
    out.append("\t.data\n")
    for t in range(64):
        out.append("tab%d:\t.quad %s\n" % (t, ", ".join("f%d" % r.randrange(nf) for _ in range(4))))
    return "insns.s", "".join(out).encode()


def gas_macros(scale):
    """Macros, .rept/.irp expansion, conditionals, expressions over symbols
    and data directives: the macro processor, expression evaluator and
    symbol table rather than the encoder."""
    r = random.Random(72)
    out = [".macro SUM a, b, c\n\t.quad \\a + \\b * \\c\n\t.long (\\a ^ \\b) & 0xffff\n.endm\n",
           ".macro BLOCK n\n\t.irp r, rax, rbx, rcx, rdx\n\tmovq $\\n, %\\r\n\t.endr\n"
           "\t.if \\n % 3\n\taddq $\\n, %rax\n\t.else\n\tsubq $\\n, %rax\n\t.endif\n.endm\n",
           "\t.data\n"]
    n = int(60000 * scale) + 2
    for i in range(n):
        out.append("sym%d = %d\n" % (i, r.randrange(1 << 20)))
        k = r.random()
        if k < 0.5:
            out.append("\tSUM sym%d, %d, sym%d\n" % (i, r.randrange(99), r.randrange(i + 1)))
        elif k < 0.7:
            out.append("\t.rept %d\n\t.byte %d, (sym%d >> 3) & 0x7f\n\t.endr\n" % (r.randint(1, 6), i % 128, i))
        else:
            out.append("str%d:\t.asciz \"%s\"\n" % (i, "".join(r.choices("abcdefghij klmnop", k=r.randint(4, 40)))))
    out.append("\t.text\n")
    for i in range(n // 4):
        out.append("\tBLOCK %d\n" % r.randrange(1000))
    return "macros.s", "".join(out).encode()


GENERATORS = {
    "bzip2_text": bzip2_text, "bzip2_repetitive": bzip2_repetitive, "bzip2_compressed": bzip2_compressed,
    "tcc_nested": tcc_nested, "tcc_decls": tcc_decls, "tcc_paths": tcc_paths,
    "lua_objects": lua_objects, "lua_strings": lua_strings,
    "sqlite_oltp": sqlite_oltp, "sqlite_analytics": sqlite_analytics,
    "gas_insns": gas_insns, "gas_macros": gas_macros,
}


def main(argv):
    if len(argv) == 2 and argv[1] == "--list":
        print("\n".join(sorted(GENERATORS)))
        return 0
    if len(argv) != 4 or argv[2] not in GENERATORS:
        print(__doc__, file=sys.stderr)
        return 2
    outdir, gen, scale = argv[1], argv[2], float(argv[3])
    name, data = GENERATORS[gen](scale)
    path = "%s/%s" % (outdir, name)
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    import os
    os.replace(path + ".tmp", path)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
