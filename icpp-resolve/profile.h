/* profile.h -- icpp-resolve's profile: resolved sample weights per call path (inlined frames expanded) and event, plus what did not resolve. */
#ifndef ICPP_RESOLVE_PROFILE_H
#define ICPP_RESOLVE_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include "fold.h"
#include "hmap.h"
#include "learn.h"
#include "pathmap.h"
#include "replay.h"
#include "resolve.h"

#define PROF_MAX_EVENTS 8

/* Samples that reached no path-map node, grouped by a label
 * ("[missing] func" or "[unresolved: reason] module:func"). */
typedef struct prof_extra {
    char  *label;
    int    kind;                        /* ICPP_RES_MISSING or ICPP_RES_UNRESOLVED */
    double w[PROF_MAX_EVENTS];
} prof_extra;

/* How inlined frames are shown in the text formats (perf says "(inlined)"). */
#define PROF_INLINED_MARK " [inlined]"
#define PROF_MAX_INLINE   32            /* inlined frames kept per address */
/* Paths deeper than this many functions end in one frame named PROF_DEEPER
 * that holds every deeper sample of the branch: the outputs stay linear in
 * the map's size (a crafted 300k-deep chain made them quadratic). */
#define PROF_MAX_DEPTH    1024
#define PROF_DEEPER       "[deeper than 1024 functions]"

/* A frame of the profile's calling-context tree as the outputs show it: a
 * path-map node's function, or a function that DWARF says was inlined into
 * one.  Without inlined frames, frame i is path-map node i. */
typedef struct prof_frame {
    uint32_t    parent;                 /* frame index, below this one; 0 (the virtual root) for roots */
    uint32_t    node;                   /* path-map node: this function's, or the one it was inlined into */
    uint32_t    depth;                  /* frames from the root to this one, itself included */
    uint32_t    chain;                  /* inlined frames: the inline chain ending here (> 0); 0 for a function */
    const char *name;                   /* function name, unmarked */
    uint8_t     inferred;               /* a function placed by completion: its node is not in the trained map */
} prof_frame;

/* An inline chain: the functions inlined into one another at an address,
 * as a trie (chain 0 is the empty one). */
typedef struct prof_chain {
    uint32_t parent;                    /* the chain without its innermost function */
    uint32_t name;                      /* index into names: the innermost function */
} prof_chain;

/* Leaf weights of a path-map node whose samples were in inlined code. */
typedef struct prof_variant {
    uint32_t node, chain;
    double   w[PROF_MAX_EVENTS], amb[PROF_MAX_EVENTS], inf[PROF_MAX_EVENTS];
} prof_variant;

/* How frames made by completion are marked in the text formats. */
#define PROF_INFERRED_MARK " [inferred]"

/* A node's weight for one event, kept together: a sample adds to all three. */
typedef struct prof_nw {
    double self;        /* samples outside inlined code */
    double amb;         /* the ambiguous part of it */
    double inf;         /* the inferred part of it (completion, lib/complete.h) */
} prof_nw;

