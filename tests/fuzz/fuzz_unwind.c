/* fuzz_unwind.c -- libFuzzer harness for icpp_unwind (lib/unwind.c): registers and a user stack copy from the input, unwound with libdw CFI through real modules.
 *
 * icpp-resolve --check unwinds each --validate sample of a recording: its
 * registers and a copy of the user stack, both whatever the sample file
 * says.  The harness sets up a replay the way icpp-resolve gets one (a
 * sample file with a PROC record and the MMAP records of this process's own
 * executable, of libc, of [vdso], of a missing file and of anonymous code,
 * at their real addresses), once, and then unwinds one made-up sample per
 * input against it.
 *
 * So that CFI is exercised and not just "no module", a sample starts from a
 * real snapshot of this process (its registers and its stack, taken once at
 * start-up; unwinding it unchanged must reach the outermost frame), or from
 * zeros (first byte: bit 0; bit 1: only BP, SP and IP recorded, as plain
 * icpp-sample does), and the rest of the input is a list of edits (op byte,
 * then operands):
 *   IP at an offset into a module's text, at a function's start (or up to 63
 *   bytes in), at a known code address (return addresses found on the real
 *   stack; signal trampolines, found by their CFI; _start, __clone...), or
 *   anywhere; any register set to
 *   a value, to a pointer into the stack copy, or to code; the stack copy's
 *   size changed; 8-byte words of the copy overwritten by a value, a return
 *   address, a code address or a stack pointer; bytes flipped; the register
 *   mask (which registers the sample has) replaced; an unknown pid; the
 *   frame limit.
 * The sample's register array and stack copy are malloc'd at their exact
 * sizes, so ASan reports any read past them.
 *
 * Properties besides "no crash, leak, hang or UB": a status in range; at
 * most `max` frames, exactly `max` for ICPP_UW_DEPTH; no frames without
 * registers; at least the leaf when its IP is in a known module (and
 * ICPP_UW_NOMODULE without a frame when it is not); every frame's module and
 * link-time address are what icpp_replay_locate gives for its pc (pc - 1
 * for a caller's, except above a signal frame) and its function is the
 * module's function at that address.
 * ICPP_FUZZ_VERBOSE=1 prints each input's registers, status and frames. */
#include "events.h"
#include "fuzz.h"
#include "procmaps.h"
#include "replay.h"
#include "unwind.h"

#include <asm/perf_regs.h>
#include <elfutils/libdw.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PID          4242u          /* the recorded process */
#define OTHER_PID    4243u          /* a process the recording does not know */
#define NREG         17             /* DWARF x86-64: 0-15 GPRs, 16 rip */
#define DW_RSP       7
#define DW_RIP       16
#define STACK_MAX    65528u         /* perf's largest user stack copy */
#define MAX_DEFAULT  256
#define NPOOL        512
#define GONE_START   0x100000000000ull  /* mapped from a file that does not exist */
#define ANON_START   0x110000000000ull  /* anonymous executable memory (JIT) */
#define AREA_LEN     0x100000ull

/* ---- the replay and its two real modules (set up once) ---- */

typedef struct hmod {
    char              path[4096];
    const icpp_module *mod;
    uint64_t          bias;         /* runtime = bias + link-time */
    uint64_t          lo, hi;       /* runtime text range */
    size_t            nfuncs;
    const icpp_func  *funcs;
} hmod;

static icpp_replay   *rp;
static icpp_unwinder *uw;
static hmod           mods[2];      /* 0: this executable, 1: libc */
static uint64_t       pool[NPOOL];  /* code addresses: return addresses of the real stack, special frames */
static size_t         npool;
static size_t         nspecial;     /* of which: signal trampolines and outermost frames */

/* The snapshot: registers in DWARF order (r[16] = rip) and the stack from rsp up. */
static uint64_t snap_r[NREG];
static uint64_t snap_ret;           /* snap_take's return address */
static uint8_t *snap_stack;
static uint32_t snap_size;

/* What icpp-sample --validate records (icpp_event_setup): every register but DS, ES, FS, GS. */
static uint64_t validate_mask(void)
{
    uint64_t m = (1ull << PERF_REG_X86_64_MAX) - 1;
    return m & ~((1ull << PERF_REG_X86_DS) | (1ull << PERF_REG_X86_ES) | (1ull << PERF_REG_X86_FS) |
                 (1ull << PERF_REG_X86_GS));
}

