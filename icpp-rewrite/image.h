/* image.h -- a private, patchable copy of an ELF executable's bytes: addresses to file offsets, the build-id note, writing OUT. */
#ifndef RW_IMAGE_H
#define RW_IMAGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "defs.h"
#include "err.h"
#include "fsafe.h"
#include "module.h"

#define RW_MAX_SEGS 64

typedef struct rw_seg {
    uint64_t vaddr, filesz, off;    /* a PT_LOAD: link-time address, bytes in the file, file offset */
    uint32_t flags;                 /* PF_X | PF_W | PF_R */
} rw_seg;

/* A call frame information section, patched in place (lib/cfaprog.h). */
typedef struct rw_cfisec {
    size_t   off, size;             /* file offset and bytes; size 0: the file has no such section */
    uint64_t addr;                  /* link-time address (0 for .debug_frame) */
    int      compressed;            /* SHF_COMPRESSED: cannot be patched in place */
} rw_cfisec;

typedef struct rw_image {
    uint8_t *bytes;                 /* the whole file, copied; patches go here */
    size_t   len;
    rw_seg   segs[RW_MAX_SEGS];
    size_t   nsegs;
    size_t   bid_off;               /* file offset of the NT_GNU_BUILD_ID descriptor */
    uint8_t  bid_len;               /* its length; 0 if the file has none */
    mode_t   mode;                  /* permission bits of the original file */
    rw_cfisec eh_frame, debug_frame;
} rw_image;

/* Copy the bytes of m's file and index its loadable segments and build-id
 * note.  Fails (filling *err) if the file cannot be read or has no PT_LOAD. */
int rw_image_load(rw_image *img, const icpp_module *m, icpp_err *err);
void rw_image_free(rw_image *img);

/* The bytes at link-time address addr in an executable segment, with *avail
 * set to how many follow in the file; NULL if addr is not file-backed code. */
uint8_t *rw_image_code(const rw_image *img, uint64_t addr, size_t *avail);

/* Replace the build-id descriptor (same length). */
int rw_image_set_build_id(rw_image *img, const icpp_build_id *bid, icpp_err *err);

/* Begin `o` at `path` under the output rule (a new file beside it) with the
 * original's permission bits plus execute for whoever may read it, and
 * write the image into it; the caller commits it together with its map
 * (icpp_fs_out_commit_pair) or aborts.  On failure o is aborted, -1. */
int rw_image_write(const rw_image *img, icpp_fs_out *o, const char *path, icpp_err *err);

/* A segment to append (docs/rewrite.md, "The new segment"): data[0..len)
 * loaded at vaddr (rw_image_new_vaddr), whose first rw_image_phdr_room
 * bytes are left for the program header table, with the new code at
 * [code_addr, + code_size), the whole relocated .eh_frame at eh_addr and
 * its .eh_frame_hdr at hdr_addr; syms are local function symbols for the
 * new code (added to .symtab if the file has one). */
typedef struct rw_newsym {
    const char *name;
    uint64_t    addr, size;
} rw_newsym;

typedef struct rw_newseg {
    uint64_t         vaddr;
    const uint8_t   *data;
    size_t           len;
    uint64_t         code_addr, code_size, eh_addr, eh_size, hdr_addr, hdr_size;
    const rw_newsym *syms;
    size_t           nsyms;
} rw_newseg;

/* The first page-aligned link-time address above every segment (0 if the
 * headers cannot be read), and the bytes the moved program header table
 * takes at the start of the new segment. */
uint64_t rw_image_new_vaddr(const rw_image *img);
size_t   rw_image_phdr_room(const rw_image *img);

/* Append the segment: a new R+X PT_LOAD (in place of a PT_NOTE that only
 * repeats PT_GNU_PROPERTY, else after the last PT_LOAD with the program
 * header table moved into the segment and PT_PHDR following), PT_GNU_EH_FRAME and the
 * .eh_frame/.eh_frame_hdr section headers pointed at the new copies, a
 * section .icpp_wrap for the code, the symbols, and the section headers,
 * section names and symbol table rewritten after it.  The old .eh_frame
 * and .eh_frame_hdr bytes stay where they were, unreferenced. */
int rw_image_add_segment(rw_image *img, const rw_newseg *ns, icpp_err *err);

#endif
