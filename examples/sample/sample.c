/* A small kernel-style compile unit for the README's first command: the kinds of types
 * a kernel's DWARF holds (bitfields, anonymous unions, flexible arrays, function
 * pointers, 64-bit enums, per-CPU-like globals, an out-of-line function). */
#include <stdint.h>

typedef uint32_t u32;
typedef uint64_t u64;

struct list_head {
	struct list_head *next, *prev;
};

enum sample_state { SAMPLE_IDLE, SAMPLE_RUNNING = 4, SAMPLE_BIG = 0x100000000ULL };

struct sample_ops;

struct sample {
	struct list_head node;
	const char *name;
	u32 flags : 3, prio : 5, id : 24;
	union {
		u64 cookie;
		void *data;
	};
	enum sample_state state;
	const struct sample_ops *ops;
	volatile int refs;
	unsigned char payload[];
} __attribute__((aligned(8)));

struct sample_ops {
	int (*start)(struct sample *s, unsigned long flags);
	void (*stop)(struct sample *s);
	float weight;
};

struct sample_ops default_ops;
struct sample *current_sample;

__attribute__((noinline)) int sample_start(struct sample *s, unsigned long flags)
{
	s->flags = flags & 7;
	s->state = SAMPLE_RUNNING;
	return s->ops ? s->ops->start(s, flags) : 0;
}
