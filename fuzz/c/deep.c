/* Seed: long typedef / pointer / array chains and a large array. */
typedef int t0; typedef t0 t1; typedef t1 t2; typedef t2 t3; typedef t3 t4;
typedef t4 *p5; typedef p5 *p6; typedef const p6 c7; typedef volatile c7 v8;
typedef v8 a9[3][4][5]; typedef a9 *p10;
struct big { char huge[1UL << 30]; p10 p; };
struct big *gb;
long n(struct big *b) { return sizeof(*b) + (long)b->p; }