typedef struct profile {
    const icpp_pathmap *pm;
    const char  *map_path;
    int          inlines;               /* expand inlined frames from DWARF */
    int          fold;                  /* --fold-recursion: paths folded (lib/fold.h); set after prof_init */
    icpp_folder  folder;                /* for fold (initialized on first use) */
    uint32_t     nev;
    char         ev_names[PROF_MAX_EVENTS][128];
    size_t       nnodes;                /* path-map nodes */
    /* What prof_add collects. */
    prof_nw     *node_w;                /* [node * PROF_MAX_EVENTS + ev]: samples outside inlined code */
    size_t       trained_nodes;         /* nodes of the map as read: later ones were made by completion */
    size_t       trained_funcs;         /* functions of the map as read: later ones were added by completion */
    prof_variant *var;                  /* samples inside inlined code, by (node, leaf chain) */
    size_t       nvar, capvar;
    icpp_hmap    var_ix;                /* (node, chain) -> index into var */
    prof_chain  *chains;
    size_t       nchains, capchains;
    icpp_hmap    chain_ix;              /* (parent chain, name) -> chain */
    char       **names;                 /* inlined functions' names, interned */
    size_t       nnames, capnames;
    icpp_hmap    name_ix;               /* (hash, probe) -> index into names */
    icpp_hmap    at_chain;              /* (icpp_module *, address) -> chain: the DWARF lookups, cached */
    /* The tree the outputs show, built by prof_finish. */
    prof_frame  *frames;
    size_t       nframes, capframes;
    double      *self;                  /* [frame * PROF_MAX_EVENTS + ev] */
    double      *self_amb;              /* the ambiguous part of self */
    double      *self_inf;              /* the inferred part of self */
    double      *incl;                  /* inclusive */
    prof_extra  *extra;
    size_t       nextra, capextra;
    uint64_t     samples[PROF_MAX_EVENTS];
    uint64_t     by_kind[PROF_MAX_EVENTS][ICPP_RES_MAX];
    uint64_t     by_status[ICPP_RS_MAX];        /* unresolved samples by replay status, all events */
    uint64_t     lost;
    size_t       truncated;
    int          lost_saturated;    /* lost is 2^64 - 1 because the LOST records add up past it */
    int          clean_end;
    char         command[1024];
    char         binary[1024];          /* main module of the map */
    char         map_build_id[2 * ICPP_BUILD_ID_MAX + 1];
    const struct mapset *ms;            /* the maps per binary, for the per-binary report (NULL: none) */
    const struct sampstat *ss;          /* the intervals between samples per thread (NULL: not measured) */
    const icpp_replay *rp;              /* from prof_finish: its modules serve as the map's where they match */
    const icpp_learn_stats *learn;      /* what the recording's learn samples added to the map, or NULL */
    struct icpp_module **mods;          /* the map's modules, opened for source lines and inlined calls */
    uint8_t     *mods_tried;            /* 1: opened here, 2: the replay's */
} profile;

/* inlines: expand inlined frames where the binaries have DWARF. */
int  prof_init(profile *p, const icpp_pathmap *pm, const char *map_path, int inlines);
void prof_free(profile *p);
/* Add one sample's resolution; 0 or -ENOMEM. */
int  prof_add(profile *p, const icpp_replay *rp, const icpp_rsample *s, const icpp_resolution *r);
/* After the last sample: the frames and their inclusive weights, event
 * names, counters; 0 or -ENOMEM.  rp must stay open until prof_free (the
 * outputs read source lines from its modules). */
int  prof_finish(profile *p, const icpp_replay *rp);

/* One line to f if the recording `path` (read to its end) is incomplete: a
 * cut block, or no closing record (a killed sampler); nothing otherwise. */
void prof_warn_incomplete(FILE *f, const char *path, const icpp_replay_info *in);
double prof_total(const profile *p, uint32_t ev);
/* Frames of frame f's path, root first, into out[0..max-1]; returns the depth. */
uint32_t prof_path(const profile *p, uint32_t f, uint32_t *out, uint32_t max);
/* Frame f's name as shown: inlined frames marked with PROF_INLINED_MARK,
 * frames placed by completion with PROF_INFERRED_MARK
 * (into buf; a function's name is returned as it is). */
const char *prof_label(const profile *p, uint32_t f, char *buf, size_t bufsz);
/* Path of frame f as "a;b;c" with labels escaped as text (lib/escape.h) and
 * the separator's first character inside a label replaced by ',', into buf. */
const char *prof_path_str(const profile *p, uint32_t f, const char *sep, char *buf, size_t bufsz);
const char *prof_func_name(const profile *p, uint32_t func);
/* Where node's function was called from (its most frequent call site): the
 * caller's "file:line" from DWARF, else "module+0xaddr"; "" for none. */
const char *prof_site(profile *p, uint32_t node, char *buf, size_t bufsz);

#endif
