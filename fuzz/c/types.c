/* Seed for the ELF/DWARF fuzz targets: a little of every kind of type. */
#include <stddef.h>
typedef unsigned long long u64;
struct list { struct list *next, *prev; };
enum e32 { A = -1, B = 5 };
enum e64 { BIG = 0x1ffffffffULL };
struct __attribute__((packed)) packed { char c; int i; u64 x : 33; unsigned y : 3; };
union u { int i; float f; double d; struct { short lo, hi; }; };
struct flex { int n; const volatile char *restrict names[2][3]; long tail[]; };
typedef int (*handler)(struct flex *, enum e32, ...);
struct ops { handler h; void (*done)(void); _Bool on; __int128 wide; _Atomic int at; };
struct fwd;
struct holder { struct fwd *f; struct ops ops[4]; union u un; enum e64 big; struct packed p; struct list l; };
struct holder g_holder;
int use(struct holder *h, struct flex *f) { return h->ops[0].h(f, A) + (int)sizeof(*h); }
