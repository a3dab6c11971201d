/* names.c -- function names for people in a path map: from each module's symbols or its separate debug file, demangled. */
#include "names.h"

#include "module.h"

#include <errno.h>
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

int icpp_names_refresh(icpp_pathmap *pm, icpp_err *err)
{
    size_t nmod = icpp_pathmap_nmodules(pm), nf = icpp_pathmap_nfuncs(pm);
    icpp_module **mods = calloc(nmod + 1, sizeof *mods);
    if (!mods)
        return icpp_err_set(err, ENOMEM, "out of memory naming functions");
    for (size_t i = 0; i < nmod; i++) {
        const icpp_pm_module *pmm = icpp_pathmap_module(pm, (uint32_t)i);
        icpp_module *m = pmm->path && pmm->path[0] ? icpp_module_open(pmm->path, NULL) : NULL;
        const icpp_build_id *b = m ? icpp_module_build_id(m) : NULL;
        if (m && (b->len != pmm->build_id.len || memcmp(b->bytes, pmm->build_id.bytes, b->len))) {
            icpp_module_close(m);      /* another binary at that path now: its names are not ours */
            m = NULL;
        }
        mods[i] = m;
    }
    int r = 0;
    for (size_t i = 0; i < nf && r == 0; i++) {
        const icpp_pm_func *f = icpp_pathmap_func(pm, (uint32_t)i);
        const icpp_func *mf = f->module < nmod && mods[f->module] ? icpp_module_func_start(mods[f->module], f->addr)
                                                                  : NULL;
        if (mf) {
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
