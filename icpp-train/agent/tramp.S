/* tramp.S -- the common entry trampoline every stub calls, and our signal restorer. */

/* A stub (patch.c) is entered by the jmp at a function's first byte, so
 * %rsp is the function's entry SP and [%rsp] its return address.  It does
 *     push %r11                   ; not dead: gcc's -fipa-ra may keep values there
 *     mov  $index, %r11d
 *     call *tramp_slot(%rip)      ; -> here, [%rsp] = back into the stub
 *     pop  %r11
 * then runs the relocated first instructions and jumps back.  So here the
 * entry SP is %rsp + 16 (return into the stub, saved r11; r11 is ours to
 * use).  The fast path saves the 5 registers it uses; the C path saves
 * every other caller-saved general register that can hold an argument or
 * the static chain (rax = vector-arg count for varargs, r10 = static
 * chain) and calls the recorder, which is compiled with -mgeneral-regs-only
 * so the vector/x87 state is never touched and need not be saved.  Flags
 * and the area below the entry SP are dead at function entry.
 * Alignment: an ABI-conforming caller leaves %rsp = 8 mod 16 at the entry,
 * so after the stub's push and call, 8 pushes and 8 bytes of padding it is
 * 16-byte aligned at our call.
 * The stack is not realigned for callers that break the ABI (hand-written
 * assembly): general-register-only code has no alignment requirement. */

#include "asm_offsets.h"

    .text
    .p2align 4
    .globl  icpp_agent_tramp
    .hidden icpp_agent_tramp
    .type   icpp_agent_tramp, @function
icpp_agent_tramp:
    .cfi_startproc
    endbr64
#ifdef ICPP_AGENT_HOOKS_ONLY
    ret         /* bench/: the cost of the hooks alone, recording nothing */
#endif
    /* Fast path: the entry repeats a call recorded before -- same caller
     * node, return address, height and function -- found in the caller
     * node's slots or the thread's table: what icpp_agent_record() would
     * do for it (pop the frames that returned, count, push) without the
     * call, in 5 saved registers (r11 is the stub's).  Anything else
     * (first entry of a thread, critical section, a miss, the depth cap)
     * takes the C path, which starts over: nothing is committed before the
     * last check.  The C recorder fills the caches only where its result
     * depends on nothing but the key (recorder.c, hit_put). */
    push    %rax
    push    %rcx
    push    %rdx
    push    %rsi
    push    %rdi
    .cfi_adjust_cfa_offset 40
    movq    icpp_agent_tls_@gottpoff(%rip), %rax
    cmpl    $0, %fs:ICPP_TLS_BUSY(%rax)
    jne     .Lslow
    movq    %fs:ICPP_TLS_THR(%rax), %rcx        /* t */
    testq   %rcx, %rcx
    jz      .Lslow
    movl    $ICPP_IN_RECORDER, %fs:ICPP_TLS_BUSY(%rax)   /* before reading t */
    leaq    56(%rsp), %rdx                      /* s = entry SP (5 saved + ret + r11) */
    movq    ICPP_T_TOP(%rcx), %rsi              /* f */
.Lpop:                                          /* pop frames that have returned */
    cmpq    ICPP_T_FRAMES(%rcx), %rsi
    je      .Lpopped
    movq    ICPP_F_SP(%rsi), %rdi
    cmpq    %rdx, %rdi
    jbe     .Lpop1                              /* f->sp <= s */
    subq    %rdx, %rdi
    cmpq    $ICPP_RA_CHECK_SPAN, %rdi
    jae     .Lpopped                            /* on another stack: keep */
    movq    ICPP_F_SP(%rsi), %rdi
    movq    (%rdi), %rdi
    cmpq    ICPP_F_RA(%rsi), %rdi
    je      .Lpopped                            /* return address intact: live */
.Lpop1:
    subq    $ICPP_F_SIZE, %rsi
    jmp     .Lpop
.Lpopped:
    leaq    ICPP_F_SIZE(%rsi), %rdi
    cmpq    ICPP_T_LIMIT(%rcx), %rdi
    je      .Lslow_clear                        /* depth cap */
    movq    ICPP_T_BASE(%rcx), %rdi
    subq    %rdx, %rdi                          /* height */
    movslq  %edi, %rax
    cmpq    %rax, %rdi
    jne     .Lslow_clear                        /* beyond int32: never cached */
    shlq    $32, %rdi
    orq     %rdi, %r11                          /* key: height << 32 | function (r11d stays the function) */
    movq    (%rdx), %rdi                        /* return address */
    /* h = ra * MUL: its top bits pick the first slot, the next ones the second */
    movq    %rdi, %rax
    imulq   .Lmul(%rip), %rax
    movq    %rax, %rdx
    shrq    $(64 - ICPP_N_HITS_LOG2), %rdx
    imulq   $ICPP_H_SIZE, %rdx, %rdx
    addq    ICPP_F_NODE(%rsi), %rdx             /* + parent */
    cmpq    %rdi, ICPP_N_HITS + ICPP_H_RA(%rdx)
    jne     2f
    cmpq    %r11, ICPP_N_HITS + ICPP_H_KEY(%rdx)
    je      3f
