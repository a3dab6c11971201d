/* trends.h -- icpp-resolve --trend: how each call path's cost grows across runs of one program, against a workload feature (docs/trend.md). */
#ifndef ICPP_RESOLVE_TRENDS_H
#define ICPP_RESOLVE_TRENDS_H

/* Whether the command line asks for --trend (before any "--"). */
int trend_requested(int argc, char **argv);
/* The whole --trend mode: its own options (--help lists them), the runs
 * resolved one by one, the fits, the outputs.  Returns the exit status. */
int trend_main(int argc, char **argv);

#endif