/* Copy live stack memory: ASan would report the redzones of live frames. */
__attribute__((no_sanitize("address"))) static void copy_live(uint8_t *dst, uint64_t src, size_t n)
{
    const volatile uint8_t *s = (const volatile uint8_t *)(uintptr_t)src;
    for (size_t i = 0; i < n; i++)
        dst[i] = s[i];
}

/* Registers (at the instruction after the lea: the IP recorded) and the
 * stack from rsp up to the end of its mapping (at most STACK_MAX). */
__attribute__((noinline)) static void snap_take(const icpp_maps *mm)
{
    uint64_t *r = snap_r;
    __asm__ volatile("mov %%rax, 0(%0)\n\t"
                     "mov %%rdx, 8(%0)\n\t"
                     "mov %%rcx, 16(%0)\n\t"
                     "mov %%rbx, 24(%0)\n\t"
                     "mov %%rsi, 32(%0)\n\t"
                     "mov %%rdi, 40(%0)\n\t"
                     "mov %%rbp, 48(%0)\n\t"
                     "mov %%rsp, 56(%0)\n\t"
                     "mov %%r8, 64(%0)\n\t"
                     "mov %%r9, 72(%0)\n\t"
                     "mov %%r10, 80(%0)\n\t"
                     "mov %%r11, 88(%0)\n\t"
                     "mov %%r12, 96(%0)\n\t"
                     "mov %%r13, 104(%0)\n\t"
                     "mov %%r14, 112(%0)\n\t"
                     "mov %%r15, 120(%0)\n\t"
                     "lea 0(%%rip), %%rax\n\t"
                     "mov %%rax, 128(%0)\n\t"
                     :
                     : "r"(r)
                     : "rax", "memory");
    snap_ret = (uint64_t)(uintptr_t)__builtin_return_address(0);
    const icpp_mapping *m = icpp_maps_find(mm, snap_r[DW_RSP]);
    uint64_t top = m ? m->end : snap_r[DW_RSP] + 16384;
    snap_size = (uint32_t)(top - snap_r[DW_RSP] < STACK_MAX ? top - snap_r[DW_RSP] : STACK_MAX);
    snap_stack = malloc(snap_size);
    FUZZ_CHECK(snap_stack != NULL, "out of memory");
    copy_live(snap_stack, snap_r[DW_RSP], snap_size);
}

static int in_text(uint64_t a)
{
    for (int i = 0; i < 2; i++)
        if (a >= mods[i].lo && a < mods[i].hi)
            return 1;
    return 0;
}

static void pool_add(uint64_t a)
{
    if (npool < NPOOL && in_text(a))
        pool[npool++] = a;
}

/* Mappings of this process worth recording: all of the executable's and libc's. */
static void record_maps(icpp_swriter *sw, const icpp_maps *mm)
{
    icpp_build_id none = {0, {0}};
    for (size_t i = 0; i < mm->n; i++) {
        const icpp_mapping *m = &mm->v[i];
        if (m->path && (!strcmp(m->path, mods[0].path) || !strcmp(m->path, mods[1].path)))
            icpp_swriter_mmap(sw, PID, m->start, m->end - m->start, m->pgoff, m->prot, m->path, &none);
        else if (m->path && !strcmp(m->path, "[vdso]"))
            icpp_swriter_mmap(sw, PID, m->start, m->end - m->start, m->pgoff, m->prot, m->path, &none);
    }
    icpp_swriter_mmap(sw, PID, GONE_START, AREA_LEN, 0, PROT_READ | PROT_EXEC, "/nonexistent/icpp-fuzz/libgone.so",
                      &none);
    icpp_swriter_mmap(sw, PID, ANON_START, AREA_LEN, 0, PROT_READ | PROT_WRITE | PROT_EXEC, "", &none);
}

static int unwind_snapshot(icpp_uframe *fr, int max, int *n);

