/* mapset.h -- icpp-resolve's path maps: one per executable of a recording, chosen by build-id, and their union for the profile. */
#ifndef ICPP_RESOLVE_MAPSET_H
#define ICPP_RESOLVE_MAPSET_H

#include <stdint.h>
#include <stdio.h>

#include "basevote.h"
#include "complete.h"
#include "err.h"
#include "learn.h"
#include "pathmap.h"
#include "replay.h"
#include "resolve.h"

/* A recording can hold several programs (a wrapper such as timeout or a
 * shell that execs them, fork+exec).  Each process is resolved with the map
 * whose main executable has the build-id of the process's executable; a
 * map is never chosen by name alone.  Lookup order, first match wins
 * (docs/resolve.md):
 *   1. the maps given with -m (several of one build-id are merged);
 *   2. the *.icppmap files of each --map-dir directory, in the order given;
 *   3. BINARY.icppmap next to the recorded executable;
 *   4. NAME.icppmap in the current directory (NAME: the executable's name).
 * Steps 3 and 4 only when neither -m nor --map-dir was given: maps named on
 * the command line are the whole choice.
 * A candidate of another build-id is skipped and named in the reason. */

typedef struct ms_map {
    char         *path;         /* file it was read from (the first, if merged) */
    icpp_pathmap *pm;
    icpp_cidx    *x;            /* built when a binary uses the map */
    icpp_completer *cpl;        /* completion on this map (ms->complete), set on x */
    uint32_t     *node;         /* node index -> node of the union */
    uint32_t     *func;         /* function index -> function of the union */
    uint32_t     *mod;          /* module index -> module of the union */
    size_t        nnode, nfunc, nmod;   /* how many of pm's nodes, functions, modules are in the union:
                                           completion adds nodes and functions to pm while samples are
                                           resolved, and mapset_resolve adds them to the union */
    int           used;
    int           expanded;     /* entry aliases' contexts added (lib/alias.h) */
    char        **srcs;         /* the files it was read from (merged), for --save-map */
    size_t        nsrcs;
} ms_map;

/* An executable of the recording and how its samples fared. */
typedef struct ms_bin {
    char          *path;        /* as recorded */
    icpp_build_id  bid;
    int32_t        map;         /* index into maps, -1: none */
    char           why[512];    /* no map: what was tried */
    uint64_t       samples;
    uint64_t       by_kind[ICPP_RES_MAX];
    uint64_t       by_status[ICPP_RS_MAX];  /* unresolved samples by reason */
} ms_bin;

/* A thread (not a main one) and its own stack: the top of the mapping
 * where most of its samples found their context in the map. */
typedef struct ms_stack {
    uint32_t pid, tid;
    uint64_t top;
} ms_stack;

typedef struct mapset {
    ms_map       *maps;
    size_t        nmaps;
    ms_bin       *bins;
    size_t        nbins;
    const char  **dirs;         /* --map-dir, in order */
    size_t        ndirs;
    int           dirs_read;
    char          changed[1024]; /* a recorded module whose file is another build now ("" if none) */
    int           explicit;     /* -m or --map-dir given: no lookup by file name */
    int32_t      *modbin;       /* replay module -> bin (-1 none, -2 unknown) */
    size_t        nmodbin;
    icpp_pathmap *all;          /* union of the used maps (built by mapset_prepare) */
    icpp_cand    *cands;        /* scratch: a resolution's candidates in union nodes */
    size_t        capcands;
    ms_stack     *stacks;       /* each thread's own stack, as voted by mapset_prepare */
    size_t        nstacks;
    uint64_t      thread_samples; /* samples of threads other than a main one (no vote without them) */
    /* Learning (lib/learn.h), set before mapset_prepare: the recording's
     * learn samples become paths of the map of the recording's (first
     * process's) executable -- or, with no map at all and neither -m nor
     * --map-dir, of a map of their own ("(learned)"). */
    int           learn;        /* learn from the recording */
    int           allow_unmapped; /* --check: go on when no executable has a map (all unresolved) */
    uint32_t      votes;        /* icpp_cidx_set_votes for every map */
    int           evidence;     /* icpp_cidx_set_evidence for the learned map: 1 on, 0 off,
                                   -1 where the run is new (icpp_learn_run_is_new) */
    int           evidence_on;  /* what was decided for this recording */
    icpp_learn_stats ls;        /* what learning did */
    int32_t       learn_map;    /* the map learned into, -1 none */
    uint8_t      *novel;        /* icpp_cidx_set_novel of that map */
    size_t        nnovel;
    icpp_learn_trail *trail;    /* icpp_cidx_set_trail of that map */
    /* Completion (lib/complete.h), set before mapset_prepare: one completer
     * per used map, on its own cidx, made after the stack vote (which must
     * not add inferred nodes). */
    int           complete;
    icpp_replay  *pool;         /* modules between passes (mapset_replay_open) */
} mapset;

