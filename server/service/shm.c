/* shm.c - the shared-memory region registry and its SIGBUS guard (see shm.h).
 *
 * DESIGN. Why a signal handler rather than only checks: fstat at register
 * and at every use narrows the window, but the client can ftruncate its
 * object at any moment while the kernel writes into it, and the next store
 * past the new end raises SIGBUS on that thread. Copying through pread/
 * pwrite would avoid the signal but costs the copy this extension exists to
 * remove. So the handler contains it instead:
 *   - SIGBUS is synchronous: it is delivered to the faulting thread, in the
 *     middle of the load or store (a pool worker's or a transport's thread);
 *   - the handler looks the address up in a fixed table of mapped ranges
 *     (`slots`, read with atomics only: no lock, no allocation), and maps
 *     private anonymous memory over the rest of that range with MAP_FIXED
 *     (a raw syscall, safe in a handler on Linux). Returning restarts the
 *     access, which now succeeds; every other thread touching the range
 *     finds anonymous pages and never faults. Two threads faulting at once
 *     both remap; the second only zeroes pages nobody will read;
 *   - the slot is marked truncated: the request fails when it releases the
 *     view, and the mapping (now detached from the client's object) is
 *     refused until the client registers it again;
 *   - a range is in the table from before its first use until after its
 *     munmap, and it is only unmapped when no request holds it, so a fault
 *     inside a listed range is always a fault on a live mapping.
 * A fault outside every range is not ours: the handler restores the
 * previous disposition and returns, the access faults again and the
 * process gets what it would have got without us.
 */
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "metricsink.h"

/* ---- the SIGBUS guard ------------------------------------------------------ */

static struct sigbus_slot {
    atomic_uintptr_t begin, end; /* end == 0: not listed */
    atomic_bool truncated;
    bool used; /* taken by a region (under slots_lock) */
} slots[TILED_SHM_SLOTS];

static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction previous_bus;
static uintptr_t page_size;

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)ctx;
    int saved = errno;
    uintptr_t a = (uintptr_t)si->si_addr;
    for (size_t i = 0; i < TILED_SHM_SLOTS; i++) {
        uintptr_t b = atomic_load(&slots[i].begin), end = atomic_load(&slots[i].end);
        if (a < b || a >= end)
            continue;
        uintptr_t page = a & ~(page_size - 1);
        long p = syscall(SYS_mmap, page, end - page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                         -1, 0);
        if (p == -1)
            break; /* cannot contain it: let the fault take its course */
        atomic_store(&slots[i].truncated, true);
        errno = saved;
        return;
    }
    sigaction(SIGBUS, &previous_bus, NULL);
    errno = saved;
}

/* Installs the handler unless it is already the current one (a test
 * harness may have put its own in between); returns 0 or an errno. */
static int guard_install(void)
{
    static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;
    struct sigaction cur, sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_NODEFER};
    sigemptyset(&sa.sa_mask);
    int rc = 0;
    pthread_mutex_lock(&install_lock);
    page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    if (sigaction(SIGBUS, NULL, &cur) < 0 || ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigbus))
        rc = 0;
    else if (sigaction(SIGBUS, &sa, &previous_bus) < 0)
        rc = errno;
    pthread_mutex_unlock(&install_lock);
    return rc;
}

static int slot_take(uintptr_t begin, uintptr_t end)
{
    int found = -1;
    pthread_mutex_lock(&slots_lock);
    for (int i = 0; i < TILED_SHM_SLOTS && found < 0; i++) {
        if (!slots[i].used) {
            slots[i].used = true;
            atomic_store(&slots[i].truncated, false);
            atomic_store(&slots[i].begin, begin);
            atomic_store(&slots[i].end, end);
            found = i;
        }
    }
    pthread_mutex_unlock(&slots_lock);
    return found;
}

/* Unlisted before the munmap that follows, so the address can be reused. */
static void slot_clear(int i)
{
    atomic_store(&slots[i].end, 0);
    atomic_store(&slots[i].begin, 0);
}

static void slot_free(int i)
{
    pthread_mutex_lock(&slots_lock);
    slots[i].used = false;
    pthread_mutex_unlock(&slots_lock);
}

/* ---- regions ------------------------------------------------------------------ */

struct tiled_shm_region {
    atomic_int refs;
    struct tiled_shm *owner;
    char name[TILED_SHM_NAME_MAX + 1];
    char key[TILED_SHM_NAME_MAX + 2];
    uint64_t offset, byte_size; /* as registered */
    int fd;                     /* kept to re-check the size at each use */
    unsigned char *map;         /* page-aligned start of the mapping */
    size_t map_len;
    unsigned char *data;        /* map + (offset % page) */
    int slot;
};