/* At exit: the unwinder's libdw handles and the replay go (LeakSanitizer checks after this). */
static void cleanup(void)
{
    icpp_unwinder_free(uw);
    icpp_replay_close(rp);
    free(snap_stack);
}

static void init(void)
{
    if (rp)
        return;
    icpp_err err = {0};
    icpp_maps mm;
    icpp_maps_init(&mm);
    FUZZ_CHECK(icpp_maps_read(&mm, 0, &err) == 0, "/proc/self/maps: %s", err.msg);
    const icpp_mapping *self = icpp_maps_find(&mm, (uint64_t)(uintptr_t)&init);
    FUZZ_CHECK(self && self->path && self->path[0] == '/', "no file mapping holds this harness's code");
    snprintf(mods[0].path, sizeof mods[0].path, "%s", self->path);
    for (size_t i = 0; i < mm.n && !mods[1].path[0]; i++) {
        const char *p = mm.v[i].path, *b = p ? strrchr(p, '/') : NULL;
        if (b && (!strncmp(b, "/libc.so", 8) || !strncmp(b, "/libc-", 6)))
            snprintf(mods[1].path, sizeof mods[1].path, "%s", p);
    }
    FUZZ_CHECK(mods[1].path[0], "libc is not mapped");

    /* The recording: a process, its mappings, one sample (so the replay reads them). */
    const char *tmpd = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char dir[256], file[300];
    snprintf(dir, sizeof dir, "%s/icpp-fuzz-unwind-XXXXXX", tmpd);
    FUZZ_CHECK(mkdtemp(dir) != NULL, "mkdtemp %s", dir);
    snprintf(file, sizeof file, "%s/s.icpps", dir);
    icpp_swriter *sw = icpp_swriter_open(file, &err);
    FUZZ_CHECK(sw != NULL, "swriter_open: %s", err.msg);
    snap_take(&mm);
    icpp_swriter_event(sw, 0, "cpu-clock", 1, 0, 1000, 0, 0, 0, 0);   /* a sample's event is declared */
    icpp_swriter_proc(sw, PID, 1, snap_r[DW_RSP] + snap_size, mods[0].path, 0);
    record_maps(sw, &mm);
    icpp_swriter_sample(sw, PID, PID, 0, 1, snap_r[DW_RIP], snap_r[DW_RSP], snap_r[6], NULL);
    FUZZ_CHECK(icpp_swriter_close(sw, 1, 0, &err) == 0, "swriter_close: %s", err.msg);
    rp = icpp_replay_open(file, &err);
    FUZZ_CHECK(rp != NULL, "replay_open: %s", err.msg);
    icpp_rsample s;
    FUZZ_CHECK(icpp_replay_next(rp, &s, &err) == 1, "the recording's sample: %s", err.msg);
    unlink(file);       /* the fuzz_reader has it open; the modules are opened by their own paths */
    rmdir(dir);
    uw = icpp_unwinder_new(rp);
    FUZZ_CHECK(uw != NULL, "out of memory");
    atexit(cleanup);

    for (int i = 0; i < 2; i++) {
        hmod *h = &mods[i];
        int32_t mi;
        uint64_t link, probe = 0;
        /* The module and its bias as the replay sees them: locate its first executable page. */
        for (size_t k = 0; k < mm.n && !probe; k++)
            if (mm.v[k].path && !strcmp(mm.v[k].path, h->path) && (mm.v[k].prot & PROT_EXEC))
                probe = mm.v[k].start;
        FUZZ_CHECK(icpp_replay_locate(rp, PID, probe, &mi, &link) == 0, "%s: not a module of the replay", h->path);
        const icpp_rmodule *rm = icpp_replay_module(rp, (uint32_t)mi);
        FUZZ_CHECK(rm && rm->mod && !strcmp(rm->path, h->path), "module %d is not %s", mi, h->path);
        h->mod = rm->mod;
        h->bias = probe - link;
        icpp_module_text_range(h->mod, &h->lo, &h->hi);
        h->lo += h->bias;
        h->hi += h->bias;
        h->nfuncs = icpp_module_nfuncs(h->mod);
        h->funcs = icpp_module_funcs(h->mod);
        FUZZ_CHECK(h->lo < h->hi && h->nfuncs > 0, "%s: no text or no functions", h->path);
    }
    icpp_maps_free(&mm);

    /* The snapshot unwinds to the outermost frame: the harness exercises real CFI. */
    icpp_uframe fr[MAX_DEFAULT];
    int n = 0;
    int st = unwind_snapshot(fr, MAX_DEFAULT, &n);
    FUZZ_CHECK(st == ICPP_UW_ROOT && n >= 3 && fr[0].pc == snap_r[DW_RIP] && fr[1].pc == snap_ret,
               "the real stack does not unwind: %s after %d frames", icpp_uw_status_name(st), n);
    for (int i = 0; i < n; i++)
        pool_add(fr[i].pc);
    /* Other words on the stack that look like code addresses (return addresses of frames gone). */
    for (uint32_t o = 0; o + 8 <= snap_size; o += 8) {
        uint64_t v;
        memcpy(&v, snap_stack + o, 8);
        pool_add(v);
    }
    /* Frames of special kinds: signal trampolines (found by their CFI: libc's
     * symbols may be stripped), the outermost frames, thread starts. */
    static const char *special[] = {"_start", "__libc_start_main", "__libc_start_call_main", "clone", "__clone",
                                    "clone3", "__clone3", "start_thread"};
    for (int i = 0; i < 2; i++) {
        Dwarf_CFI *cfi = dwarf_getcfi_elf(icpp_module_elf(mods[i].mod));
        for (size_t k = 0; k < mods[i].nfuncs; k++) {
            const icpp_func *f = &mods[i].funcs[k];
            Dwarf_Frame *fr = NULL;
            bool signal = false;
            if (cfi && dwarf_cfi_addrframe(cfi, f->addr, &fr) == 0) {
                dwarf_frame_info(fr, NULL, NULL, &signal);
                free(fr);
            }
            int named = 0;
            for (size_t j = 0; j < sizeof special / sizeof *special && f->sym; j++)
                named |= !strcmp(f->sym, special[j]);
            if (signal || named) {
                pool_add(mods[i].bias + f->addr);
                pool_add(mods[i].bias + f->addr + 1);
                nspecial++;
            }
        }
        if (cfi)
            dwarf_cfi_end(cfi);
    }
    FUZZ_CHECK(npool > 0, "no code addresses");
    fprintf(stderr, "fuzz_unwind: %s and %s; the real stack (%u bytes) unwinds through %d frames; %zu code addresses"
            " (%zu special frames)\n", mods[0].path, mods[1].path, snap_size, n, npool, nspecial);
}

