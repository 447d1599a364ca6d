/* test_shm.c - the shared-memory registry: keys, bounds, caps, status,
 * reference counts, and a client truncating its object while the kernel
 * (on the calling thread and on the pool's workers) writes into it.
 *
 * Objects are created under /dev/shm with the test's pid in their names and
 * unlinked at the end of each test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm.h"
#include "tile.h"

#define MIB (UINT64_C(1) << 20)

static char key_a[64], key_b[64];

/* Creates (or resizes) object `key` with `size` bytes, each byte = seed + i. */
static int make_object(const char *key, uint64_t size, unsigned char seed)
{
    int fd = shm_open(key, O_RDWR | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    unsigned char *p = size ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : NULL;
    for (uint64_t i = 0; i < size; i++)
        p[i] = (unsigned char)(seed + i);
    if (p)
        munmap(p, size);
    return fd;
}

static struct tiled_shm *registry(uint64_t max_regions, uint64_t max_bytes, const char *prefix)
{
    struct tiled_shm_limits lim = {.max_regions = max_regions, .max_bytes = max_bytes, .key_prefix = prefix};
    struct tile_error e = {0};
    struct tiled_shm *shm = tiled_shm_new(&lim, &e);
    assert_non_null(shm);
    return shm;
}

static int setup(void **state)
{
    (void)state;
    snprintf(key_a, sizeof(key_a), "/tiled-test-a-%d", (int)getpid());
    snprintf(key_b, sizeof(key_b), "/tiled-test-b-%d", (int)getpid());
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    shm_unlink(key_a);
    shm_unlink(key_b);
    return 0;
}

static void expect_register_error(struct tiled_shm *shm, const char *name, const char *key, uint64_t offset,
                                  uint64_t size, enum tile_errcode code, const char *needle)
{
    struct tile_error e = {0};
    assert_int_equal(tiled_shm_register(shm, name, key, offset, size, &e), -1);
    assert_int_equal(e.code, code);
    if (!strstr(e.text, needle))
        fail_msg("'%s' does not mention '%s'", e.text, needle);
}

static void test_keys(void **state)
{
    (void)state;
    assert_true(tiled_shm_key_valid("/input_simple", NULL));
    assert_true(tiled_shm_key_valid("//input_simple", NULL)); /* what Python's client passes */
    assert_true(tiled_shm_key_valid("a.b-c_d", NULL));
    assert_true(tiled_shm_key_valid("/tiled-x", "tiled-"));
    assert_false(tiled_shm_key_valid("/other", "tiled-"));
    assert_false(tiled_shm_key_valid("", NULL));
    assert_false(tiled_shm_key_valid("///", NULL));
    assert_false(tiled_shm_key_valid("/a/b", NULL));
    assert_false(tiled_shm_key_valid("/../etc/passwd", NULL));
    assert_false(tiled_shm_key_valid("..", NULL));
    assert_false(tiled_shm_key_valid("/x..y", NULL));
    assert_false(tiled_shm_key_valid("/sp ace", NULL));
    assert_false(tiled_shm_key_valid("/quo\"te", NULL));
    char long_key[300];
    memset(long_key, 'k', sizeof(long_key) - 1);
    long_key[sizeof(long_key) - 1] = '\0';
    assert_false(tiled_shm_key_valid(long_key, NULL));
    assert_false(tiled_shm_name_valid("a/b"));
    assert_false(tiled_shm_name_valid(""));
    assert_true(tiled_shm_name_valid("output_data"));

    struct tiled_shm *shm = registry(4, 64 * MIB, NULL);
    expect_register_error(shm, "r", "/a/b", 0, 16, TILE_EINVAL, "invalid key");
    expect_register_error(shm, "r", "/..", 0, 16, TILE_EINVAL, "invalid key");
    expect_register_error(shm, "bad/name", key_a, 0, 16, TILE_EINVAL, "invalid shared memory region name");
    expect_register_error(shm, "r", "/tiled-no-such-object", 0, 16, TILE_EINVAL, "unable to open");
    tiled_shm_free(shm);
}

/* Appends a region as Triton's status JSON lists it. */
static void append_region(void *ctx, const struct tiled_shm_info *r)
{
    char *text = ctx;
    size_t n = strlen(text);
    snprintf(text + n, 1024 - n, "%s{\"name\":\"%s\",\"key\":\"%s\",\"offset\":%llu,\"byte_size\":%llu}",
             n > 1 ? "," : "", r->name, r->key, (unsigned long long)r->offset, (unsigned long long)r->byte_size);
}

/* The status listing as JSON text (malloc'd), NULL with `e` when `name`
 * is not registered. */
static char *status_text(struct tiled_shm *shm, const char *name, struct tile_error *e)
{
    char *text = calloc(1024, 1);
    assert_non_null(text);
    text[0] = '[';
    if (tiled_shm_status(shm, name, append_region, text, e) < 0) {
        free(text);
        return NULL;
    }
    strcat(text, "]");
    return text;
}

static void test_register_status_unregister(void **state)
{
    (void)state;
    int fd = make_object(key_a, 8192, 7);
    struct tiled_shm *shm = registry(4, 64 * MIB, NULL);
    struct tile_error e = {0};
    assert_int_equal(tiled_shm_register(shm, "in", key_a, 100, 200, &e), 0); /* unaligned offset */
    char *s = status_text(shm, NULL, &e);
    char want[256];
    snprintf(want, sizeof(want), "[{\"name\":\"in\",\"key\":\"%s\",\"offset\":100,\"byte_size\":200}]", key_a);
    assert_string_equal(s, want);
    free(s);
    s = status_text(shm, "in", &e);
    assert_string_equal(s, want);
    free(s);
    assert_null(status_text(shm, "nope", &e));
    assert_int_equal(e.code, TILE_EINVAL);

    struct tiled_shm_view v;
    assert_int_equal(tiled_shm_acquire(shm, "in", 10, 20, "input 'x'", &v, &e), 0);
    assert_int_equal(v.len, 20);
    for (int i = 0; i < 20; i++) /* object byte 110 + i */
        assert_int_equal(v.data[i], (unsigned char)(7 + 110 + i));
    v.data[0] = 0xAB; /* written through to the object */
    assert_int_equal(tiled_shm_release(&v, &e), 0);
    unsigned char b;
    assert_int_equal(pread(fd, &b, 1, 110), 1);
    assert_int_equal(b, 0xAB);

    uint64_t n, bytes;
    tiled_shm_stats(shm, &n, &bytes);
    assert_int_equal(n, 1);
    assert_true(bytes >= 200);
    expect_register_error(shm, "in", key_a, 0, 16, TILE_EINVAL, "already registered");
    assert_int_equal(tiled_shm_unregister(shm, "in"), 1);
    assert_int_equal(tiled_shm_unregister(shm, "in"), 0); /* unknown: not an error */
    tiled_shm_stats(shm, &n, &bytes);
    assert_int_equal(n, 0);
    assert_int_equal(bytes, 0);
    s = status_text(shm, NULL, &e);
    assert_string_equal(s, "[]");
    free(s);
    tiled_shm_free(shm);
    close(fd);
}

static void test_bounds(void **state)
{
    (void)state;
    int fd = make_object(key_a, 4096, 0);
    struct tiled_shm *shm = registry(4, 64 * MIB, NULL);
    expect_register_error(shm, "r", key_a, 0, 4097, TILE_EINVAL, "smaller than offset + byte_size");
    expect_register_error(shm, "r", key_a, 4000, 97, TILE_EINVAL, "smaller than offset + byte_size");
    expect_register_error(shm, "r", key_a, UINT64_MAX - 4, 16, TILE_EINVAL, "invalid offset");
    expect_register_error(shm, "r", key_a, 16, UINT64_MAX, TILE_EINVAL, "invalid offset");
    expect_register_error(shm, "r", key_a, 0, 0, TILE_EINVAL, "invalid offset");

    struct tile_error e = {0};
    struct tiled_shm_view v;
    assert_int_equal(tiled_shm_register(shm, "r", key_a, 0, 4096, &e), 0);
    assert_int_equal(tiled_shm_acquire(shm, "r", 4096, 0, "output", &v, &e), 0); /* empty tensor at the end */
    tiled_shm_release(&v, &e);
    const uint64_t bad[][2] = {{4096, 1}, {1, 4096}, {UINT64_MAX, 1}, {1, UINT64_MAX}, {4097, 0}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tile_error_clear(&e);
        assert_int_equal(tiled_shm_acquire(shm, "r", bad[i][0], bad[i][1], "output 'o'", &v, &e), -1);
        assert_non_null(strstr(e.text, "run past the end"));
        assert_null(v.region);
    }
    tile_error_clear(&e);
    assert_int_equal(tiled_shm_acquire(shm, "nope", 0, 1, "input 'i'", &v, &e), -1);
    assert_non_null(strstr(e.text, "no system shared memory region named 'nope'"));
    /* Shrunk below the range before use: refused by the size check, no fault. */
    assert_int_equal(ftruncate(fd, 1000), 0);
    tile_error_clear(&e);
    assert_int_equal(tiled_shm_acquire(shm, "r", 0, 2000, "output 'o'", &v, &e), -1);
    assert_non_null(strstr(e.text, "has shrunk"));
    assert_int_equal(tiled_shm_acquire(shm, "r", 0, 1000, "output 'o'", &v, &e), 0);
    tiled_shm_release(&v, &e);
    tiled_shm_free(shm);
    close(fd);
}

static void test_caps(void **state)
{
    (void)state;
    int fa = make_object(key_a, 3 * MIB, 0), fb = make_object(key_b, 4096, 0);
    struct tiled_shm *shm = registry(2, 2 * MIB, NULL);
    struct tile_error e = {0};
    expect_register_error(shm, "big", key_a, 0, 3 * MIB, TILE_ETOOBIG, "mapped bytes");
    assert_int_equal(tiled_shm_register(shm, "one", key_a, 0, MIB, &e), 0);
    assert_int_equal(tiled_shm_register(shm, "two", key_b, 0, 4096, &e), 0);
    expect_register_error(shm, "three", key_b, 0, 4096, TILE_ETOOBIG, "regions");
    assert_int_equal(tiled_shm_unregister(shm, NULL), 2);
    tiled_shm_free(shm);

    shm = registry(2, 2 * MIB, "tiled-test-a");
    expect_register_error(shm, "b", key_b, 0, 4096, TILE_EINVAL, "starting with 'tiled-test-a'");
    assert_int_equal(tiled_shm_register(shm, "a", key_a, 0, 4096, &e), 0);
    tiled_shm_free(shm);
    close(fa);
    close(fb);
}

/* Unregistered and replaced while held: the held view keeps its mapping. */
static void test_held_region_outlives_unregister(void **state)
{
    (void)state;
    int fa = make_object(key_a, 4096, 1), fb = make_object(key_b, 4096, 2);
    struct tiled_shm *shm = registry(4, 64 * MIB, NULL);
    struct tile_error e = {0};
    struct tiled_shm_view v, w;
    assert_int_equal(tiled_shm_register(shm, "r", key_a, 0, 4096, &e), 0);
    assert_int_equal(tiled_shm_acquire(shm, "r", 0, 4096, "input", &v, &e), 0);
    assert_int_equal(tiled_shm_unregister(shm, "r"), 1);
    assert_int_equal(tiled_shm_register(shm, "r", key_b, 0, 4096, &e), 0); /* replaced */
    uint64_t n, bytes;
    tiled_shm_stats(shm, &n, &bytes);
    assert_int_equal(n, 1);
    assert_int_equal(bytes, 8192); /* the old mapping is still live */
    memset(v.data, 0x5A, 4096);    /* no fault: still mapped */
    assert_int_equal(tiled_shm_acquire(shm, "r", 0, 1, "input", &w, &e), 0);
    assert_int_equal(w.data[0], 2); /* the new object */
    assert_int_equal(tiled_shm_release(&v, &e), 0);
    assert_int_equal(tiled_shm_release(&w, &e), 0);
    tiled_shm_stats(shm, &n, &bytes);
    assert_int_equal(bytes, 4096);
    unsigned char b;
    assert_int_equal(pread(fa, &b, 1, 4095), 1);
    assert_int_equal(b, 0x5A);
    tiled_shm_free(shm);
    close(fa);
    close(fb);
}

/* The client truncates its object to 0 while a view is held: the writes
 * that follow fault, are contained, and the release reports it. */
static void test_truncated_mid_write(void **state)
{
    (void)state;
    int fd = make_object(key_a, 2 * MIB, 0);
    struct tiled_shm *shm = registry(4, 64 * MIB, NULL);
    struct tile_error e = {0};
    struct tiled_shm_view v;
    assert_int_equal(tiled_shm_register(shm, "out", key_a, 0, 2 * MIB, &e), 0);
    assert_int_equal(tiled_shm_acquire(shm, "out", 0, 2 * MIB, "output 'output'", &v, &e), 0);
    memset(v.data, 1, MIB); /* the first half is written before the cut */
    assert_int_equal(ftruncate(fd, 0), 0);
    memset(v.data, 2, 2 * MIB); /* would be SIGBUS */
    assert_int_equal(v.data[2 * MIB - 1], 2);
    assert_int_equal(tiled_shm_release(&v, &e), -1);
    assert_non_null(strstr(e.text, "truncated"));
    tile_error_clear(&e);
    assert_int_equal(ftruncate(fd, 2 * MIB), 0); /* even grown back, the mapping is detached */
    assert_int_equal(tiled_shm_acquire(shm, "out", 0, 16, "output 'output'", &v, &e), -1);
    assert_non_null(strstr(e.text, "register it again"));
    assert_int_equal(tiled_shm_unregister(shm, "out"), 1);
    tile_error_clear(&e);
    assert_int_equal(tiled_shm_register(shm, "out", key_a, 0, 2 * MIB, &e), 0);
    assert_int_equal(tiled_shm_acquire(shm, "out", 0, 16, "output 'output'", &v, &e), 0);
    assert_int_equal(tiled_shm_release(&v, &e), 0);
    tiled_shm_free(shm);
    close(fd);
}

/* The same with the pool's workers doing the writing: a tile of a float32
 * [1024,1024] x [4,2] output (32 MiB, split across threads) into a region
 * cut to 0 before the kernel starts and a read of a cut input region. */
static void test_truncated_under_pool(void **state)
{
    (void)state;
    const uint64_t out_bytes = UINT64_C(1024) * 4 * 1024 * 2 * 4, in_bytes = 1024 * 1024 * 4;
    int fo = make_object(key_a, out_bytes, 0), fi = make_object(key_b, in_bytes, 0);
    struct tiled_shm *shm = registry(4, 256 * MIB, NULL);
    struct tile_error e = {0};
    struct tile_pool *pool = tile_pool_init(2, 8, &e);
    assert_non_null(pool);
    assert_int_equal(tiled_shm_register(shm, "out", key_a, 0, out_bytes, &e), 0);
    assert_int_equal(tiled_shm_register(shm, "in", key_b, 0, in_bytes, &e), 0);
    struct tiled_shm_view out, in;
    assert_int_equal(tiled_shm_acquire(shm, "out", 0, out_bytes, "output 'output'", &out, &e), 0);
    assert_int_equal(tiled_shm_acquire(shm, "in", 0, in_bytes, "input 'input'", &in, &e), 0);
    int64_t shape[2] = {1024, 1024}, repeats[2] = {4, 2};
    struct tile_spec spec = {.semantics = TILE_SEM_ONNX, .repeats = repeats, .nrepeats = 2};
    struct tile_plan plan;
    assert_int_equal(tile_plan_init(&plan, TILE_FLOAT32, 2, shape, &spec, &e), 0);
    assert_int_equal(plan.out_bytes, out_bytes);
    assert_int_equal(ftruncate(fo, 0), 0);
    assert_int_equal(ftruncate(fi, 0), 0);
    tile_execute(&plan, in.data, out.data, pool);
    float first;
    memcpy(&first, out.data, sizeof(first));
    assert_true(first == 0.0f); /* the input reads as zeros once cut */
    assert_int_equal(tiled_shm_release(&out, &e), -1);
    tile_error_clear(&e);
    assert_int_equal(tiled_shm_release(&in, &e), -1);
    tiled_shm_free(shm);
    tile_pool_free(pool);
    close(fo);
    close(fi);
}

/* A fault outside every region still kills: the guard passes it on. */
static void test_foreign_fault_not_swallowed(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGBUS, SIG_DFL); /* what the daemon starts with */
        struct tiled_shm *shm = registry(1, MIB, NULL);
        (void)shm;
        int fd = make_object(key_b, 4096, 0);
        unsigned char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (ftruncate(fd, 0) == 0)
            p[0] = 1; /* not a registered region */
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGBUS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_status_unregister, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_caps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_held_region_outlives_unregister, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_mid_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_under_pool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_fault_not_swallowed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
