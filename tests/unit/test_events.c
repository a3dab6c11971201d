/* test_events.c -- lib/events.c: names through libpfm4, and the attribute rules of events.h
 * (fixed prime period and precise_ip for hardware events, large-PEBS-compatible sample_type,
 * the learn event's rates) checked field by field; no event is opened. */
#include "events.h"

#include <string.h>

#include "check.h"

/* Linux's LARGE_PEBS_FLAGS (arch/x86/events/perf_event.h; PERF_SAMPLE_TIME is among them in
 * current kernels): a sample_type outside it falls back to one interrupt per sample. */
#define LARGE_PEBS_FLAGS                                                                                   \
    (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_ADDR | PERF_SAMPLE_ID | PERF_SAMPLE_CPU |              \
     PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TRANSACTION |     \
     PERF_SAMPLE_PHYS_ADDR | PERF_SAMPLE_REGS_INTR | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_PERIOD |          \
     PERF_SAMPLE_TIME)

static uint64_t rate(const struct perf_event_attr *a)  /* samples per 1e6 events (period) or per second (freq) */
{
    return a->freq ? a->sample_freq : 1000000000000ull / a->sample_period;
}

/* Equal to within 10 ppm (periods are whole numbers). */
static int near(uint64_t a, uint64_t b)
{
    return (a > b ? a - b : b - a) * 100000 <= b;
}