struct tiled_shm {
    pthread_mutex_t lock;
    struct tiled_shm_limits lim;
    char prefix[TILED_SHM_NAME_MAX + 1];
    struct tiled_shm_region **regions; /* registered, lim.max_regions slots */
    atomic_uint_fast64_t nregions;
    atomic_uint_fast64_t mapped_bytes; /* every live mapping, held ones too */
};

static bool allowed_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
}

bool tiled_shm_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > TILED_SHM_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!allowed_char(name[i]))
            return false;
    }
    return true;
}

bool tiled_shm_key_valid(const char *key, const char *prefix)
{
    if (strlen(key) > TILED_SHM_NAME_MAX)
        return false;
    while (*key == '/')
        key++; /* shm_open skips them, as Python's client doubles one */
    if (!tiled_shm_name_valid(key) || strstr(key, ".."))
        return false;
    return !prefix || strncmp(key, prefix, strlen(prefix)) == 0;
}

struct tiled_shm *tiled_shm_new(const struct tiled_shm_limits *lim, struct tile_error *e)
{
    int err = guard_install();
    if (err)
        return tile_error_set(e, TILE_EIO, "cannot install the SIGBUS handler: %s", strerror(err)), NULL;
    const char *prefix = lim->key_prefix ? lim->key_prefix : "";
    if (lim->max_regions > TILED_SHM_SLOTS || strlen(prefix) > TILED_SHM_NAME_MAX)
        return tile_error_set(e, TILE_EINVAL, "shared-memory limits out of range"), NULL;
    struct tiled_shm *shm = calloc(1, sizeof(*shm));
    if (shm)
        shm->regions = calloc(lim->max_regions ? lim->max_regions : 1, sizeof(*shm->regions));
    if (!shm || !shm->regions) {
        free(shm);
        return tile_error_set(e, TILE_ENOMEM, "out of memory"), NULL;
    }
    pthread_mutex_init(&shm->lock, NULL);
    shm->lim = *lim;
    memcpy(shm->prefix, prefix, strlen(prefix) + 1);
    shm->lim.key_prefix = shm->prefix;
    return shm;
}

static void region_destroy(struct tiled_shm_region *r)
{
    slot_clear(r->slot);
    munmap(r->map, r->map_len);
    slot_free(r->slot);
    close(r->fd);
    atomic_fetch_sub(&r->owner->mapped_bytes, r->map_len);
    free(r);
}

static void region_put(struct tiled_shm_region *r)
{
    if (atomic_fetch_sub(&r->refs, 1) == 1)
        region_destroy(r);
}

/* Index of `name` in the table, or -1 (caller holds the lock). */
static int find(const struct tiled_shm *shm, const char *name)
{
    for (uint64_t i = 0; i < shm->lim.max_regions; i++) {
        if (shm->regions[i] && strcmp(shm->regions[i]->name, name) == 0)
            return (int)i;
    }
    return -1;
}

/* Opens and checks the object; the fd on success, -1 with `e`. */
static int open_object(const char *name, const char *key, uint64_t offset, uint64_t byte_size,
                       struct tile_error *e)
{
    int fd = shm_open(key, O_RDWR, 0);
    if (fd < 0)
        return tile_error_set(e, TILE_EINVAL, "unable to open shared memory object '%s' for region '%s': %s", key,
                              name, strerror(errno));
    struct stat st;
    const char *why = NULL;
    if (fstat(fd, &st) < 0)
        why = "cannot be examined";
    else if (!S_ISREG(st.st_mode))
        why = "is not a regular shared-memory object";
    else if (offset > (uint64_t)st.st_size || byte_size > (uint64_t)st.st_size - offset)
        why = "is smaller than offset + byte_size";
    if (why) {
        close(fd);
        return tile_error_set(e, TILE_EINVAL,
                              "cannot register shared memory region '%s': object '%s' %s (offset %llu, byte_size %llu, "
                              "object %lld bytes)",
                              name, key, why, (unsigned long long)offset, (unsigned long long)byte_size,
                              (long long)st.st_size);
    }
    return fd;
}

