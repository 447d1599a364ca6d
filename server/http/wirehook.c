/* wirehook.c - the receive hook under libmicrohttpd (see wirehook.h).
 *
 * WHY A HOOK. libmicrohttpd 0.9.75 parses a request head in place and
 * repairs what it should refuse before the application sees any of it: a
 * bare LF ends a line; a folded line is appended to the previous field's
 * *name* (so a folded Content-Length or Transfer-Encoding vanishes and the
 * body is read as the next request); "Transfer-Encoding : chunked" becomes a
 * field named "Transfer-Encoding " that it ignores; a NUL cuts a value or the
 * target short, hiding the rest; only the first Transfer-Encoding line is
 * consulted. Its own refusals (malformed Content-Length, 414, 431, chunk
 * errors, a 40 KB chunk extension's 500) are HTML written before the
 * application is asked. MHD_OPTION_STRICT_FOR_CLIENT covers a missing Host
 * and spaces in the target only, and MHD_get_connection_values shows the
 * head after the repairs, its CR, LF and colons already overwritten with
 * NULs. The raw bytes have to be judged before the library reads them.
 *
 * HOW. The library reads a plain connection with recv() and a TLS one with
 * gnutls_record_recv(); it offers no receive callback of its own (its
 * connection's recv_cls is internal). So this file defines both functions:
 * the dynamic linker binds libmicrohttpd's (and libgnutls's, and
 * server/grpc/'s) calls to these, which look the descriptor up in a table
 * filled from libmicrohttpd's connection notifications and pass every other
 * descriptor straight to the C library's or GnuTLS's function (dlsym
 * RTLD_NEXT). The cost on a descriptor that is not an HTTP connection is one
 * table load; on an HTTP connection, one pass of h1wire.c over the head.
 *
 * HOLDING BACK. A unit (head, chunk-size line) that a read ends in the middle
 * of is kept here, not given to the library, until it is complete and
 * judged: so the library never holds part of a head that turns out bad, and
 * a refusal can always be finished with a short stand-in that it parses
 * without complaint. Judged bytes go to the library as they are; what does
 * not fit its buffer waits here for its next read (it keeps reading while a
 * read returns bytes). Most small requests arrive whole in one read, and are
 * passed through without a copy.
 */
#include "wirehook.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <microhttpd.h>

#include "h1wire.h"

/* GnuTLS's, declared here rather than by including gnutls.h: only
 * server/grpc/ includes the TLS library's headers (tests/layering). */
ssize_t gnutls_record_recv(void *session, void *data, size_t size);
int gnutls_transport_get_int(void *session);
#define GNUTLS_E_AGAIN (-28)

/* The held buffer: one unit of at most TILED_H1_HEAD_MAX bytes is judged at
 * a time, and each read into it asks for at least as much again. */
#define HELD_CAP (2 * TILED_H1_HEAD_MAX + 64)

struct wire {
    struct tiled_h1 h1;
    bool tls;
    struct MHD_Connection *conn; /* for its idle timer (touch) */
    unsigned idle_s;
    bool dead;            /* the stand-in is queued: nothing more is handed on */
    size_t drained;       /* bytes dropped since */
    unsigned char *held;  /* HELD_CAP bytes, allocated on first need */
    size_t held_len;      /* bytes in held, from stream offset held_base */
    size_t held_ok;       /* the first held_ok of them are judged good */
    uint64_t held_base;
    uint32_t heads_seen;  /* heads the access handler has had */
    uint32_t verdict_head; /* the request the verdict answers */
    bool has_verdict;
    struct tiled_wire_verdict v;
    char method[16];
    char target[256];
};

typedef ssize_t (*recv_fn)(int, void *, size_t, int);
typedef ssize_t (*tls_recv_fn)(void *, void *, size_t);

static _Atomic(recv_fn) real_recv;
static _Atomic(tls_recv_fn) real_tls_recv;
/* Indexed by descriptor; an entry is written on the connection's thread at
 * its start and end, and read there (and, as NULL, by any other thread). */
