/* segment.c -- OUT's new segment: the stubs of wrapped call sites and the copies of cloned functions, their CFI in a relocated .eh_frame, a new .eh_frame_hdr, their symbols. */
#include "segment.h"

#include "ehwrite.h"
#include "wrap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rw_segment_apply(rw_image *img, const rw_sites *s, const icpp_arr_wrap *w, size_t n, const icpp_arr_pad *pads,
                     size_t npads, const rw_clones_in *ci, icpp_err *err)
{
    size_t nc = ci ? ci->n : 0;
    if (!n && !nc)
        return 0;
    uint64_t v = rw_image_new_vaddr(img), code_addr = rw_wrap_code_addr(img);
    if (!v)
        return icpp_err_set(err, ICPP_EFORMAT, "its ELF headers cannot be read");
    if (!img->eh_frame.size || img->eh_frame.compressed)
        return icpp_err_set(err, ICPP_EUNSUPPORTED, "it has no .eh_frame to give the stubs their CFI");
    size_t ncode = RW_WRAP_STUB * n;
    if (nc)
        ncode = (size_t)(ci->c[nc - 1].addr + ci->c[nc - 1].size - code_addr);
    uint64_t eh_addr = (code_addr + ncode + 7) & ~7ull;
    icpp_ehw eh;
    uint8_t *code = calloc(1, ncode), *hdr = NULL, *data = NULL;
    size_t nparts = 0;      /* symbols of the clones: one per part */
    for (size_t i = 0; i < nc; i++)
        nparts += ci->c[i].nparts;
    rw_newsym *syms = calloc(n + nparts, sizeof *syms);
    char *names = calloc(n + nparts, 512);
    size_t hdrlen = 0;
    int rc = -1;
    if (!code || !syms || !names) {
        free(code), free(syms), free(names);
        return icpp_err_set(err, ENOMEM, "out of memory writing the stubs");
    }
    if (icpp_ehw_relocate(&eh, img->bytes + img->eh_frame.off, img->eh_frame.size, img->eh_frame.addr, eh_addr,
                          err) < 0) {
        free(code), free(syms), free(names);
        return -1;
    }
    if (rw_wrap_emit(s, w, n, pads, npads, code_addr, code, img, &eh, err) < 0)
        goto out;
    for (size_t i = 0; i < nc; i++) {
        const icpp_arr_clone *c = &ci->c[i];
        if (rw_clone_emit(ci->cloner, c->orig, rw_frames_find(ci->fs, c->orig), c->pad, c->addr,
                          code + (c->addr - code_addr), &eh, err) < 0)
            goto out;
        for (size_t k = 0; k < c->nrets; k++)
            if (rw_clone_redirect(img, c->rets[k], c->addr, err) < 0)
                goto out;
    }
    if (icpp_ehw_finish(&eh, err) < 0)
        goto out;
    uint64_t hdr_addr = (eh_addr + eh.len + 3) & ~3ull;
    if (icpp_ehw_hdr(eh.buf, eh.len, eh_addr, hdr_addr, &hdr, &hdrlen, err) < 0)
        goto out;
    size_t len = (size_t)(hdr_addr + hdrlen - v);
    if (!(data = calloc(1, len))) {
        icpp_err_set(err, ENOMEM, "out of memory writing the new segment");
        goto out;
    }
    memcpy(data + (code_addr - v), code, ncode);
    memcpy(data + (eh_addr - v), eh.buf, eh.len);
    memcpy(data + (hdr_addr - v), hdr, hdrlen);
    /* CALLER.cold.icpp_wrap.N: the cold-part rule (docs/definitions.md)
     * makes the stub code of CALLER's frame for every ICPP tool. */
    for (size_t i = 0; i < n; i++) {
        const rw_site *st = rw_sites_at(s, w[i].ret);
        char *nm = names + 512 * i;
        snprintf(nm, 512, "%.470s.cold.icpp_wrap.%zu", st && st->owner_name ? st->owner_name : "fn", i);
        syms[i] = (rw_newsym){nm, code_addr + RW_WRAP_STUB * i, RW_WRAP_STUB};
    }
    /* NAME.icpp_clone.N: an ordinary function for every tool (gcc's
     * NAME.constprop.N clones are shown the same way). */
    size_t ns_ = n;
    for (size_t i = 0; i < nc; i++)
        for (size_t j = 0; j < ci->c[i].nparts; j++, ns_++) {
            const icpp_arr_part *pt = &ci->c[i].parts[j];
            char *nm = names + 512 * ns_;
            /* a part's copy is the copy's cold part (docs/definitions.md) */
            snprintf(nm, 512, j ? (j > 1 ? "%.480s.cold.%zu" : "%.480s.cold") : "%.480s", ci->c[i].sym, j - 1);
            syms[ns_] = (rw_newsym){nm, pt->addr, pt->hi - pt->lo};
        }
    rw_newseg ns = {v, data, len, code_addr, ncode, eh_addr, eh.len, hdr_addr, hdrlen, syms, ns_};
    rc = rw_image_add_segment(img, &ns, err);
out:
    icpp_ehw_free(&eh);
    free(code), free(hdr), free(data), free(syms), free(names);
    return rc;
}
