/* Every BTF kind clang 14 emits, for dump tests: clang -target bpf -g -O2 -c. */
#define __tag(x) __attribute__((btf_decl_tag(x)))
#define __ttag(x) __attribute__((btf_type_tag(x)))

typedef unsigned long long u64;
struct fwd_only;
union fwd_union;
enum small { S_A = -3, S_B = 7 };
enum big { B_A = 0xffffffffffULL, B_B = 1 };
enum sbig { SB_A = -0x100000000LL, SB_B = 2 };
struct bits {
	int a : 3;
	unsigned int b : 13;
	char c;
	volatile long v;
	const char *restrict s;
	int arr[4][2];
	float f;
	double d;
	_Bool ok;
	struct fwd_only *fp;
	union fwd_union *up;
	int __ttag("user") *tp;
	struct { int x; } anon;
	union { int i; unsigned u; };
	int __tag("member_tag") tagged;
	u64 total;
};
struct bits global_bits __tag("var_tag");
static volatile int counter;
const enum small small_const = S_B;
enum big big_var;
enum sbig sbig_var;
extern int ext_var;
extern int ext_func(int x, ...);
unsigned __int128 wide;
long double ld;

__attribute__((noinline)) int __tag("func_tag") helper(struct bits *b, int __tag("param_tag") n)
{
	return b->a + n + counter + ext_var;
}

int entry(void *ctx)
{
	return helper(&global_bits, small_const) + ext_func(1, 2) + (int)big_var + (int)sbig_var + (int)wide + (int)sizeof(ld);
}
