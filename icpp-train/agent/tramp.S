/* tramp.S -- the common entry trampoline every stub calls, and our signal restorer. */

/* A stub (patch.c) is entered by the jmp at a function's first byte, so
 * %rsp is the function's entry SP and [%rsp] its return address.  It does
 *     push %r11                   ; not dead: gcc's -fipa-ra may keep values there
 *     mov  $index, %r11d
 *     call *tramp_slot(%rip)      ; -> here, [%rsp] = back into the stub
 *     pop  %r11
 * then runs the relocated first instructions and jumps back.  So here the
 * entry SP is %rsp + 16 (return into the stub, saved r11).  Here we save
 * every caller-saved general register that can hold an argument or the
 * static chain (rax = vector-arg count for varargs, r10 = static chain)
 * and call the recorder, which is compiled with -mgeneral-regs-only so the
 * vector/x87 state is never touched and need not be saved.  Flags and the
 * area below the entry SP are dead at function entry.
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
    /* Fast path: the entry repeats a call recorded before -- same caller
     * node, return address, height and function -- found in the caller
     * node's hit cache: what icpp_agent_record() would do for it (pop the frames
     * that returned, count, push) without the call.  Anything else (first
     * entry of a thread, critical section, a cache miss, the depth cap)
     * takes the C path, which starts over: nothing is committed before
     * the last check.  The C recorder fills the cache only where its
     * result depends on nothing but the key (recorder.c, hit_put). */
    push    %rax
    push    %rcx
    push    %rdx
    push    %rsi
    push    %rdi
    push    %r8
    push    %r9
    push    %r10
    .cfi_adjust_cfa_offset 64
    movq    icpp_agent_tls_@gottpoff(%rip), %rax
    cmpl    $0, %fs:ICPP_TLS_BUSY(%rax)
    jne     .Lslow
    movq    %fs:ICPP_TLS_THR(%rax), %rcx        /* t */
    testq   %rcx, %rcx
    jz      .Lslow
    movl    $ICPP_IN_RECORDER, %fs:ICPP_TLS_BUSY(%rax)   /* before reading t */
    leaq    80(%rsp), %rdx                      /* s = entry SP (8 saved + ret + r11) */
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
    movq    ICPP_F_NODE(%rsi), %r8              /* parent */
    movq    (%rdx), %r9                         /* return address */
    movq    ICPP_T_BASE(%rcx), %r10
    subq    %rdx, %r10                          /* height */
    movslq  %r10d, %rax
    cmpq    %rax, %r10
    jne     .Lslow_clear                        /* beyond int32: never cached */
    shlq    $32, %r10
    orq     %r11, %r10                          /* key: height << 32 | function */
    /* h = ra * MUL: its top bits pick the first slot, the next ones the second */
    movabsq $ICPP_HIT_MUL, %rdi
    imulq   %r9, %rdi
    movq    %rdi, %rax
    shrq    $(64 - ICPP_N_HITS_LOG2), %rax
    leaq    (%rax,%rax,4), %rax                 /* x 5 (x 8 below: 40 bytes) */
    leaq    ICPP_N_HITS(%r8,%rax,8), %rax       /* first entry */
    cmpq    %r9, ICPP_H_RA(%rax)
    jne     2f
    cmpq    %r10, ICPP_H_KEY(%rax)
    je      3f
2:  shrq    $(64 - 2 * ICPP_N_HITS_LOG2), %rdi
    andq    $(ICPP_N_HITS_COUNT - 1), %rdi
    leaq    (%rdi,%rdi,4), %rax
    leaq    ICPP_N_HITS(%r8,%rax,8), %rax       /* second entry */
    cmpq    %r9, ICPP_H_RA(%rax)
    jne     4f
    cmpq    %r10, ICPP_H_KEY(%rax)
    je      3f
4:  /* the thread's table: slot ((ra ^ parent ^ key) * MUL >> SHIFT) & mask */
    movq    %r9, %rax
    xorq    %r8, %rax
    xorq    %r10, %rax
    movabsq $ICPP_HIT_MUL, %rdi
    imulq   %rdi, %rax
    shrq    $ICPP_HIT_SHIFT, %rax
    andq    ICPP_T_HIT_MASK(%rcx), %rax
    shlq    $ICPP_T2_SIZE_LOG2, %rax
    addq    ICPP_T_HITS(%rcx), %rax
    cmpq    %r8, ICPP_T2_PARENT(%rax)
    jne     .Lslow_clear
    addq    $ICPP_T2_HIT, %rax                  /* the entry */
    cmpq    %r9, ICPP_H_RA(%rax)
    jne     .Lslow_clear
    cmpq    %r10, ICPP_H_KEY(%rax)
    jne     .Lslow_clear
3:
    /* commit */
    movq    ICPP_H_HCOUNT(%rax), %rdi
    incq    (%rdi)
    movq    ICPP_H_SCOUNT(%rax), %rdi
    incq    (%rdi)
    movq    ICPP_H_CHILD(%rax), %rax
    incq    ICPP_N_COUNT(%rax)
    incq    ICPP_T_ENTRIES(%rcx)
    addq    $ICPP_F_SIZE, %rsi
    movq    %rdx, ICPP_F_SP(%rsi)
    movq    %r9, ICPP_F_RA(%rsi)
    movq    %rax, ICPP_F_NODE(%rsi)
    movq    %rsi, ICPP_T_TOP(%rcx)
    cmpq    ICPP_T_MAX_TOP(%rcx), %rsi
    jbe     1f
    movq    %rsi, ICPP_T_MAX_TOP(%rcx)
1:  movq    icpp_agent_tls_@gottpoff(%rip), %rax
    movl    $0, %fs:ICPP_TLS_BUSY(%rax)
    jmp     .Ldone
.Lslow_clear:
    movq    icpp_agent_tls_@gottpoff(%rip), %rax
    movl    $0, %fs:ICPP_TLS_BUSY(%rax)
.Lslow:
    leaq    80(%rsp), %rsi                      /* entry SP: 8 saved + ret + r11 */
    movl    %r11d, %edi                         /* function index */
    subq    $8, %rsp                            /* 16-byte alignment at the call */
    .cfi_adjust_cfa_offset 8
    call    icpp_agent_record
    addq    $8, %rsp
    .cfi_adjust_cfa_offset -8
.Ldone:
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
