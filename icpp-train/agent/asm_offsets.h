/* asm_offsets.h -- structure offsets the trampoline (tramp.S) uses; checked against internal.h. */
#ifndef ICPP_AGENT_ASM_OFFSETS_H
#define ICPP_AGENT_ASM_OFFSETS_H

/* recorder.c asserts each of these with offsetof at compile time. */

#define ICPP_TLS_THR       0     /* icpp_agent_tls.thr */
#define ICPP_TLS_BUSY      8     /* icpp_agent_tls.busy */

#define ICPP_T_TOP         0     /* icpp_agent_thread.top */
#define ICPP_T_FRAMES      8
#define ICPP_T_LIMIT      16
#define ICPP_T_BASE       24
#define ICPP_T_MAX_TOP    32
#define ICPP_T_HITS       40     /* the thread's hit table */
#define ICPP_T_HIT_MASK   48

#define ICPP_T2_PARENT     0     /* icpp_agent_hit2 */
#define ICPP_T2_HIT        8
#define ICPP_T2_SIZE_LOG2  6
#define ICPP_HIT_SHIFT    40     /* slot = (hash >> 40) & hit_mask */

#define ICPP_F_SP          0     /* icpp_agent_frame */
#define ICPP_F_RA          8
#define ICPP_F_NODE       16
#define ICPP_F_SIZE       24

#define ICPP_N_FUNC        0     /* icpp_agent_node */
#define ICPP_N_COUNT       8
#define ICPP_N_LAST_HIT  104
#define ICPP_N_HITS      112     /* hits[0] */

#define ICPP_H_RA          0     /* icpp_agent_hit */
#define ICPP_H_KEY         8
#define ICPP_H_CHILD      16
#define ICPP_H_HCOUNT     24
#define ICPP_H_SCOUNT     32
#define ICPP_H_SIZE       40
#define ICPP_N_HITS_COUNT  8     /* ICPP_AGENT_NODE_HITS */
#define ICPP_N_HITS_LOG2   3
#define ICPP_HIT_MUL      0x9e3779b97f4a7c15

#define ICPP_IN_RECORDER  0x80000000   /* tls.busy bit set while recording */
#define ICPP_RA_CHECK_SPAN (1 << 30)   /* frames farther above the SP: another stack */

#endif
