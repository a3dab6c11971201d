/* rewrite_frames.c -- hand-written frames for icpp-rewrite's analysis: each case is
 * accepted or refused for a stated reason (test_rewrite.py checks --explain), and
 * the accepted ones collide so that the search pads them (then --verify runs it).
 *
 * Every case calls lf() once and returns; main calls every case.  Cases named
 * ok_* must be accepted, bad_* refused with the reason in their comment. */
#include <stdio.h>

__attribute__((noipa, used)) unsigned long lf(unsigned long x)
{
	return x * 0x9e3779b97f4a7c15ul + 1;
}

#define PROLOGUE(name)                                                                  \
	".globl " #name "\n.type " #name ",@function\n" #name ":\n.cfi_startproc\n"           \
	"push %rbp\n.cfi_def_cfa_offset 16\n.cfi_offset %rbp,-16\n"                            \
	"mov %rsp,%rbp\n.cfi_def_cfa_register %rbp\n"
#define EPILOGUE(name) ".cfi_endproc\n.size " #name ",.-" #name "\n"

__asm__(".text\n"
	/* ok_sub: sub/add frame, two epilogues (add+pop, leave). */
	PROLOGUE(ok_sub)
	"sub $0x20,%rsp\n"
	"mov %rdi,-0x8(%rbp)\n"
	"call lf\n"
	"test $1,%al\n"
	"jne 1f\n"
	"add $0x20,%rsp\n"
	"pop %rbp\n.cfi_remember_state\n.cfi_def_cfa %rsp,8\n"
	"ret\n.cfi_restore_state\n"
	"1: leave\n.cfi_def_cfa %rsp,8\n"
	"ret\n"
	EPILOGUE(ok_sub)

	/* ok_args: stack arguments pushed and popped inside the frame. */
	PROLOGUE(ok_args)
	"sub $0x10,%rsp\n"
	"pushq $1\n"
	"pushq $2\n"
	"call lf\n"
	"add $0x10,%rsp\n"
	"leave\n.cfi_def_cfa %rsp,8\n"
	"ret\n"
	EPILOGUE(ok_args)

	/* ok_same: the same shape as ok_sub: lf collides below them. */
	PROLOGUE(ok_same)
	"sub $0x20,%rsp\n"
	"call lf\n"
	"leave\n.cfi_def_cfa %rsp,8\n"
	"ret\n"
	EPILOGUE(ok_same)

	/* ok_enter, ok_enter2: no sub (--enter only); pop %rbp becomes leave. */
	PROLOGUE(ok_enter)
	"call lf\n"
	"pop %rbp\n.cfi_def_cfa %rsp,8\n"
	"ret\n"
	EPILOGUE(ok_enter)
	PROLOGUE(ok_enter2)
	"call lf\n"
	"pop %rbp\n.cfi_def_cfa %rsp,8\n"
	"ret\n"
	EPILOGUE(ok_enter2)

	/* ok_above: reads its saved %rbp through %rsp (above the frame): the displacement gets +P. */
	PROLOGUE(ok_above)
	"sub $0x10,%rsp\n"
	"mov 0x10(%rsp),%rax\n"
	"call lf\n"
	"leave\n.cfi_def_cfa %rsp,8\n"
	"ret\n"
	EPILOGUE(ok_above)

	/* bad_mixed: the same slot through %rbp and through %rsp. */
	PROLOGUE(bad_mixed)
	"sub $0x20,%rsp\n"
	"mov %rdi,-0x8(%rbp)\n"
	"mov 0x18(%rsp),%rdi\n"
	"call lf\n"
	"leave\n.cfi_def_cfa %rsp,8\n"
	"ret\n"
	EPILOGUE(bad_mixed)

	/* bad_shrink: calls before the frame is allocated. */
	PROLOGUE(bad_shrink)
	"call lf\n"
	"sub $0x10,%rsp\n"
	"mov %rax,%rdi\n"
	"call lf\n"
	"leave\n.cfi_def_cfa %rsp,8\n"
	"ret\n"
	EPILOGUE(bad_shrink)

	/* bad_alloca: a dynamic allocation. */
	PROLOGUE(bad_alloca)
	"sub $0x10,%rsp\n"
	"mov $32,%rax\n"
	"sub %rax,%rsp\n"
	"call lf\n"
	"leave\n.cfi_def_cfa %rsp,8\n"
	"ret\n"
	EPILOGUE(bad_alloca)

	/* ok_nofp: no frame pointer (the CFA is rsp-based inside the frame: its
	 * offsets get +P), the frame of ok_sub (lf collides below them); reads
	 * its saved %rbx through %rsp and through the address of its incoming
	 * arguments (both displacements get +P): returns lf's value + 1 only if
	 * both reads found the caller's %rbx. */
	".globl ok_nofp\n.type ok_nofp,@function\nok_nofp:\n.cfi_startproc\n"
	"push %rbx\n.cfi_def_cfa_offset 16\n.cfi_offset %rbx,-16\n"
	"sub $0x20,%rsp\n.cfi_def_cfa_offset 48\n"
	"call lf\n"
	"mov 0x20(%rsp),%rcx\n"
	"lea 0x30(%rsp),%rdx\n"
	"mov -0x10(%rdx),%rdx\n"
	"cmp %rcx,%rbx\n"
	"jne 1f\n"
	"cmp %rdx,%rbx\n"
	"jne 1f\n"
	"add $1,%rax\n"
	"1: add $0x20,%rsp\n.cfi_def_cfa_offset 16\n"
	"pop %rbx\n.cfi_def_cfa_offset 8\n"
	"ret\n"
	EPILOGUE(ok_nofp)

	/* bad_straddle: a 16-byte load across the frame boundary (locals and saved %rbx). */
	".globl bad_straddle\n.type bad_straddle,@function\nbad_straddle:\n.cfi_startproc\n"
	"push %rbx\n.cfi_def_cfa_offset 16\n.cfi_offset %rbx,-16\n"
	"sub $0x10,%rsp\n.cfi_def_cfa_offset 32\n"
	"movdqu 0x8(%rsp),%xmm0\n"
	"call lf\n"
	"add $0x10,%rsp\n.cfi_def_cfa_offset 16\n"
	"pop %rbx\n.cfi_def_cfa_offset 8\n"
	"ret\n"
	EPILOGUE(bad_straddle)

	/* bad_retaddr: takes the address of its return address from %rsp. */
	".globl bad_retaddr\n.type bad_retaddr,@function\nbad_retaddr:\n.cfi_startproc\n"
	"push %rbx\n.cfi_def_cfa_offset 16\n.cfi_offset %rbx,-16\n"
	"sub $0x10,%rsp\n.cfi_def_cfa_offset 32\n"
	"lea 0x18(%rsp),%rax\n"
	"call lf\n"
	"add $0x10,%rsp\n.cfi_def_cfa_offset 16\n"
	"pop %rbx\n.cfi_def_cfa_offset 8\n"
	"ret\n"
	EPILOGUE(bad_retaddr)

	/* Call sites into functions that leave by tail calls (--explain's
	 * sites): tail_ok jumps on to lf, which reads no stack-passed argument,
	 * and tail_chain to tail_ok -- wrappable; tail_bad jumps on to
	 * reads_arg, which reads one -- refused. */
	".globl tail_ok\n.type tail_ok,@function\ntail_ok:\n.cfi_startproc\n"
	"jmp lf\n"
	".cfi_endproc\n.size tail_ok,.-tail_ok\n"
	".globl tail_chain\n.type tail_chain,@function\ntail_chain:\n.cfi_startproc\n"
	"jmp tail_ok\n"
	".cfi_endproc\n.size tail_chain,.-tail_chain\n"
	".globl reads_arg\n.type reads_arg,@function\nreads_arg:\n.cfi_startproc\n"
	"mov 8(%rsp),%rcx\n"
	"mov %rdi,%rax\n"
	"ret\n"
	".cfi_endproc\n.size reads_arg,.-reads_arg\n"
	".globl tail_bad\n.type tail_bad,@function\ntail_bad:\n.cfi_startproc\n"
	"jmp reads_arg\n"
	".cfi_endproc\n.size tail_bad,.-tail_bad\n"
	PROLOGUE(wrap_sites)
	"sub $0x10,%rsp\n"
	"call tail_ok\n"
	"mov %rax,%rdi\n"
	"call tail_bad\n"
	"mov %rax,%rdi\n"
	"call tail_chain\n"
	"leave\n.cfi_def_cfa %rsp,8\n"
	"ret\n"
	EPILOGUE(wrap_sites)

	/* Callees a clone may or may not copy (--explain's last column,
	 * docs/rewrite.md "Cloning"): cl_ok may be copied; cl_jtab goes
	 * through a jump table (its targets are PROG's code); cl_jin has a
	 * jump, never taken, into the middle of cl_host. */
	".globl cl_ok\n.type cl_ok,@function\ncl_ok:\n.cfi_startproc\n"
	"lea 1(%rdi),%rax\n"
	"ret\n"
	".cfi_endproc\n.size cl_ok,.-cl_ok\n"
	".globl cl_jtab\n.type cl_jtab,@function\ncl_jtab:\n.cfi_startproc\n"
	"lea .Lcl_tab(%rip),%rax\n"
	"and $1,%edi\n"
	"movslq (%rax,%rdi,4),%rdx\n"
	"add %rdx,%rax\n"
	"jmp *%rax\n"
	".Lcl_one: mov $1,%eax\nret\n"
	".Lcl_two: mov $2,%eax\nret\n"
	".cfi_endproc\n.size cl_jtab,.-cl_jtab\n"
	".section .rodata\n.balign 4\n.Lcl_tab: .long .Lcl_one-.Lcl_tab, .Lcl_two-.Lcl_tab\n.text\n"
	".globl cl_host\n.type cl_host,@function\ncl_host:\n.cfi_startproc\n"
	"mov %rdi,%rax\n"
	".Lcl_mid: add $3,%rax\n"
	"ret\n"
	".cfi_endproc\n.size cl_host,.-cl_host\n"
	".globl cl_jin\n.type cl_jin,@function\ncl_jin:\n.cfi_startproc\n"
	"mov %rdi,%rax\n"
	"cmp $-1,%rdi\n"
	".byte 0x0f,0x84\n.long .Lcl_mid-.-4\n"	/* je .Lcl_mid, as rel32 */
	"ret\n"
	".cfi_endproc\n.size cl_jin,.-cl_jin\n"
	PROLOGUE(clone_sites)
	"sub $0x10,%rsp\n"
	"call cl_ok\n"
	"mov %rax,%rdi\n"
	"call cl_jtab\n"
	"mov %rax,%rdi\n"
	"call cl_jin\n"
	"leave\n.cfi_def_cfa %rsp,8\n"
	"ret\n"
	EPILOGUE(clone_sites)

	/* bad_pop: leaves the frame with a pop, not an add. */
	PROLOGUE(bad_pop)
	"sub $0x10,%rsp\n"
	"call lf\n"
	"pop %rcx\n"
	"pop %rcx\n"
	"pop %rbp\n.cfi_def_cfa %rsp,8\n"
	"ret\n"
	EPILOGUE(bad_pop));

unsigned long ok_sub(unsigned long), ok_args(unsigned long), ok_same(unsigned long);
unsigned long ok_enter(unsigned long), ok_enter2(unsigned long), ok_above(unsigned long);
unsigned long bad_mixed(unsigned long), bad_shrink(unsigned long), bad_alloca(unsigned long);
unsigned long ok_nofp(unsigned long), bad_pop(unsigned long), bad_straddle(unsigned long);
unsigned long bad_retaddr(unsigned long), wrap_sites(unsigned long), clone_sites(unsigned long);

int main(void)
{
	unsigned long (*const cases[])(unsigned long) = {ok_sub,     ok_args,    ok_same,    ok_enter,
							 ok_enter2,  ok_above,   bad_mixed,  bad_shrink,
							 bad_alloca, ok_nofp,    bad_pop,    bad_straddle,
							 bad_retaddr, wrap_sites, clone_sites};
	unsigned long r = 0;
	for (unsigned i = 0; i < sizeof cases / sizeof *cases; i++)
		r ^= cases[i](r + i);
	printf("frames checksum=%016lx\n", r);
	return 0;
}
