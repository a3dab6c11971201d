/* events.c -- event names to perf_event_attr through libpfm4, and the attribute rules ICPP samples with. */
#include <stdio.h>

#include "events.h"

#include <cpuid.h>
#include <errno.h>
#include <perfmon/pfmlib_perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int pfm_ready(icpp_err *err)
{
    static int state;   /* 0 not tried, 1 ok, -1 failed */
    if (!state) {
        int r = pfm_initialize();
        state = r == PFM_SUCCESS ? 1 : -1;
        if (state < 0)
            return icpp_err_set(err, ICPP_EUNSUPPORTED, "libpfm4 cannot initialise: %s", pfm_strerror(r));
    }
    return state > 0 ? 0 : icpp_err_set(err, ICPP_EUNSUPPORTED, "libpfm4 is not available");
}

int icpp_event_parse(const char *name, icpp_event *ev, icpp_err *err)
{
    memset(ev, 0, sizeof *ev);
    if (!name || !*name || strlen(name) >= sizeof ev->name)
        return icpp_err_set(err, EINVAL, "event name '%s' is empty or too long", name ? name : "");
    snprintf(ev->name, sizeof ev->name, "%s", name);
    if (pfm_ready(err) < 0)
        return -err->code;
    pfm_perf_encode_arg_t arg;
    memset(&arg, 0, sizeof arg);
    arg.attr = &ev->attr;
    arg.size = sizeof arg;
    int r = pfm_get_os_event_encoding(name, PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &arg);
    if (r != PFM_SUCCESS)
        return icpp_err_set(err, EINVAL, "unknown event '%s' (%s); `icpp-sample --list-events` lists the events of this machine",
                            name, pfm_strerror(r));
    ev->attr.size = sizeof ev->attr;
    ev->hardware = ev->attr.type == PERF_TYPE_HARDWARE || ev->attr.type == PERF_TYPE_HW_CACHE ||
                   ev->attr.type == PERF_TYPE_RAW || ev->attr.type >= 6; /* dynamic PMU types */
    return 0;
}

int icpp_cpu_is_amd(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return 0;
    return b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;   /* "AuthenticAMD" */
}

void icpp_event_setup(icpp_event *ev, const icpp_sample_opts *o, int is_amd)
{
    struct perf_event_attr *a = &ev->attr;
    a->size = sizeof *a;
    a->sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                     PERF_SAMPLE_REGS_USER;
    a->sample_regs_user = ICPP_REGS_MASK;
    a->exclude_kernel = 1;
    a->exclude_hv = 1;
    a->exclude_idle = 0;
    a->disabled = 1;
    a->inherit = 1;
    a->enable_on_exec = 0;
    a->mmap = 1;
    a->mmap2 = 1;
    a->mmap_data = 1;           /* anonymous mappings: tops of thread stacks */
    a->comm = 1;
    a->comm_exec = 1;
    a->task = 1;
    a->sample_id_all = 1;
    a->build_id = 1;            /* mmap2 records carry build-ids (Linux 5.12+) */
    a->watermark = 1;           /* wake on bytes, not events: keeps large PEBS */
    a->wakeup_watermark = 0;    /* set by the ring owner */
    if (ev->hardware) {
        a->freq = 0;
        a->sample_period = o->period ? o->period : 1000003;   /* prime: no lockstep */
        a->precise_ip = is_amd ? 0 : 1;
    } else if (o->period) {
        a->freq = 0;
        a->sample_period = o->period;
    } else {
        a->freq = 1;
        a->sample_freq = o->freq ? o->freq : 4000;
    }
    if (o->validate) {
        a->sample_type |= PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_STACK_USER;
        a->exclude_callchain_kernel = 1;
        a->sample_regs_user = (1ull << PERF_REG_X86_64_MAX) - 1;
        a->sample_regs_user &= ~((1ull << PERF_REG_X86_DS) | (1ull << PERF_REG_X86_ES) |
                                 (1ull << PERF_REG_X86_FS) | (1ull << PERF_REG_X86_GS));
        a->sample_stack_user = o->stack_bytes ? o->stack_bytes : 16384;
    }
}

