/* pathmap.h -- the path map: calling-context tree with heights, its file format, merging and statistics. */
#ifndef ICPP_PATHMAP_H
#define ICPP_PATHMAP_H

#include <stddef.h>
#include <stdint.h>

#include "defs.h"
#include "err.h"

/* A path map is a calling-context tree (CCT).  Node 0 is a virtual root;
 * every other node is a call path (root -> leaf functions) with the number of
 * times its leaf was entered on that path, the heights (base - entry SP) it
 * was entered at, with counts, and the call sites it was called from (return
 * addresses), with counts, as detail.  Nodes are numbered so that a parent
 * always precedes its children.  See docs/pathmap-format.md. */

#define ICPP_PATHMAP_VERSION 1
#define ICPP_DEFS_VERSION    1   /* the definitions of docs/definitions.md */

typedef struct icpp_pathmap icpp_pathmap;

typedef struct icpp_pm_module {
    char         *path;
    icpp_build_id build_id;
    uint8_t       kind;             /* icpp_module_kind, 0 if unknown */
} icpp_pm_module;

typedef struct icpp_pm_func {
    uint32_t module;                /* index into modules */
    uint64_t addr;                  /* link-time start address */
    char    *name;                  /* for people; may be "" */
} icpp_pm_func;

typedef struct icpp_pm_height {
    int64_t  height;
    uint64_t count;                 /* entries at this height, from training (and saved maps) */
    uint64_t learned;               /* learn samples at this height (icpp-resolve, in memory only;
                                       written out as entries: see icpp_pathmap_add_learned) */
} icpp_pm_height;

typedef struct icpp_pm_site {
    uint32_t module;                /* module of the return address */
    uint64_t addr;                  /* link-time return address in the caller */
    uint64_t count;
} icpp_pm_site;

typedef struct icpp_pm_node {
    uint32_t        parent;         /* < this node's index; 0 for roots */
    uint32_t        func;           /* index into funcs; unused for node 0 */
    uint32_t        depth;          /* number of functions on the path */
    uint64_t        count;          /* entries of the leaf on this path */
    icpp_pm_height *heights;
    uint32_t        nheights, capheights;
    icpp_pm_site   *sites;
    uint32_t        nsites, capsites;
} icpp_pm_node;

icpp_pathmap *icpp_pathmap_new(void);
void          icpp_pathmap_free(icpp_pathmap *pm);

/* Building.  Each returns a negative error code on failure (out of memory). */
int  icpp_pathmap_add_module(icpp_pathmap *pm, const char *path, const icpp_build_id *bid,
                             uint8_t kind, uint32_t *idx);
int  icpp_pathmap_add_func(icpp_pathmap *pm, uint32_t module, uint64_t addr, const char *name,
                           uint32_t *idx);
/* The child of `parent` for `func`, created (count 0) if absent. */
int  icpp_pathmap_child(icpp_pathmap *pm, uint32_t parent, uint32_t func, uint32_t *idx);
int  icpp_pathmap_add_height(icpp_pathmap *pm, uint32_t node, int64_t height, uint64_t count);
/* A context seen by `n` learn samples (lib/learn.h): kept apart from the
 * training entries so a resolver can tell learned contexts from trained
 * ones; a map written afterwards stores count + learned as its entries. */
int  icpp_pathmap_add_learned(icpp_pathmap *pm, uint32_t node, int64_t height, uint64_t n);
int  icpp_pathmap_add_site(icpp_pathmap *pm, uint32_t node, uint32_t module, uint64_t addr,
                           uint64_t count);