/* ---- one input ---- */

typedef struct ustate {
    uint64_t r[NREG];       /* DWARF order; r[16] = the sample's ip */
    uint64_t other;         /* the value of registers without a DWARF number (flags, segments) */
    uint64_t mask;          /* perf register mask */
    uint8_t  stack[STACK_MAX];
    uint32_t size;
    uint32_t pid;
    int      max;
} ustate;

static uint64_t code_addr(fuzz_reader *in)
{
    const hmod *h = &mods[fuzz_take(in, 1) & 1];
    return h->lo + fuzz_take(in, 4) % (h->hi - h->lo);
}

static uint64_t func_addr(fuzz_reader *in)
{
    uint8_t sel = (uint8_t)fuzz_take(in, 1);
    const hmod *h = &mods[sel & 1];
    const icpp_func *f = &h->funcs[fuzz_take(in, 3) % h->nfuncs];
    uint64_t off = sel & 2 ? 0 : sel >> 2;      /* the entry, or up to 63 bytes in: the prologue */
    return h->bias + f->addr + off;
}

static uint64_t stack_ptr(fuzz_reader *in, const ustate *u)
{
    return u->r[DW_RSP] + (fuzz_take(in, 2) & ~(uint64_t)7);
}

static void put_word(ustate *u, uint32_t off, uint64_t v)
{
    if (u->size >= 8)
        fuzz_put_le64(u->stack + off % (u->size - 7), v);
}