static struct tiled_shm_region *region_map(struct tiled_shm *shm, const char *name, const char *key, uint64_t offset,
                                           uint64_t byte_size, struct tile_error *e)
{
    uint64_t delta = offset % page_size;
    size_t map_len = (size_t)(delta + byte_size);
    if (atomic_load(&shm->mapped_bytes) + map_len > shm->lim.max_bytes)
        return tile_error_set(e, TILE_ETOOBIG,
                              "cannot register shared memory region '%s': %llu more bytes would exceed the cap of %llu "
                              "mapped bytes (--shm-max-bytes)",
                              name, (unsigned long long)byte_size, (unsigned long long)shm->lim.max_bytes),
               NULL;
    int fd = open_object(name, key, offset, byte_size, e);
    if (fd < 0)
        return NULL;
    struct tiled_shm_region *r = calloc(1, sizeof(*r));
    void *map = r ? mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)(offset - delta)) : MAP_FAILED;
    if (map == MAP_FAILED) {
        tile_error_set(e, r ? TILE_EIO : TILE_ENOMEM, "cannot map shared memory region '%s': %s", name,
                       r ? strerror(errno) : "out of memory");
        free(r);
        close(fd);
        return NULL;
    }
    uintptr_t end = ((uintptr_t)map + map_len + page_size - 1) & ~(page_size - 1);
    r->slot = slot_take((uintptr_t)map, end);
    if (r->slot < 0) {
        munmap(map, map_len);
        close(fd);
        free(r);
        return tile_error_set(e, TILE_ETOOBIG, "cannot register shared memory region '%s': too many mapped regions",
                              name),
               NULL;
    }
    atomic_init(&r->refs, 1);
    r->owner = shm;
    snprintf(r->name, sizeof(r->name), "%s", name);
    snprintf(r->key, sizeof(r->key), "%s", key);
    r->offset = offset;
    r->byte_size = byte_size;
    r->fd = fd;
    r->map = map;
    r->map_len = map_len;
    r->data = (unsigned char *)map + delta;
    atomic_fetch_add(&shm->mapped_bytes, map_len);
    return r;
}

int tiled_shm_register(struct tiled_shm *shm, const char *name, const char *key, uint64_t offset,
                       uint64_t byte_size, struct tile_error *e)
{
    if (!tiled_shm_name_valid(name))
        return tile_error_set(e, TILE_EINVAL,
                              "invalid shared memory region name '%.64s' (1 to 255 of A-Z a-z 0-9 . _ -)", name);
    if (!tiled_shm_key_valid(key, shm->prefix))
        return tile_error_set(e, TILE_EINVAL,
                              "cannot register shared memory region '%s': invalid key '%.64s' (leading '/', then 1 to 255 "
                              "of A-Z a-z 0-9 . _ - without '..'%s%s%s)",
                              name, key, shm->prefix[0] ? ", starting with '" : "", shm->prefix,
                              shm->prefix[0] ? "'" : "");
    if (byte_size == 0 || byte_size > SIZE_MAX / 2 || offset > INT64_MAX - byte_size)
        return tile_error_set(e, TILE_EINVAL, "cannot register shared memory region '%s': invalid offset %llu or "
                              "byte_size %llu", name, (unsigned long long)offset, (unsigned long long)byte_size);
    pthread_mutex_lock(&shm->lock);
    int rc = -1;
    if (find(shm, name) >= 0) {
        tile_error_set(e, TILE_EINVAL, "shared memory region '%s' is already registered (unregister it first)", name);
    } else if (atomic_load(&shm->nregions) >= shm->lim.max_regions) {
        tile_error_set(e, TILE_ETOOBIG,
                       "cannot register shared memory region '%s': the cap of %llu regions is reached "
                       "(--shm-max-regions)",
                       name, (unsigned long long)shm->lim.max_regions);
    } else {
        struct tiled_shm_region *r = region_map(shm, name, key, offset, byte_size, e);
        for (uint64_t i = 0; r && i < shm->lim.max_regions; i++) {
            if (!shm->regions[i]) {
                shm->regions[i] = r;
                atomic_fetch_add(&shm->nregions, 1);
                rc = 0;
                break;
            }
        }
    }
    pthread_mutex_unlock(&shm->lock);
    return rc;
}

int tiled_shm_unregister(struct tiled_shm *shm, const char *name)
{
    struct tiled_shm_region *gone[TILED_SHM_SLOTS];
    int n = 0;
    pthread_mutex_lock(&shm->lock);
    for (uint64_t i = 0; i < shm->lim.max_regions; i++) {
        struct tiled_shm_region *r = shm->regions[i];
        if (r && (!name || strcmp(r->name, name) == 0)) {
            gone[n++] = r;
            shm->regions[i] = NULL;
        }
    }
    atomic_fetch_sub(&shm->nregions, (uint64_t)n);
    pthread_mutex_unlock(&shm->lock);
    for (int i = 0; i < n; i++)
        region_put(gone[i]); /* a request holding it unmaps it later */
    return n;
}

void tiled_shm_free(struct tiled_shm *shm)
{
    if (!shm)
        return;
    tiled_shm_unregister(shm, NULL);
    pthread_mutex_destroy(&shm->lock);
    free(shm->regions);
    free(shm);
}