void icpp_pathmap_add_count(icpp_pathmap *pm, uint32_t node, uint64_t count);
/* Replace function i's display name. */
int  icpp_pathmap_rename_func(icpp_pathmap *pm, uint32_t i, const char *name);
/* Free-form metadata ("program", "runs", "capped-nodes", ...); replaces. */
int  icpp_pathmap_set_meta(icpp_pathmap *pm, const char *key, const char *value);
const char *icpp_pathmap_meta(const icpp_pathmap *pm, const char *key);
/* Metadata in order: key i < icpp_pathmap_nmeta (NULL past the end). */
size_t icpp_pathmap_nmeta(const icpp_pathmap *pm);
const char *icpp_pathmap_meta_key(const icpp_pathmap *pm, size_t i);
/* Which module is the main executable (the map's identity). */
void icpp_pathmap_set_main(icpp_pathmap *pm, uint32_t module);

/* Lookups that add nothing: the index of the function (module, addr), or
 * -1; the child of `parent` for `func`, or 0. */
int64_t  icpp_pathmap_find_func(const icpp_pathmap *pm, uint32_t module, uint64_t addr);
uint32_t icpp_pathmap_find_child(const icpp_pathmap *pm, uint32_t parent, uint32_t func);

/* Reading the tree. */
size_t                icpp_pathmap_nmodules(const icpp_pathmap *pm);
/* The module with build-id bid (icpp_build_id_eq), or -1. */
int32_t               icpp_pathmap_find_module(const icpp_pathmap *pm, const icpp_build_id *bid);
const icpp_pm_module *icpp_pathmap_module(const icpp_pathmap *pm, uint32_t i);
uint32_t              icpp_pathmap_main(const icpp_pathmap *pm);
size_t                icpp_pathmap_nfuncs(const icpp_pathmap *pm);
const icpp_pm_func   *icpp_pathmap_func(const icpp_pathmap *pm, uint32_t i);
size_t                icpp_pathmap_nnodes(const icpp_pathmap *pm);    /* including root 0 */
const icpp_pm_node   *icpp_pathmap_node(const icpp_pathmap *pm, uint32_t i);
/* Functions of node i's path, root first, into out[0..depth-1]; returns depth
 * (out may be NULL to ask for the depth). */
uint32_t icpp_pathmap_path(const icpp_pathmap *pm, uint32_t node, uint32_t *out, uint32_t max);

/* Files.  Write goes to PATH.tmp.XXXXXX, fsync, rename: an existing file is
 * replaced only by a complete new one; the output rule of lib/fsafe.h applies
 * (a link or another user's file in a sticky directory is refused).  Read checks magic, version, length
 * and checksum and every index, so a corrupt file is an error, never a crash.
 * icpp_pathmap_write replaces the map under its lock (icpp_pathmap_update). */
int           icpp_pathmap_write(const icpp_pathmap *pm, const char *path, icpp_err *err);
icpp_pathmap *icpp_pathmap_read(const char *path, icpp_err *err);

/* The one way a map file is written: the concurrency rule for maps
 * (docs/file-safety.md).  Several tools may write one map at once
 * (icpp-train runs, icpp-resolve --save-map), so each holds the map's lock
 * (PATH.lock, lib/fsafe.h) from reading the map as it is now to renaming
 * the new one over it -- never while a program runs or a recording is
 * learned -- and builds the new map from the one it read then, not from one
 * read earlier:
 *   lock; cur = the map at path now (NULL when absent, or when `replace`);
 *   fn(arg, cur, &out): *out is the map to write (cur, changed, or another);
 *   write *out (icpp_pathmap_write's rule); unlock.
 * fn returns 0 or a negative code with *err set (then nothing is written).
 * cur is handed to the caller in *cur_out (NULL if none) when cur_out is
 * given, else freed.  A map that cannot be read is an error (ENOENT aside).
 * A character device (/dev/null) is written in place, without a lock. */
typedef int (*icpp_pathmap_update_fn)(void *arg, icpp_pathmap *cur, const icpp_pathmap **out, icpp_err *err);
int icpp_pathmap_update(const char *path, int replace, icpp_pathmap_update_fn fn, void *arg,
                        icpp_pathmap **cur_out, icpp_err *err);
