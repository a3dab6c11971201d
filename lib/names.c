/* names.c -- function names for people in a path map: from each module's symbols or its separate debug file, demangled. */
#include "names.h"

#include "module.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rename_to(icpp_pathmap *pm, uint32_t f, const char *name, icpp_err *err)
{
    if (!strcmp(icpp_pathmap_func(pm, f)->name, name))
        return 0;
    if (icpp_pathmap_rename_func(pm, f, name) < 0)
        return icpp_err_set(err, ENOMEM, "out of memory naming functions");
    return 0;
}

/* The map has no name for f: "" or the agent's fn_ADDR. */
static int unnamed(const icpp_pm_func *f)
{
    char ph[32];
    snprintf(ph, sizeof ph, "fn_%" PRIx64, f->addr);
    return !f->name[0] || !strcmp(f->name, ph);
}

int icpp_names_refresh(icpp_pathmap *pm, char *note, size_t notesz, icpp_err *err)
{
    unsigned nrefused = 0;
    if (notesz)
        note[0] = 0;
    size_t nmod = icpp_pathmap_nmodules(pm), nf = icpp_pathmap_nfuncs(pm);
    icpp_module **mods = calloc(nmod + 1, sizeof *mods);
    if (!mods)
        return icpp_err_set(err, ENOMEM, "out of memory naming functions");
    /* only the modules with an unnamed function are opened */
    for (size_t i = 0; i < nf; i++) {
        const icpp_pm_func *f = icpp_pathmap_func(pm, (uint32_t)i);
        if (f->module < nmod && unnamed(f))
            mods[f->module] = (icpp_module *)1;
    }
    for (size_t i = 0; i < nmod; i++) {
        const icpp_pm_module *pmm = icpp_pathmap_module(pm, (uint32_t)i);
        icpp_module *m = mods[i] && pmm->path && pmm->path[0] ? icpp_module_open(pmm->path, NULL) : NULL;
        const icpp_build_id *b = m ? icpp_module_build_id(m) : NULL;
        if (m && !icpp_build_id_match(b, pmm->path, &pmm->build_id, pmm->path)) {
            icpp_module_close(m);      /* another binary at that path now: its names are not ours */
            m = NULL;
        }
        mods[i] = m;
        const icpp_debuginfo *d = m ? icpp_module_debuginfo(m) : NULL;
        if (d && d->nrefused) {
            if (!nrefused && notesz)
                snprintf(note, notesz, "%s: its separate debug file was refused (%s)%s", pmm->path, d->refused,
                         d->fd >= 0 ? "; another one was used" : "; its stripped functions keep fn_ADDR names");
            nrefused += d->nrefused;
        }
    }
    if (nrefused > 1 && notesz) {
        size_t l = strlen(note);
        snprintf(note + l, notesz - l, " (%u refused in all)", nrefused);
    }
    int r = 0;
    for (size_t i = 0; i < nf && r == 0; i++) {
        const icpp_pm_func *f = icpp_pathmap_func(pm, (uint32_t)i);
        const icpp_func *mf = NULL;
        if (unnamed(f) && f->module < nmod && mods[f->module])
            mf = icpp_module_func_start(mods[f->module], f->addr);
        if (mf) {                   /* a name where the map has none; may be fn_ADDR again */
            r = rename_to(pm, (uint32_t)i, mf->name, err);
        } else {
            char *dm = icpp_demangle(f->name);
            if (dm)
                r = rename_to(pm, (uint32_t)i, dm, err);
            free(dm);
        }
    }
    for (size_t i = 0; i < nmod; i++)
        icpp_module_close(mods[i]);
    free(mods);
    return r;
}
