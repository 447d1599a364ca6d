/* auth.c - API keys: Authorization: Bearer KEY against --api-key-file.
 *
 * DESIGN. Keys are loaded into one immutable set; SIGHUP builds a new set
 * and swaps it under a read-write lock, so checks never see a half-read
 * file and a failed reload keeps the old keys. A presented key is compared
 * with every configured key over the full length of both, so the time
 * taken does not reveal how much of a key matched, nor which key. Keys are
 * never logged.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth.h"

#include "log.h"

#define TILED_MAX_KEYS 1024
#define TILED_KEY_MAX 512

struct tiled_keys {
    int n;
    char *key[TILED_MAX_KEYS];
    size_t len[TILED_MAX_KEYS];
};

static pthread_rwlock_t keys_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct tiled_keys *keys;
/* Whether keys is set, for the question every request asks without a key
 * to check (tiled_auth_enabled): two lock operations were a percent of a
 * small request. Written under the write lock. */
static atomic_bool keys_on;

static void keys_free(struct tiled_keys *k)
{
    if (!k)
        return;
    for (int i = 0; i < k->n; i++) {
        memset(k->key[i], 0, k->len[i]);
        free(k->key[i]);
    }
    free(k);
}

static struct tiled_keys *keys_read(const char *path, struct tile_error *e)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        tile_error_set(e, TILE_EIO, "--api-key-file %s: %s", path, strerror(errno));
        return NULL;
    }
    struct tiled_keys *k = calloc(1, sizeof(*k));
    char line[TILED_KEY_MAX + 2];
    while (k && fgets(line, sizeof(line), f)) {
        size_t n = strcspn(line, "\r\n");
        line[n] = '\0';
        char *s = line + strspn(line, " \t");
        n = strlen(s);
        while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
            s[--n] = '\0';
        if (n == 0 || s[0] == '#' || k->n == TILED_MAX_KEYS)
            continue;
        k->key[k->n] = strdup(s);
        k->len[k->n] = n;
        if (k->key[k->n])
            k->n++;
    }
    memset(line, 0, sizeof(line));
    fclose(f);
    if (k && k->n == 0) {
        tile_error_set(e, TILE_EINVAL, "the API key file %s holds no key", path);
        keys_free(k);
        return NULL;
    }
    return k;
}

int tiled_auth_load(const char *path, struct tile_error *e)
{
    if (!path[0])
        return 0;
    struct tiled_keys *k = keys_read(path, e);
    if (!k)
        return -1;
    pthread_rwlock_wrlock(&keys_lock);
    struct tiled_keys *old = keys;
    keys = k;
    atomic_store(&keys_on, true);
    pthread_rwlock_unlock(&keys_lock);
    keys_free(old);
    tiled_log_event(TILED_LOG_INFO, "api_keys", "{s:i}", "count", k->n);
    return 0;
}

void tiled_auth_free(void)
{
    pthread_rwlock_wrlock(&keys_lock);
    keys_free(keys);
    keys = NULL;
    atomic_store(&keys_on, false);
    pthread_rwlock_unlock(&keys_lock);
}

/* Compares without an early exit: the time depends only on the lengths. */
static int equal_constant_time(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t n = alen > blen ? alen : blen;
    unsigned diff = (unsigned)(alen ^ blen);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned)(unsigned char)(i < alen ? a[i] : 0) ^ (unsigned)(unsigned char)(i < blen ? b[i] : 0);
    return diff == 0;
}

bool tiled_auth_enabled(void)
{
    return atomic_load(&keys_on);
}

bool tiled_auth_check(const char *authorization)
{
    if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
        return false;
    const char *token = authorization + 7;
    token += strspn(token, " ");
    size_t tlen = strlen(token);
    if (tlen > TILED_KEY_MAX)
        return false;
    int ok = 0;
    pthread_rwlock_rdlock(&keys_lock);
    for (int i = 0; keys && i < keys->n; i++)
        ok |= equal_constant_time(token, tlen, keys->key[i], keys->len[i]);
    pthread_rwlock_unlock(&keys_lock);
    return ok;
}