void mapset_init(mapset *ms);
void mapset_free(mapset *ms);
/* -m MAP: read it now (errors name the file). */
int  mapset_add_map(mapset *ms, const char *path, icpp_err *err);
/* --map-dir DIR: its *.icppmap files are read by mapset_prepare. */
int  mapset_add_dir(mapset *ms, const char *dir, icpp_err *err);
/* Read the recording: its executables, each one's map (lookup order
 * above), the union of the maps found, and which stack is each thread's own
 * (a second pass: for a thread whose samples lie in several mappings -- a
 * coroutine's stack -- the mapping against whose top most of them have a
 * context in the map; the training agent records nothing on foreign stacks,
 * so theirs do not match).  Fails (with the reason) when no executable of
 * the recording has a map. */
int  mapset_prepare(mapset *ms, const char *samples, icpp_err *err);
/* A pass over the recording: icpp_replay_open with the modules the last
 * pass opened (files, function and CFI tables are not built again), and
 * closing it keeps them for the next.  NULL and *err on failure. */
icpp_replay *mapset_replay_open(mapset *ms, const char *samples, icpp_err *err);
void         mapset_replay_close(mapset *ms, icpp_replay *rp);
/* Tell a replay of the same recording each thread's own stack (from the
 * vote in mapset_prepare); call right after opening it.  0 or -ENOMEM. */
int  mapset_apply_stacks(const mapset *ms, icpp_replay *rp);
/* A perf.data has no thread bases: infer them from the union's heights
 * (lib/basevote.h; an ICPP sample file gives an empty vote) and say on log
 * what was inferred for each thread.  Give each replayed sample to
 * icpp_basevote_apply.  NULL and *err on failure. */
icpp_basevote *mapset_infer_bases(const mapset *ms, const char *samples, FILE *log, icpp_err *err);
/* --save-map: write the map learning added to (refused if none was). */
int  mapset_save_learned(const mapset *ms, const char *path, icpp_err *err);
/* The binary of a sample (-1 if its process's executable is unknown). */
int32_t mapset_bin_of(mapset *ms, const icpp_replay *rp, const icpp_rsample *s);
/* Resolve a sample with its binary's map.  *r refers to nodes and functions
 * of the union (ms->all); a sample of a binary without a map becomes
 * unresolved with status ICPP_RS_NOPATHMAP.  Counts it per binary.
 * Returns the map used (-1 none).  r_own (if not NULL) gets the same
 * resolution in that map's own node numbers (maps[k].pm, maps[k].x).
 * Completion may add nodes and functions to maps[k].pm while resolving:
 * they are added to the union first, so *r never names a node past it. */
int32_t mapset_resolve(mapset *ms, const icpp_replay *rp, icpp_rsample *s, icpp_resolution *r,
                       icpp_resolution *r_own);

/* Completion figures summed over the maps' completers (0 if none). */
int  mapset_cpl_stats(const mapset *ms, icpp_cpl_stats *st);

/* The used maps' file names, ", "-separated, into buf.  (The per-binary
 * report, ms->bins, is the output's: output.h.) */
void mapset_names(const mapset *ms, char *buf, size_t sz);

#endif