static void apply_op(fuzz_reader *in, ustate *u)
{
    uint8_t op = (uint8_t)fuzz_take(in, 1);
    switch (op % 18) {              /* operands are read in order: one statement each */
    case 0: u->r[DW_RIP] = code_addr(in); break;
    case 1: u->r[DW_RIP] = func_addr(in); break;
    case 2: u->r[DW_RIP] = pool[fuzz_take(in, 2) % npool]; break;
    case 3: u->r[DW_RIP] = fuzz_take(in, 8); break;
    case 4: case 5: case 6: {       /* a register: a value, a pointer into the copy, code */
        int r = (int)(fuzz_take(in, 1) % NREG);
        u->r[r] = op % 18 == 4 ? fuzz_take(in, 8) : op % 18 == 5 ? stack_ptr(in, u) : code_addr(in);
        break;
    }
    case 7: {                       /* resize the copy: cut short, or grow with zeros */
        uint32_t ns = (uint32_t)(fuzz_take(in, 2) % (STACK_MAX + 1));
        if (ns > u->size)
            memset(u->stack + u->size, 0, ns - u->size);
        u->size = ns;
        break;
    }
    case 8: {
        uint32_t o = (uint32_t)fuzz_take(in, 2);
        put_word(u, o, fuzz_take(in, 8));
        break;
    }
    case 9: {
        uint32_t o = (uint32_t)fuzz_take(in, 2);
        put_word(u, o, pool[fuzz_take(in, 2) % npool]);
        break;
    }
    case 10: {
        uint32_t o = (uint32_t)fuzz_take(in, 2);
        put_word(u, o, code_addr(in));
        break;
    }
    case 11: {
        uint32_t o = (uint32_t)fuzz_take(in, 2);
        put_word(u, o, stack_ptr(in, u));
        break;
    }
    case 12: {
        uint32_t o = (uint32_t)fuzz_take(in, 2);
        uint8_t x = (uint8_t)fuzz_take(in, 1);
        if (u->size)
            u->stack[o % u->size] ^= x ? x : 1;
        break;
    }
    case 13: u->mask = fuzz_take(in, 8); break;
    case 14: u->mask ^= 1ull << (fuzz_take(in, 1) % 64); break;
    case 15: u->pid = OTHER_PID; break;
    case 16: u->max = (int)(fuzz_take(in, 1) % 40); break;
    case 17: u->r[DW_RSP] += (uint64_t)(int64_t)(int16_t)fuzz_take(in, 2); break;  /* the copy stays where it was */
    }
}

/* Unwind state u; the sample's arrays are malloc'd at their exact sizes. */
static int unwind_state(const ustate *u, icpp_uframe **frp, int *n)
{
    icpp_rsample s;
    memset(&s, 0, sizeof s);
    s.pid = s.tid = u->pid;
    s.ip = u->r[DW_RIP];
    s.sp = u->r[DW_RSP];
    s.bp = u->r[6];
    uint32_t nregs = (uint32_t)__builtin_popcountll(u->mask);
    uint64_t *regs = malloc(nregs ? nregs * sizeof *regs : 1);
    uint8_t *stack = u->size ? fuzz_dup(u->stack, u->size) : NULL;
    icpp_uframe *fr = malloc(u->max ? (size_t)u->max * sizeof *fr : 1);
    FUZZ_CHECK(regs && fr, "out of memory");
    for (int bit = 0, k = 0; bit < 64; bit++)
        if (u->mask & (1ull << bit)) {
            int d = icpp_uw_dwarf_reg(bit);
            regs[k++] = d >= 0 ? u->r[d] : u->other;
        }
    s.x = (icpp_sample_extra){0, NULL, nregs, nregs ? regs : NULL, u->mask, u->size, stack};
    int st = icpp_unwind(uw, &s, fr, u->max, n);
    free(regs);
    free(stack);
    *frp = fr;
    return st;
}

