/* cfi_lookup.c -- benchmark: CFI table lookups per second vs. libdw, one core. */
#include "cfi.h"
#include "module.h"

#include <elfutils/libdw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    size_t n = 4u << 20;        /* PCs per round */
    int rounds = 7;
    if (argc < 2) {
        fprintf(stderr, "usage: cfi_lookup BINARY...\n");
        return 2;
    }
    printf("| binary | rows | table KiB | build ms | table lookups/s (median of %d x %zu) | libdw lookups/s | speedup |\n",
           rounds, n);
    printf("|---|---|---|---|---|---|---|\n");
    for (int a = 1; a < argc; a++) {
        icpp_err err;
        icpp_module *m = icpp_module_open(argv[a], &err);
        if (!m) {
            fprintf(stderr, "cfi_lookup: %s\n", err.msg);
            return 1;
        }
        double t0 = now();
        icpp_cfi *t = icpp_cfi_build(m, &err);
        double build = now() - t0;
        if (!t) {
            fprintf(stderr, "cfi_lookup: %s\n", err.msg);
            return 1;
        }
        /* PCs: uniform over the module's functions, then uniform inside each:
         * every PC a sample could land on, weighted per function. */
        size_t nf = icpp_module_nfuncs(m);
        const icpp_func *fs = icpp_module_funcs(m);
        uint64_t *pcs = malloc(n * sizeof *pcs);
        for (size_t i = 0; i < n; i++) {
            const icpp_func *f = &fs[next_rand() % nf];
            uint64_t sz = f->size ? f->size : 16;
            pcs[i] = f->addr + next_rand() % sz;
        }
        double rate[16];
        uint64_t sink = 0;
        for (int r = 0; r < rounds; r++) {
            t0 = now();
            for (size_t i = 0; i < n; i++) {
                uint64_t esp = 0;
                if (icpp_cfi_entry_sp(t, pcs[i], 0x7ffe0000 + i, 0x7ffe8000, &esp) == 0)
                    sink += esp;
            }
            rate[r] = (double)n / (now() - t0);
        }
        qsort(rate, (size_t)rounds, sizeof *rate, cmp_double);
        /* libdw per-lookup cost on a subset (it is ~50x slower). */
        Dwarf_CFI *cfi = dwarf_getcfi_elf(icpp_module_elf(m));
        size_t nd = n / 32;
        t0 = now();
        for (size_t i = 0; i < nd; i++) {
            Dwarf_Frame *fr;
            if (cfi && dwarf_cfi_addrframe(cfi, pcs[i], &fr) == 0) {
                Dwarf_Op *ops;
                size_t nops;
                if (dwarf_frame_cfa(fr, &ops, &nops) == 0 && nops)
                    sink += ops[0].number2;
                free(fr);
            }
        }
        double dwrate = (double)nd / (now() - t0);
        icpp_cfi_stats st;
        icpp_cfi_get_stats(t, &st);
        printf("| %s | %zu | %zu | %.1f | %.1f M | %.2f M | %.0fx |\n", argv[a], st.rows, st.bytes / 1024,
               build * 1e3, rate[rounds / 2] / 1e6, dwrate / 1e6, rate[rounds / 2] / dwrate);
        if (sink == 42)
            putchar(' ');
        if (cfi)
            dwarf_cfi_end(cfi);
        free(pcs);
        icpp_cfi_free(t);
        icpp_module_close(m);
    }
    return 0;
}
