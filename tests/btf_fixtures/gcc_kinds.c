/* BTF as gcc writes it (gcc -gbtf -c): CHAR and "UNKN" INT encodings, a signed
 * enum value, bitfields, a vararg prototype, FUNCs and VARs, DATASECs. */
#include <stdio.h>

typedef unsigned long long u64;
struct point {
	int x, y;
	unsigned flags : 3;
	unsigned kind : 5;
	u64 big;
};
enum color { RED, GREEN = 5, BLUE = -1 };
typedef struct point point_t;
static const char *names[3] = { "a", "b", "c" };
int counter;
float ratio = 1.5f;
union u {
	long l;
	double d;
	unsigned char bytes[8];
	signed char sc;
};

int area(const point_t *p, enum color c, union u *v)
{
	return p->x * p->y + c + (int)v->l + counter;
}

int main(void)
{
	point_t p = { 2, 3, 1, 4, 5 };
	union u v = { 0 };
	printf("%d %s\n", area(&p, GREEN, &v), names[0]);
	return 0;
}
