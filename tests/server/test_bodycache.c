/* test_bodycache.c - reused response bodies: reuse, best fit, the byte cap,
 * small bodies never kept, and concurrent use (run under TSan by
 * `make test-tsan`). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include "bodycache.h"

#define MIB (1u << 20)

static uint64_t kept(struct tiled_bodycache *c)
{
    struct tiled_bodycache_stats s;
    tiled_bodycache_stats(c, &s);
    return s.kept_bytes;
}

static void stats(struct tiled_bodycache *c, uint64_t *hits, uint64_t *misses)
{
    struct tiled_bodycache_stats s;
    tiled_bodycache_stats(c, &s);
    *hits = s.hits;
    *misses = s.misses;
}

static void a_returned_body_is_reused(void **state)
{
    (void)state;
    struct tiled_bodycache *c = tiled_bodycache_new(64 * MIB);
    uint64_t hits, misses;
    char *a = tiled_bodycache_get(c, 3 * MIB);
    assert_non_null(a);
    memset(a, 7, 3 * MIB); /* the whole size is writable */
    tiled_bodycache_put(a);
    assert_true(kept(c) >= 3 * MIB);
    char *b = tiled_bodycache_get(c, 3 * MIB - 100);
    assert_ptr_equal(a, b);
    stats(c, &hits, &misses);
    assert_int_equal(hits, 1);
    assert_int_equal(misses, 1);
    assert_int_equal(kept(c), 0);
    tiled_bodycache_put(b);
    tiled_bodycache_free(c);
}

static void small_bodies_are_never_kept(void **state)
{
    (void)state;
    struct tiled_bodycache *c = tiled_bodycache_new(64 * MIB);
    char *a = tiled_bodycache_get(c, TILED_BODYCACHE_MIN - 1);
    assert_non_null(a);
    memset(a, 1, TILED_BODYCACHE_MIN - 1);
    tiled_bodycache_put(a);
    assert_int_equal(kept(c), 0);
    tiled_bodycache_put(NULL);
    tiled_bodycache_free(c);
}

static void the_best_fitting_buffer_is_taken(void **state)
{
    (void)state;
    struct tiled_bodycache *c = tiled_bodycache_new(64 * MIB);
    char *big = tiled_bodycache_get(c, 6 * MIB), *small = tiled_bodycache_get(c, 1 * MIB);
    tiled_bodycache_put(small);
    tiled_bodycache_put(big);
    assert_ptr_equal(tiled_bodycache_get(c, 700u << 10), small); /* both fit: the smaller */
    char *fresh = tiled_bodycache_get(c, 100u << 10);             /* 6 MiB is far too big for it */
    assert_ptr_not_equal(fresh, big);
    assert_ptr_equal(tiled_bodycache_get(c, 5 * MIB), big);
    tiled_bodycache_put(fresh);
    tiled_bodycache_put(small);
    tiled_bodycache_put(big);
    tiled_bodycache_free(c);
}

static void the_cap_bounds_what_is_kept(void **state)
{
    (void)state;
    struct tiled_bodycache *c = tiled_bodycache_new(8 * MIB);
    char *b[3];
    for (int i = 0; i < 3; i++)
        b[i] = tiled_bodycache_get(c, 3 * MIB);
    for (int i = 0; i < 3; i++) {
        tiled_bodycache_put(b[i]);
        assert_true(kept(c) <= 8 * MIB);
    }
    /* the least recently returned went first: b[2] and b[1] are kept */
    assert_ptr_equal(tiled_bodycache_get(c, 3 * MIB), b[2]);
    assert_ptr_equal(tiled_bodycache_get(c, 3 * MIB), b[1]);
    char *over = tiled_bodycache_get(c, 9 * MIB); /* above the cap: never kept */
    assert_non_null(over);
    tiled_bodycache_put(over);
    assert_int_equal(kept(c), 0);
    tiled_bodycache_put(b[1]);
    tiled_bodycache_put(b[2]);
    tiled_bodycache_free(c);

    struct tiled_bodycache *off = tiled_bodycache_new(0);
    char *x = tiled_bodycache_get(off, 2 * MIB);
    assert_non_null(x);
    tiled_bodycache_put(x);
    assert_int_equal(kept(off), 0);
    tiled_bodycache_free(off);
}

static void oversized_requests_fail_cleanly(void **state)
{
    (void)state;
    struct tiled_bodycache *c = tiled_bodycache_new(64 * MIB);
    assert_null(tiled_bodycache_get(c, UINT64_MAX));
    assert_null(tiled_bodycache_get(c, UINT64_MAX - 32));
    tiled_bodycache_free(c);
}

struct worker_arg {
    struct tiled_bodycache *c;
    unsigned seed;
};

static void *churn(void *p)
{
    struct worker_arg *w = p;
    for (int i = 0; i < 200; i++) {
        uint64_t n = (uint64_t)((w->seed * 7919u + (unsigned)i * 104729u) % (4 * MIB)) + 1;
        unsigned char *b = tiled_bodycache_get(w->c, n);
        if (!b)
            return (void *)1;
        b[0] = b[n - 1] = (unsigned char)i; /* first and last byte are ours */
        if (b[0] != (unsigned char)i)
            return (void *)1;
        tiled_bodycache_put(b);
    }
    return NULL;
}

static void concurrent_use_is_safe(void **state)
{
    (void)state;
    struct tiled_bodycache *c = tiled_bodycache_new(16 * MIB);
    pthread_t t[4];
    struct worker_arg a[4];
    for (unsigned i = 0; i < 4; i++) {
        a[i] = (struct worker_arg){c, i + 1};
        assert_int_equal(pthread_create(&t[i], NULL, churn, &a[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        void *rv;
        pthread_join(t[i], &rv);
        assert_null(rv);
    }
    uint64_t hits, misses;
    stats(c, &hits, &misses);
    assert_true(hits > 0);
    assert_true(kept(c) <= 16 * MIB);
    tiled_bodycache_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_returned_body_is_reused),
        cmocka_unit_test(small_bodies_are_never_kept),
        cmocka_unit_test(the_best_fitting_buffer_is_taken),
        cmocka_unit_test(the_cap_bounds_what_is_kept),
        cmocka_unit_test(oversized_requests_fail_cleanly),
        cmocka_unit_test(concurrent_use_is_safe),
    };
    return cmocka_run_group_tests_name("bodycache", tests, NULL, NULL);
}