/* The same on a memory buffer (for the fuzzer and tests). */
icpp_pathmap *icpp_pathmap_decode(const uint8_t *buf, size_t len, icpp_err *err);
int           icpp_pathmap_encode(const icpp_pathmap *pm, uint8_t **buf, size_t *len, icpp_err *err);

/* Streaming encoder of the same format, for writers that hold their tree in
 * another shape (the training agent, possibly inside a fatal-signal handler:
 * give it a wbuf with `mmapped` set and it calls no malloc).  Call order:
 *   begin; module x M; funcs; func x F; nodes; node x N; metas; meta x K; end.
 * Counts are placeholders patched by the next section call, so nothing needs
 * counting in advance.  Nodes must come parent first: `parent_distance` is
 * this node's index minus its parent's (node 0 is the virtual root; the first
 * node written is 1). */
typedef struct icpp_wbuf icpp_wbuf;
typedef struct icpp_pmenc {
    icpp_wbuf *b;
    size_t     body;        /* offset of the body */
    size_t     count_at;    /* offset of the current section's count placeholder */
    uint64_t   count;       /* items in the current section */
} icpp_pmenc;
void icpp_pmenc_begin(icpp_pmenc *e, icpp_wbuf *b, uint32_t main_module);
void icpp_pmenc_module(icpp_pmenc *e, uint8_t kind, const char *path, const icpp_build_id *bid);
void icpp_pmenc_funcs(icpp_pmenc *e);
void icpp_pmenc_func(icpp_pmenc *e, uint32_t module, uint64_t addr, const char *name);
void icpp_pmenc_nodes(icpp_pmenc *e);
void icpp_pmenc_node(icpp_pmenc *e, uint64_t parent_distance, uint32_t func, uint64_t count,
                     const icpp_pm_height *h, uint32_t nh, const icpp_pm_site *s, uint32_t ns);
void icpp_pmenc_metas(icpp_pmenc *e);
void icpp_pmenc_meta(icpp_pmenc *e, const char *key, const char *val);
/* Patch the length, append the CRC.  Returns 0, or -ENOMEM if the buffer
 * could not grow (then its contents are not a valid file). */
int  icpp_pmenc_end(icpp_pmenc *e);

/* Add src into dst: modules matched by build-id, functions by (module,
 * address), nodes by path; counts add.  Refuses (ICPP_EMISMATCH) when the
 * main executables' build-ids differ. */
int icpp_pathmap_merge(icpp_pathmap *dst, const icpp_pathmap *src, icpp_err *err);

/* What learning added to pm (icpp_pathmap_add_learned), alone: a new map
 * with the learned heights, their counts as entries, on the paths that have
 * them (nodes' own counts 0), the main module pm's.  What icpp-resolve
 * --save-map adds to a map as it is when saved.  NULL when out of memory. */
icpp_pathmap *icpp_pathmap_learned_part(const icpp_pathmap *pm);

/* Context-id statistics (the paper's figures 5.2 and 5.8).  A context is a
 * (node, height) pair; its CID is (node's function, height).  A context is
 * unique when no other node has the same CID. */
#define ICPP_AMBIG_BUCKETS 7          /* 1, 2, 3, 4-5, 6-10, 11-100, >100 */
typedef struct icpp_pm_stats {
    size_t   modules, funcs, paths, contexts, cids;
    size_t   unique_contexts;         /* contexts whose CID no other path shares */
    size_t   unique_paths;            /* paths all of whose contexts are unique */
    uint64_t calls, unique_calls;     /* weighted by entry counts */
    size_t   hist_paths[ICPP_AMBIG_BUCKETS];  /* contexts by #paths sharing their CID */
    uint64_t hist_calls[ICPP_AMBIG_BUCKETS];
    uint32_t max_depth;
} icpp_pm_stats;
int icpp_pathmap_stats(const icpp_pathmap *pm, icpp_pm_stats *st, icpp_err *err);
const char *icpp_pathmap_bucket_name(int bucket);

#endif