void icpp_event_setup_learn(icpp_event *primary, uint32_t of, icpp_event *learn, uint32_t every,
                            uint32_t stack_bytes)
{
    if (every < 2)
        every = 2;
    *learn = *primary;
    learn->learn = 1;
    learn->of = of;
    struct perf_event_attr *a = &learn->attr, *p = &primary->attr;
    a->sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                     PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    a->sample_regs_user = ICPP_REGS_MASK;
    a->sample_stack_user = stack_bytes;
    a->mmap = a->mmap2 = a->mmap_data = a->comm = a->comm_exec = a->task = a->build_id = 0;
    /* learn rate 1/(every * (1 + 1/D)) of the total, D = ICPP_LEARN_DETUNE; the primary takes the rest */
    const uint64_t D = ICPP_LEARN_DETUNE;
    if (p->freq) {
        uint64_t f = p->sample_freq, lf = f * D / ((uint64_t)every * (D + 1));
        a->sample_freq = lf ? lf : 1;
        p->sample_freq = f > a->sample_freq ? f - a->sample_freq : 1;
    } else {
        uint64_t per = p->sample_period;
        if (per <= (UINT64_MAX >> 2) / ((uint64_t)every * (D + 1))) {
            uint64_t lp = per * every + per * every / D;
            a->sample_period = lp;
            /* 1/primary + 1/learn = 1/per, rounded */
            p->sample_period = (uint64_t)(((unsigned __int128)per * lp + (lp - per) / 2) / (lp - per));
        } else {
            a->sample_period = UINT64_MAX >> 1;
        }
    }
}

int icpp_perf_event_open(struct perf_event_attr *attr, int pid, int cpu, int group, unsigned long flags)
{
    return (int)syscall(SYS_perf_event_open, attr, pid, cpu, group, flags);
}

static int read_int_file(const char *path, int dflt)
{
    FILE *f = fopen(path, "re");
    int v = dflt;
    if (f) {
        if (fscanf(f, "%d", &v) != 1)
            v = dflt;
        fclose(f);
    }
    return v;
}

int icpp_event_open_error(icpp_err *err, int e, const icpp_event *ev, int pid)
{
    switch (e) {
    case ENOENT:
    case EOPNOTSUPP:
    case ENODEV:
        return icpp_err_set(err, e,
                            "event '%s' is not available on this machine (%s; virtual machines often have no hardware PMU); "
                            "software events such as cpu-clock and task-clock work everywhere",
                            ev->name, strerror(e));
    case EACCES:
    case EPERM: {
        int p = read_int_file("/proc/sys/kernel/perf_event_paranoid", 2);
        return icpp_err_set(err, e,
                            "no permission to sample '%s' (kernel.perf_event_paranoid=%d): run as root, or as the owner of "
                            "the process with perf_event_paranoid <= 2 (sudo sysctl kernel.perf_event_paranoid=2), "
                            "or grant CAP_PERFMON",
                            ev->name, p);
    }
    case ESRCH:
        return icpp_err_set(err, e, "no process %d (it has exited, or the PID is wrong)", pid);
    case EMFILE:
        return icpp_err_set(err, e, "too many open files: raise the limit (ulimit -n)");
    case EINVAL:
        if (ev->attr.precise_ip)
            return icpp_err_set(err, e, "event '%s' cannot be sampled precisely here (precise_ip=%d)", ev->name,
                                (int)ev->attr.precise_ip);
        /* fall through */
    default:
        return icpp_err_set(err, e, "cannot open event '%s': %s", ev->name, strerror(e));
    }
}

void icpp_event_list(FILE *out)
{
    icpp_err err;
    fprintf(out, "software events (always available):\n  cpu-clock\n  task-clock\n");
    if (pfm_ready(&err) < 0) {
        fprintf(out, "(libpfm4: %s)\n", err.msg);
        return;
    }
    fprintf(out, "hardware events libpfm4 knows for this CPU (a VM may still refuse them):\n");
    pfm_pmu_info_t pinfo;
    pfm_event_info_t info;
    for (int pmu = PFM_PMU_NONE; pmu < PFM_PMU_MAX; pmu++) {
        memset(&pinfo, 0, sizeof pinfo);
        pinfo.size = sizeof pinfo;
        if (pfm_get_pmu_info((pfm_pmu_t)pmu, &pinfo) != PFM_SUCCESS || !pinfo.is_present)
            continue;
        if (pinfo.type == PFM_PMU_TYPE_OS_GENERIC && strcmp(pinfo.name, "perf") != 0)
            continue;
        for (int i = pinfo.first_event; i != -1; i = pfm_get_event_next(i)) {
            memset(&info, 0, sizeof info);
            info.size = sizeof info;
            if (pfm_get_event_info(i, PFM_OS_PERF_EVENT_EXT, &info) == PFM_SUCCESS)
                fprintf(out, "  %s::%s\n", pinfo.name, info.name);
        }
    }
}
