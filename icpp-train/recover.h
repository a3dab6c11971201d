/* recover.h -- icpp-train: a thread's path map from its live file, for a process that died before writing its part. */
#ifndef ICPP_TRAIN_RECOVER_H
#define ICPP_TRAIN_RECOVER_H

#include <stdint.h>

#include "err.h"
#include "pathmap.h"

/* Names in the training directory (docs/train.md): part.PID.TID.NS.icppmap
 * and live.PID.TID.NS.  Parses NAME if it starts with PREFIX ("part." or
 * "live."); returns 0, or -1 if it is not such a name. */
int icpp_recover_name(const char *name, const char *prefix, int *pid, int *tid, uint64_t *ns);

/* The live file DIR/NAME (agent/live.h) and the function table it names,
 * read as untrusted input: the thread's calling-context tree as a path map
 * (the table's first module is the main one), with the metadata a part
 * has plus "recovered" = 1.  Only what the agent had committed is read
 * (the header's chunk count, published nodes and pairs); a pointer outside
 * the committed chunks, a node whose parent field disagrees with the walk,
 * or more nodes than the file can hold make the file corrupt.
 * Returns the map, or NULL with *err set; *empty = 1 (and NULL, no error)
 * when the file holds no tree yet (the thread was killed while creating
 * it). */
icpp_pathmap *icpp_recover_live(const char *dir, const char *name, int *empty, icpp_err *err);

#endif
