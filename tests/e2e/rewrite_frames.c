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

	/* bad_above: reads its saved %rbp through %rsp (above the frame). */
	PROLOGUE(bad_above)
	"sub $0x10,%rsp\n"
	"mov 0x10(%rsp),%rax\n"
	"call lf\n"
	"leave\n.cfi_def_cfa %rsp,8\n"
	"ret\n"
	EPILOGUE(bad_above)

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

	/* bad_nofp: no frame pointer; the CFA is rsp-based inside the frame. */
	".globl bad_nofp\n.type bad_nofp,@function\nbad_nofp:\n.cfi_startproc\n"
	"sub $0x18,%rsp\n.cfi_def_cfa_offset 32\n"
	"call lf\n"
	"add $0x18,%rsp\n.cfi_def_cfa_offset 8\n"
	"ret\n"
	EPILOGUE(bad_nofp)

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
unsigned long ok_enter(unsigned long), ok_enter2(unsigned long), bad_above(unsigned long);
unsigned long bad_mixed(unsigned long), bad_shrink(unsigned long), bad_alloca(unsigned long);
unsigned long bad_nofp(unsigned long), bad_pop(unsigned long);

int main(void)
{
	unsigned long (*const cases[])(unsigned long) = {ok_sub,     ok_args,    ok_same,    ok_enter,
							 ok_enter2,  bad_above,  bad_mixed,  bad_shrink,
							 bad_alloca, bad_nofp,   bad_pop};
	unsigned long r = 0;
	for (unsigned i = 0; i < sizeof cases / sizeof *cases; i++)
		r ^= cases[i](r + i);
	printf("frames checksum=%016lx\n", r);
	return 0;
}