int main(void)
{
    icpp_event ev, hw, lr;
    icpp_err err;
    CHECK(icpp_event_parse("cpu-clock", &ev, &err) == 0, "cpu-clock: %s", err.msg);
    CHECK(!ev.hardware && ev.attr.type == PERF_TYPE_SOFTWARE && ev.attr.config == PERF_COUNT_SW_CPU_CLOCK,
          "cpu-clock is the software clock");
    CHECK(icpp_event_parse("cycles", &hw, &err) == 0, "cycles: %s", err.msg);
    CHECK(hw.hardware, "cycles is a hardware event");
    icpp_event bad;
    CHECK(icpp_event_parse("no-such-event-xyz", &bad, &err) < 0 && strstr(err.msg, "no-such-event-xyz") &&
              strstr(err.msg, "--list-events"),
          "an unknown event names itself and --list-events: %s", err.msg);
    CHECK(icpp_event_parse("", &bad, &err) < 0, "an empty name refused");

    /* software event, default: frequency mode; user space only; side-band records with build-ids */
    icpp_sample_opts o = {0};
    icpp_event_setup(&ev, &o, 0);
    const struct perf_event_attr *a = &ev.attr;
    CHECK(a->freq && a->sample_freq == 4000, "software default: 4000 Hz");
    CHECK(a->exclude_kernel && a->exclude_hv && a->sample_regs_user == ICPP_REGS_MASK, "user space, SP/BP/IP only");
    CHECK(a->sample_type == (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                             PERF_SAMPLE_REGS_USER),
          "sample_type: identifier, ip, tid, time, user regs");
    CHECK(a->mmap2 && a->build_id && a->comm && a->task && a->sample_id_all && a->mmap_data,
          "mmap2 with build-ids, comm, task, anonymous mappings, sample_id_all");
    CHECK(a->disabled && a->inherit && !a->enable_on_exec, "disabled until the exec stop; inherited");

    /* hardware event: fixed period (never freq), prime by default, precise_ip 1 except on AMD */
    icpp_event hw_amd = hw;
    icpp_event_setup(&hw, &o, 0);
    icpp_event_setup(&hw_amd, &o, 1);
    CHECK(!hw.attr.freq && hw.attr.sample_period == 1000003, "hardware default: period 1000003, no freq mode");
    CHECK(hw.attr.precise_ip == 1 && hw_amd.attr.precise_ip == 0, "precise_ip 1 on Intel, 0 on AMD (IBS)");
    CHECK(!(hw.attr.sample_type & ~(uint64_t)LARGE_PEBS_FLAGS), "sample_type within large PEBS's flags");
    CHECK(hw.attr.exclude_kernel && hw.attr.sample_regs_user == ICPP_REGS_MASK, "REGS_USER with exclude_kernel");
    o.freq = 999;
    icpp_event_setup(&hw, &o, 0);
    CHECK(!hw.attr.freq && hw.attr.sample_period == 1000003, "-F does not put a hardware event in freq mode");
    o = (icpp_sample_opts){.period = 20011};
    icpp_event_setup(&hw, &o, 0);
    CHECK(!hw.attr.freq && hw.attr.sample_period == 20011, "-c sets the period");

    /* --validate: callchain and stack copy, every register but the segment ones */
    icpp_sample_opts ov = {.validate = 1, .stack_bytes = 8192};
    icpp_event vv = ev;
    icpp_event_setup(&vv, &ov, 0);
    CHECK((vv.attr.sample_type & PERF_SAMPLE_CALLCHAIN) && (vv.attr.sample_type & PERF_SAMPLE_STACK_USER) &&
              vv.attr.sample_stack_user == 8192 && vv.attr.exclude_callchain_kernel,
          "validate: callchain and an 8 KiB stack copy");
    CHECK((vv.attr.sample_regs_user & ICPP_REGS_MASK) == ICPP_REGS_MASK &&
              !(vv.attr.sample_regs_user & (1ull << PERF_REG_X86_DS)) &&
              !(vv.attr.sample_regs_user & (1ull << PERF_REG_X86_GS)),
          "validate: the general registers, not DS..GS");

    /* learn event, period mode: learn at 4x the period detuned by 1/16 (4.25x), primary at
     * 4.25/3.25x: together the rate asked for */
    o = (icpp_sample_opts){.period = 300000};
    icpp_event_setup(&hw, &o, 0);
    uint64_t asked = rate(&hw.attr);
    icpp_event_setup_learn(&hw, 0, &lr, 4, 4096);
    CHECK(lr.learn && lr.of == 0 && lr.attr.sample_period == 1275000 && hw.attr.sample_period == 392308,
          "learn period 4.25x (%llu), primary 4.25/3.25x (%llu)", (unsigned long long)lr.attr.sample_period,
          (unsigned long long)hw.attr.sample_period);
    uint64_t together = rate(&hw.attr) + rate(&lr.attr);
    CHECK(near(together, asked), "rates add up: %llu vs %llu", (unsigned long long)together,
          (unsigned long long)asked);
    CHECK((lr.attr.sample_type & PERF_SAMPLE_STACK_USER) && lr.attr.sample_stack_user == 4096 &&
              !(hw.attr.sample_type & PERF_SAMPLE_STACK_USER),
          "the learn event copies the stack, the primary does not");
    CHECK(!lr.attr.mmap && !lr.attr.mmap2 && !lr.attr.comm && !lr.attr.task && hw.attr.mmap2,
          "side-band records from the primary only");
    /* every 2 (the software default): the two periods differ, so that the timers
     * drift through every phase, a full cycle within 40 learn samples */
    o = (icpp_sample_opts){.period = 100000};
    icpp_event_setup(&hw, &o, 0);
    asked = rate(&hw.attr);
    icpp_event_setup_learn(&hw, 0, &lr, 2, 4096);
    uint64_t lp = lr.attr.sample_period, pp = hw.attr.sample_period, drift = lp > pp ? lp - pp : pp - lp;
    together = rate(&hw.attr) + rate(&lr.attr);
    CHECK(drift * 40 >= pp && near(together, asked),
          "every 2: learn %llu, primary %llu, a phase drift of %llu per learn sample, rate %llu of %llu",
          (unsigned long long)lp, (unsigned long long)pp, (unsigned long long)drift, (unsigned long long)together,
          (unsigned long long)asked);
    /* frequency mode: 4000 Hz asked, every 4: learn 4000 / 4.25 = 941 Hz, primary 3059 Hz */
    o = (icpp_sample_opts){0};
    icpp_event_setup(&ev, &o, 0);
    icpp_event_setup_learn(&ev, 2, &lr, 4, 4096);
    CHECK(lr.attr.freq && lr.attr.sample_freq == 941 && ev.attr.sample_freq == 3059 && lr.of == 2,
          "freq: learn 941 Hz, primary 3059 Hz (%llu, %llu)", (unsigned long long)lr.attr.sample_freq,
          (unsigned long long)ev.attr.sample_freq);
    return check_done("events");
}