static _Atomic(struct wire *) *_Atomic table;
static size_t table_len;

static ssize_t sys_recv(int fd, void *buf, size_t n, int flags)
{
    recv_fn f = atomic_load_explicit(&real_recv, memory_order_relaxed);
    if (f)
        return f(fd, buf, n, flags);
    return syscall(SYS_recvfrom, fd, buf, n, flags, NULL, NULL); /* before start (unit tests) */
}

static struct wire *wire_of(int fd)
{
    _Atomic(struct wire *) *t = atomic_load_explicit(&table, memory_order_acquire);
    if (!t || fd < 0 || (size_t)fd >= table_len)
        return NULL;
    return atomic_load_explicit(&t[fd], memory_order_acquire);
}

int tiled_wire_start(struct tile_error *e)
{
    if (atomic_load(&table))
        return 0;
    recv_fn r = (recv_fn)dlsym(RTLD_NEXT, "recv");
    tls_recv_fn t = (tls_recv_fn)dlsym(RTLD_NEXT, "gnutls_record_recv");
    if (!r || !t)
        return tile_error_set(e, TILE_EIO, "cannot find the C library's recv or GnuTLS's gnutls_record_recv");
    atomic_store(&real_recv, r);
    atomic_store(&real_tls_recv, t);
    struct rlimit rl;
    size_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (size_t)rl.rlim_cur : 65536;
    if (n > (1u << 22))
        n = 1u << 22;
    /* calloc'd pages are only touched for the descriptors in use. */
    _Atomic(struct wire *) *tab = calloc(n, sizeof(*tab));
    if (!tab)
        return tile_error_set(e, TILE_ENOMEM, "cannot allocate the connection table");
    table_len = n;
    atomic_store_explicit(&table, tab, memory_order_release);
    return 0;
}

bool tiled_wire_open(int fd, bool tls, struct MHD_Connection *conn, unsigned idle_s)
{
    _Atomic(struct wire *) *t = atomic_load_explicit(&table, memory_order_acquire);
    if (!t || fd < 0 || (size_t)fd >= table_len)
        return false;
    struct wire *w = calloc(1, sizeof(*w));
    if (!w)
        return false;
    tiled_h1_init(&w->h1);
    w->tls = tls;
    w->conn = conn;
    w->idle_s = idle_s;
    atomic_store_explicit(&t[fd], w, memory_order_release);
    return true;
}

void tiled_wire_close(int fd)
{
    struct wire *w = wire_of(fd);
    if (!w)
        return;
    atomic_store_explicit(&atomic_load(&table)[fd], NULL, memory_order_release);
    free(w->held);
    free(w);
}

/* ---- reading ------------------------------------------------------------ */

/* The connection's own reader: the socket, or its TLS session. */
struct io {
    int fd;
    void *session; /* NULL: plain */
};

static ssize_t io_read(const struct io *io, void *buf, size_t n)
{
    if (io->session)
        return atomic_load_explicit(&real_tls_recv, memory_order_relaxed)(io->session, buf, n);
    return sys_recv(io->fd, buf, n, 0);
}

/* "No data now", the way the caller expects it. */
static ssize_t io_again(const struct io *io)
{
    if (io->session)
        return GNUTLS_E_AGAIN;
    errno = EAGAIN;
    return -1;
}

/* The stream offset up to which bytes are judged good. */
static uint64_t judged(const struct tiled_h1 *p)
{
    return p->unit == TILED_H1_UNIT_NONE ? p->pos : p->unit_start;
}

static bool ensure_held(struct wire *w)
{
    if (!w->held)
        w->held = malloc(HELD_CAP);
    return w->held != NULL;
}

static void copy_printable(char *dst, size_t cap, const unsigned char *s, size_t n)
{
    size_t k = n < cap - 1 ? n : cap - 1;
    for (size_t i = 0; i < k; i++)
        dst[i] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '?';
    dst[k] = '\0';
}

/* Records the refusal; `unit` holds the refused unit's bytes from its start
 * (a head's request line, when it was read, is in it). */