static int unwind_snapshot(icpp_uframe *out, int max, int *n)
{
    static ustate u;
    memcpy(u.r, snap_r, sizeof u.r);
    u.other = 0x246;
    u.mask = validate_mask();
    memcpy(u.stack, snap_stack, snap_size);
    u.size = snap_size;
    u.pid = PID;
    u.max = max;
    icpp_uframe *fr;
    int st = unwind_state(&u, &fr, n);
    memcpy(out, fr, (size_t)*n * sizeof *fr);
    free(fr);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init();
    static ustate u;
    fuzz_reader in = {data, size};
    uint8_t first = (uint8_t)fuzz_take(&in, 1);
    memset(u.r, 0, sizeof u.r);
    u.other = 0x246;
    u.mask = validate_mask();
    u.pid = PID;
    u.max = MAX_DEFAULT;
    if (first & 1) {                /* the real snapshot */
        memcpy(u.r, snap_r, sizeof u.r);
        memcpy(u.stack, snap_stack, snap_size);
        u.size = snap_size;
    } else {                        /* zeros: a stack copy of 1 KiB at a made-up address */
        u.r[DW_RSP] = 0x7ffc00000000ull - 0x10000;
        u.r[DW_RIP] = mods[0].lo;
        memset(u.stack, 0, 1024);
        u.size = 1024;
    }
    if (first & 2)
        u.mask = ICPP_REGS_MASK;    /* what plain icpp-sample records: BP, SP, IP */
    for (int k = 0; k < 64 && in.n; k++)
        apply_op(&in, &u);

    int n = -1;
    icpp_uframe *fr;
    int st = unwind_state(&u, &fr, &n);
    if (getenv("ICPP_FUZZ_VERBOSE")) {      /* to see what an input does */
        fprintf(stderr, "ip %#llx sp %#llx bp %#llx mask %#llx stack %u pid %u: %s after %d frames\n",
                (unsigned long long)u.r[DW_RIP], (unsigned long long)u.r[DW_RSP], (unsigned long long)u.r[6],
                (unsigned long long)u.mask, u.size, u.pid, icpp_uw_status_name(st), n);
        for (int i = 0; i < n; i++)
            fprintf(stderr, "  #%d pc %#llx entry sp %#llx %s%s\n", i, (unsigned long long)fr[i].pc,
                    (unsigned long long)fr[i].entry_sp, fr[i].func ? fr[i].func->name : "?",
                    fr[i].sigframe ? " (signal frame)" : "");
    }
    FUZZ_CHECK(st >= 0 && st < ICPP_UW_MAX && strcmp(icpp_uw_status_name(st), "?"), "status %d", st);
    FUZZ_CHECK(n >= 0 && n <= u.max, "%d frames for a limit of %d", n, u.max);
    FUZZ_CHECK(st != ICPP_UW_DEPTH || n == u.max, "depth reached at %d frames of %d", n, u.max);
    int has_sp = (u.mask & (1ull << PERF_REG_X86_SP)) != 0;
    FUZZ_CHECK((st == ICPP_UW_NOREGS) == !has_sp && (st != ICPP_UW_NOREGS || n == 0),
               "%s with%s SP in the mask", icpp_uw_status_name(st), has_sp ? "" : "out");
    int32_t mi;
    uint64_t addr;
    if (has_sp && u.max > 0) {
        int known = icpp_replay_locate(rp, u.pid, u.r[DW_RIP], &mi, &addr) == 0;
        FUZZ_CHECK(known ? n >= 1 : (st == ICPP_UW_NOMODULE && n == 0), "leaf %s a module: %s with %d frames",
                   known ? "in" : "outside", icpp_uw_status_name(st), n);
    }
    for (int i = 0; i < n; i++) {
        const icpp_uframe *f = &fr[i];
        FUZZ_CHECK(i > 0 || f->pc == u.r[DW_RIP], "leaf pc %#llx is not the ip", (unsigned long long)f->pc);
        uint64_t look = i == 0 || fr[i - 1].sigframe ? f->pc : f->pc - 1;
        FUZZ_CHECK(icpp_replay_locate(rp, u.pid, look, &mi, &addr) == 0 && mi == f->module && addr == f->addr,
                   "frame %d: pc %#llx is not module %d address %#llx", i, (unsigned long long)f->pc, f->module,
                   (unsigned long long)f->addr);
        const icpp_rmodule *rm = icpp_replay_module(rp, (uint32_t)mi);
        FUZZ_CHECK(rm && rm->mod && f->func == icpp_module_func_at(rm->mod, addr), "frame %d: function", i);
        FUZZ_CHECK(f->sigframe <= 1, "frame %d: sigframe %u", i, f->sigframe);
    }
    free(fr);
    return 0;
}
