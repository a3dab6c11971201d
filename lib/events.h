/* events.h -- event names to perf_event_attr through libpfm4, and the attribute rules ICPP samples with. */
#ifndef ICPP_EVENTS_H
#define ICPP_EVENTS_H

#include <asm/perf_regs.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdint.h>

#include "err.h"

typedef struct icpp_event {
    char                   name[128];   /* as the user wrote it */
    struct perf_event_attr attr;
    int                    hardware;    /* PMU event (may use PEBS/IBS) */
    int                    learn;       /* a learn event: samples with a stack copy (icpp_event_setup_learn) */
    uint32_t               of;          /* a learn event's profile event (index) */
} icpp_event;

/* Registers every sample carries (PERF_SAMPLE_REGS_USER), in bit order. */
#define ICPP_REGS_MASK ((1ull << PERF_REG_X86_BP) | (1ull << PERF_REG_X86_SP) | (1ull << PERF_REG_X86_IP))

/* Encode `name` (cpu-clock, cycles, instructions, MEM_LOAD_RETIRED.L1_MISS,
 * r01c2, ...) for user-space-only sampling.  Fails with a message that names
 * the event and suggests `--list-events`. */
int icpp_event_parse(const char *name, icpp_event *ev, icpp_err *err);

typedef struct icpp_sample_opts {
    uint64_t period;      /* events (or ns for clocks) between samples; 0 = use freq */
    uint64_t freq;        /* samples per second when period == 0 */
    int      validate;    /* also record callchain and a user stack copy */
    uint32_t stack_bytes; /* stack copy size in validate mode */
} icpp_sample_opts;

/* Fill the sampling part of ev->attr the way ICPP samples: IP, TID, TIME,
 * IDENTIFIER and user SP/BP/IP, user space only, mmap/comm/task records with
 * build-ids.  Hardware events get a fixed period and precise_ip (so Intel can
 * use large PEBS buffers: no freq mode, sample_type within LARGE_PEBS_FLAGS,
 * exclude_kernel with REGS_USER, GP registers only); precise_ip = 1 keeps the
 * IP/SP pair consistent (docs/background.md section 2).  On AMD precise_ip stays 0:
 * IBS pairs its own IP with interrupt-time SP. */
void icpp_event_setup(icpp_event *ev, const icpp_sample_opts *o, int is_amd);

/* The learn event that goes with `primary` (set up already; index `of`):
 * the same event at `every` (>= 2) times its period (or 1/every of its
 * frequency), with the user stack copied (`stack_bytes`) and only IP, SP
 * and BP, and no side-band records (the primary event has them).  The
 * primary's period becomes every/(every-1) times longer, so that the two
 * together sample at the rate asked for: a learn sample is one of the
 * profile's samples that happens to carry its stack, not an extra
 * interrupt.  A separate event, so the primary keeps large-PEBS-compatible
 * attributes.  The learn period is detuned by 1/ICPP_LEARN_DETUNE (longer:
 * learn samples are that much rarer), so that the two timers of a software
 * event never lock in phase: at equal periods (every = 2) each learn sample
 * fell a fixed few microseconds before a profile sample, which then found
 * its own context learned -- a precision no other rate and no hardware
 * event has (docs/resolve.md, "The learn rate"). */
#define ICPP_LEARN_DETUNE 16
void icpp_event_setup_learn(icpp_event *primary, uint32_t of, icpp_event *learn, uint32_t every,
                            uint32_t stack_bytes);

/* 1 if the CPU is AMD (cpuid vendor). */
int icpp_cpu_is_amd(void);

/* perf_event_open(2). */
int icpp_perf_event_open(struct perf_event_attr *attr, int pid, int cpu, int group, unsigned long flags);

/* A one-line explanation of a perf_event_open failure for event `name`,
 * with what to do: ENOENT/EOPNOTSUPP (not on this machine), EACCES/EPERM
 * (paranoid level and the fix), ESRCH (no such process), EINVAL, EMFILE. */
int icpp_event_open_error(icpp_err *err, int errnum, const icpp_event *ev, int pid);

/* Print the events libpfm4 knows for this machine's PMUs, and the software ones. */
void icpp_event_list(FILE *out);

#endif