static void record_verdict(struct wire *w, const unsigned char *unit, size_t unit_len)
{
    const struct tiled_h1 *p = &w->h1;
    w->has_verdict = true;
    w->verdict_head = p->in_body ? p->accepted : p->accepted + 1;
    w->method[0] = w->target[0] = '\0';
    if (!p->in_body && p->method_len && p->target_off >= p->method_len + 1 &&
        (size_t)p->target_off + p->target_len <= unit_len) {
        copy_printable(w->method, sizeof(w->method), unit + p->target_off - p->method_len - 1, p->method_len);
        copy_printable(w->target, sizeof(w->target), unit + p->target_off, p->target_len);
    } else if (!p->in_body) { /* refused inside the request line (414, say): its first words */
        size_t i = 0, m, t;
        while (i < unit_len && (unit[i] == '\r' || unit[i] == '\n'))
            i++;
        for (m = i; m < unit_len && unit[m] > 0x20 && unit[m] < 0x7f; m++)
            ;
        copy_printable(w->method, sizeof(w->method), unit + i, m - i);
        if (m < unit_len && unit[m] == ' ') {
            for (t = ++m; t < unit_len && unit[t] > 0x20 && unit[t] != 0x7f; t++)
                ;
            copy_printable(w->target, sizeof(w->target), unit + m, t - m);
        }
    }
    w->v.status = p->status;
    w->v.message = p->message;
    w->v.method = w->method;
    w->v.target = w->target;
}

/* After a refusal: what the client still sends is read and dropped (up to
 * DRAIN_MAX), never handed on. Left unread, it would make the close that
 * follows the answer a reset, which can destroy the answer in flight. */
#define DRAIN_MAX (1u << 20)

static void drain(struct wire *w, const struct io *io)
{
    unsigned char scratch[16384];
    while (w->drained < DRAIN_MAX) {
        ssize_t r = io_read(io, scratch, sizeof(scratch));
        if (r <= 0)
            break;
        w->drained += (size_t)r;
    }
}

/* Replaces everything from the refused unit on with the stand-in (held
 * then holds only bytes to hand over), and reads nothing more for the
 * library: what comes is dropped. */
static void stand_in(struct wire *w, const struct io *io)
{
    static const char head[] = "GET / HTTP/1.1\r\nHost: tiled\r\nConnection: close\r\n\r\n";
    static const char body_end[] = "0\r\n\r\n";
    static const char chunk_end[] = "\r\n0\r\n\r\n";
    const char *s = w->h1.unit == TILED_H1_UNIT_HEAD         ? head
                    : w->h1.unit == TILED_H1_UNIT_CHUNK_NEXT ? chunk_end
                                                             : body_end;
    size_t unit_off = (size_t)(w->h1.unit_start - w->held_base);
    record_verdict(w, w->held + unit_off, w->held_len - unit_off);
    size_t n = strlen(s);
    w->held_len = unit_off;
    memcpy(w->held + w->held_len, s, n);
    w->held_len += n;
    w->held_ok = w->held_len;
    w->dead = true;
    drain(w, io);
}

/* Bytes came that the library does not see yet (a unit held back): its
 * idle timer restarts as if it had read them, so a head that arrives in
 * pieces keeps the deadlines it had (headwatch.h), not the idle timeout's.
 * Setting the timeout from 0 is libmicrohttpd's one way to mark activity. */
