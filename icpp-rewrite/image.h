/* image.h -- a private, patchable copy of an ELF executable's bytes: addresses to file offsets, the build-id note, writing OUT. */
#ifndef RW_IMAGE_H
#define RW_IMAGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "defs.h"
#include "err.h"
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

/* Write the image to `path` (temporary file beside it, fsync, rename) with the
 * original's permission bits plus execute for whoever may read it. */
int rw_image_write(const rw_image *img, const char *path, icpp_err *err);

#endif