int tiled_shm_status(struct tiled_shm *shm, const char *name, tiled_shm_each_fn fn, void *ctx, struct tile_error *e)
{
    pthread_mutex_lock(&shm->lock);
    bool found = !name || find(shm, name) >= 0;
    for (uint64_t i = 0; found && i < shm->lim.max_regions; i++) {
        const struct tiled_shm_region *r = shm->regions[i];
        if (!r || (name && strcmp(r->name, name) != 0))
            continue;
        const struct tiled_shm_info info = {.name = r->name, .key = r->key, .offset = r->offset,
                                            .byte_size = r->byte_size};
        fn(ctx, &info);
    }
    pthread_mutex_unlock(&shm->lock);
    if (!found)
        return tile_error_set(e, TILE_EINVAL, "no system shared memory region named '%s' is registered", name);
    return 0;
}

static int check_range(const struct tiled_shm_region *r, uint64_t offset, uint64_t byte_size, const char *what,
                       struct tile_error *e)
{
    if (atomic_load(&slots[r->slot].truncated))
        return tile_error_set(e, TILE_EINVAL,
                              "shared memory region '%s' was truncated by its owner while in use; register it again",
                              r->name);
    if (offset > r->byte_size || byte_size > r->byte_size - offset)
        return tile_error_set(e, TILE_EINVAL,
                              "%s: shared_memory_offset %llu + shared_memory_byte_size %llu run past the end of shared "
                              "memory region '%s' (%llu bytes)",
                              what, (unsigned long long)offset, (unsigned long long)byte_size, r->name,
                              (unsigned long long)r->byte_size);
    struct stat st;
    if (fstat(r->fd, &st) < 0 || (uint64_t)st.st_size < r->offset + offset + byte_size)
        return tile_error_set(e, TILE_EINVAL,
                              "%s: shared memory region '%s' has shrunk below the range used (object now %lld bytes)",
                              what, r->name, (long long)st.st_size);
    return 0;
}

int tiled_shm_acquire(struct tiled_shm *shm, const char *name, uint64_t offset, uint64_t byte_size,
                      const char *what, struct tiled_shm_view *v, struct tile_error *e)
{
    memset(v, 0, sizeof(*v));
    pthread_mutex_lock(&shm->lock);
    int i = find(shm, name);
    struct tiled_shm_region *r = i >= 0 ? shm->regions[i] : NULL;
    if (r)
        atomic_fetch_add(&r->refs, 1);
    pthread_mutex_unlock(&shm->lock);
    if (!r)
        return tile_error_set(e, TILE_EINVAL, "%s: no system shared memory region named '%.64s' is registered", what,
                              name);
    if (check_range(r, offset, byte_size, what, e) < 0) {
        region_put(r);
        return -1;
    }
    v->region = r;
    v->data = r->data + offset;
    v->len = byte_size;
    return 0;
}

int tiled_shm_release(struct tiled_shm_view *v, struct tile_error *e)
{
    struct tiled_shm_region *r = v->region;
    if (!r)
        return 0;
    int rc = 0;
    if (atomic_load(&slots[r->slot].truncated))
        rc = tile_error_set(e, TILE_EINVAL,
                            "shared memory region '%s' was truncated by its owner while this request used it", r->name);
    v->region = NULL;
    region_put(r);
    return rc;
}

void tiled_shm_stats(struct tiled_shm *shm, uint64_t *regions, uint64_t *mapped_bytes)
{
    *regions = shm ? atomic_load(&shm->nregions) : 0;
    *mapped_bytes = shm ? atomic_load(&shm->mapped_bytes) : 0;
}

void tiled_shm_metrics(struct tiled_metrics_out *o, void *registry)
{
    struct tiled_shm *shm = registry;
    uint64_t regions, bytes;
    tiled_shm_stats(shm, &regions, &bytes);
    tiled_metrics_family(o, "tiled_shm_regions", "gauge", "System shared-memory regions registered.");
    tiled_metrics_sample(o, "tiled_shm_regions", regions);
    tiled_metrics_family(o, "tiled_shm_mapped_bytes", "gauge",
                         "Bytes of shared memory mapped, including regions unregistered but still used by a request.");
    tiled_metrics_sample(o, "tiled_shm_mapped_bytes", bytes);
    tiled_metrics_family(o, "tiled_shm_max_bytes", "gauge",
                         "Bytes of shared memory the daemon maps at most (--shm-max-bytes).");
    tiled_metrics_sample(o, "tiled_shm_max_bytes", shm->lim.max_bytes);
    tiled_metrics_family(o, "tiled_shm_max_regions", "gauge",
                         "Shared-memory regions registered at most (--shm-max-regions).");
    tiled_metrics_sample(o, "tiled_shm_max_regions", shm->lim.max_regions);
}