2:  shrq    $(64 - 2 * ICPP_N_HITS_LOG2), %rax
    andq    $(ICPP_N_HITS_COUNT - 1), %rax
    imulq   $ICPP_H_SIZE, %rax, %rdx
    addq    ICPP_F_NODE(%rsi), %rdx
    cmpq    %rdi, ICPP_N_HITS + ICPP_H_RA(%rdx)
    jne     4f
    cmpq    %r11, ICPP_N_HITS + ICPP_H_KEY(%rdx)
    je      3f
4:  /* the thread's table: slot ((ra ^ parent ^ key) * MUL >> SHIFT) & mask */
    movq    %rdi, %rax
    xorq    ICPP_F_NODE(%rsi), %rax
    xorq    %r11, %rax
    imulq   .Lmul(%rip), %rax
    shrq    $ICPP_HIT_SHIFT, %rax
    andq    ICPP_T_HIT_MASK(%rcx), %rax
    shlq    $ICPP_T2_SIZE_LOG2, %rax
    addq    ICPP_T_HITS(%rcx), %rax
    movq    ICPP_F_NODE(%rsi), %rdx
    cmpq    %rdx, ICPP_T2_PARENT(%rax)
    jne     .Lslow_clear
    leaq    (ICPP_T2_HIT - ICPP_N_HITS)(%rax), %rdx   /* same offsets as a node slot */
    cmpq    %rdi, ICPP_N_HITS + ICPP_H_RA(%rdx)
    jne     .Lslow_clear
    cmpq    %r11, ICPP_N_HITS + ICPP_H_KEY(%rdx)
    jne     .Lslow_clear
3:  /* commit: rdx + ICPP_N_HITS is the entry, rdi the return address */
    movq    ICPP_N_HITS + ICPP_H_HCOUNT(%rdx), %rax
    incq    (%rax)
    movq    ICPP_N_HITS + ICPP_H_SCOUNT(%rdx), %rax
    incq    (%rax)
    movq    ICPP_N_HITS + ICPP_H_CHILD(%rdx), %rax
    incq    ICPP_N_COUNT(%rax)
    addq    $ICPP_F_SIZE, %rsi
    leaq    56(%rsp), %rdx
    movq    %rdx, ICPP_F_SP(%rsi)
    movq    %rdi, ICPP_F_RA(%rsi)
    movq    %rax, ICPP_F_NODE(%rsi)
    movq    %rsi, ICPP_T_TOP(%rcx)
    movq    icpp_agent_tls_@gottpoff(%rip), %rax
    movl    $0, %fs:ICPP_TLS_BUSY(%rax)
    pop     %rdi
    pop     %rsi
    pop     %rdx
    pop     %rcx
    pop     %rax
    .cfi_adjust_cfa_offset -40
    ret
    .cfi_adjust_cfa_offset 40
.Lslow_clear:
    movq    icpp_agent_tls_@gottpoff(%rip), %rax
    movl    $0, %fs:ICPP_TLS_BUSY(%rax)
.Lslow:
    push    %r8
    push    %r9
    push    %r10
    .cfi_adjust_cfa_offset 24
    leaq    80(%rsp), %rsi                      /* entry SP: 8 saved + ret + r11 */
    movl    %r11d, %edi                         /* function index */
    subq    $8, %rsp                            /* 16-byte alignment at the call */
    .cfi_adjust_cfa_offset 8
    call    icpp_agent_record
    addq    $8, %rsp
    .cfi_adjust_cfa_offset -8
    pop     %r10
    pop     %r9
    pop     %r8
    pop     %rdi
    pop     %rsi
    pop     %rdx
    pop     %rcx
    pop     %rax
    .cfi_adjust_cfa_offset -64
    ret
    .cfi_endproc
    .p2align 3
.Lmul:
    .quad   ICPP_HIT_MUL
    .size   icpp_agent_tramp, . - icpp_agent_tramp

/* sa_restorer for the SIGTRAP handler: libc's __restore_rt may be patched. */
    .p2align 4
    .globl  icpp_agent_restore_rt
    .hidden icpp_agent_restore_rt
    .type   icpp_agent_restore_rt, @function
icpp_agent_restore_rt:
    mov     $15, %eax               /* rt_sigreturn */
    syscall
    hlt
    .size   icpp_agent_restore_rt, . - icpp_agent_restore_rt

    .section .note.GNU-stack, "", @progbits