static void touch(const struct wire *w)
{
    if (!w->conn || !w->idle_s)
        return;
    MHD_set_connection_option(w->conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    MHD_set_connection_option(w->conn, MHD_CONNECTION_OPTION_TIMEOUT, w->idle_s);
}

/* Moves judged bytes from held to the caller's buffer after its first `out`
 * bytes; returns the new count. */
static size_t deliver(struct wire *w, unsigned char *buf, size_t out, size_t cap)
{
    size_t k = w->held_ok < cap - out ? w->held_ok : cap - out;
    memcpy(buf + out, w->held, k);
    memmove(w->held, w->held + k, w->held_len - k);
    w->held_len -= k;
    w->held_ok -= k;
    w->held_base += k;
    return out + k;
}

/* Reads for the library. libmicrohttpd (epoll, edge-triggered) takes a read
 * shorter than it asked for as "the socket is drained" and waits for the next
 * edge: so a short count is returned only once the socket said "no more",
 * or after a refusal, when no more is wanted. */
static ssize_t wire_read(struct wire *w, const struct io *io, void *vbuf, size_t cap)
{
    unsigned char *buf = vbuf;
    size_t out = 0;
    if (w->dead && !w->held_ok) {
        drain(w, io);
        return io_again(io);
    }
    if (!w->held_len && !w->dead) {
        /* The fast path: read into the library's buffer and judge in place. */
        const uint64_t base = w->h1.pos;
        ssize_t r = io_read(io, buf, cap);
        if (r <= 0)
            return r;
        tiled_h1_feed(&w->h1, buf, (size_t)r);
        size_t ok = (size_t)(judged(&w->h1) - base);
        if (!w->h1.status && ok == (size_t)r)
            return r;
        /* The unjudged rest waits in held: an unfinished unit (at most a
         * head's limit, or it would be refused), or a refused one (of which
         * only its request line is still needed, for the log). */
        if (!ensure_held(w))
            return -1;
        size_t keep = (size_t)r - ok < HELD_CAP - 64 ? (size_t)r - ok : HELD_CAP - 64;
        memcpy(w->held, buf + ok, keep);
        w->held_len = keep;
        w->held_ok = 0;
        w->held_base = base + ok;
        out = ok;
        if (!ok && !w->h1.status)
            touch(w);
    }
    for (;;) {
        if (w->h1.status && !w->dead)
            stand_in(w, io);
        out = deliver(w, buf, out, cap);
        if (out == cap || w->dead)
            return out ? (ssize_t)out : io_again(io);
        /* held has an unfinished unit only: it grows until it is judged. */
        ssize_t r = io_read(io, w->held + w->held_len, HELD_CAP - w->held_len - 64);
        if (r <= 0) /* no more now (the unit waits), the end, or an error */
            return out ? (ssize_t)out : r;
        w->held_len += (size_t)r;
        touch(w);
        size_t at = (size_t)(w->h1.pos - w->held_base);
        tiled_h1_feed(&w->h1, w->held + at, w->held_len - at);
        w->held_ok = (size_t)(judged(&w->h1) - w->held_base);
    }
}

/* ---- the hooks ---------------------------------------------------------- */

ssize_t recv(int fd, void *buf, size_t n, int flags)
{
    struct wire *w = wire_of(fd);
    if (!w || w->tls || flags)
        return sys_recv(fd, buf, n, flags);
    const struct io io = {.fd = fd};
    return wire_read(w, &io, buf, n);
}

ssize_t gnutls_record_recv(void *session, void *data, size_t size)
{
    struct wire *w = wire_of(gnutls_transport_get_int(session));
    tls_recv_fn f = atomic_load_explicit(&real_tls_recv, memory_order_relaxed);
    if (!f) /* before start: the library's own, found now */
        f = (tls_recv_fn)dlsym(RTLD_NEXT, "gnutls_record_recv");
    if (!w || !w->tls)
        return f(session, data, size);
    const struct io io = {.fd = -1, .session = session};
    return wire_read(w, &io, data, size);
}

/* ---- the handler's side ------------------------------------------------- */

bool tiled_wire_watched(int fd)
{
    return wire_of(fd) != NULL;
}

const struct tiled_wire_verdict *tiled_wire_head(int fd)
{
    struct wire *w = wire_of(fd);
    if (!w)
        return NULL;
    w->heads_seen++;
    return w->has_verdict && !w->h1.in_body && w->heads_seen == w->verdict_head ? &w->v : NULL;
}

const struct tiled_wire_verdict *tiled_wire_body(int fd)
{
    struct wire *w = wire_of(fd);
    return w && w->has_verdict && w->h1.in_body && w->heads_seen == w->verdict_head ? &w->v : NULL;
}
