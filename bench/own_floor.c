/* own_floor.c - the floor of design B for the HTTP transport: no library
 * on the request path. One epoll thread accepts, reads each connection,
 * frames its bytes with the strict framer (server/http/h1wire.c: the head's
 * end, Content-Length or chunked bodies, pipelined requests), and writes
 * each reply itself, kept alive.
 *
 * The reply is byte for byte what libmicrohttpd 0.9.75 sends for
 * bench/mhd_floor.c (checked with `curl -sv` and raw sockets): the status
 * line, Date, the four headers (Content-Type, X-Request-Id, Server-Timing,
 * Vary), Content-Length, the 64-byte body; "Connection: close" after Date,
 * and the connection closed, when the request is HTTP/1.0 or asks for it.
 * Each reply is built per request into the connection's output (its head
 * from pieces, the body copied), as the floor builds a response per
 * request; the replies of one read go out in one write. A framing violation
 * gets a 400 after the replies before it, and the connection closes.
 *
 *   own_floor PORT
 *
 * It prints "listening on PORT" once it listens and runs until SIGTERM or
 * SIGINT. A measurement tool in bench/, not part of the daemon.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "h1wire.h"

#include "floor.h"

#define IN_CAP (16 * 1024)      /* bytes held: more than the framer's longest head */
#define OUT_STOP (256 * 1024)   /* pending reply bytes above which the client is not read */


static const char status_line[] = "HTTP/1.1 200 OK\r\nDate: ";
static const char close_line[] = "Connection: close\r\n";
static const char fields[] = "Content-Type: application/json\r\n"
                             "X-Request-Id: 0123456789abcdef0123456789abcdef\r\n"
                             "Server-Timing: queue;dur=0.000, decode;dur=0.001, tile;dur=0.001, total;dur=0.003\r\n"
                             "Vary: Accept-Encoding\r\n"
                             "Content-Length: 64\r\n\r\n";

/* "Sat, 28 Nov 2026 09:27:49 GMT\r\n", formatted again when the second changes. */
#define DATE_LEN 31
static char date[DATE_LEN + 1];
static time_t date_at = -1;

static void refresh_date(void)
{
    time_t now = time(NULL);
    if (now == date_at)
        return;
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
    date_at = now;
}

struct conn {
    int fd;
    uint32_t events;      /* what it is registered for */
    struct tiled_h1 h1;
    uint64_t base;        /* stream offset of in[0] */
    size_t len;           /* bytes held in in[] */
    bool close_this;      /* the message in progress ends the connection */
    bool closing;         /* a reply that ends the connection is queued: read no more */
    unsigned char *out;   /* replies not yet written: out[out_off..out_len) */
    size_t out_off, out_len, out_cap;
    unsigned char in[IN_CAP];
};

static int ep;

static void put(struct conn *c, const void *p, size_t n)
{
    if (c->out_len + n > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 4096;
        while (cap < c->out_len + n)
            cap *= 2;
        unsigned char *o = realloc(c->out, cap);
        if (!o)
            abort();
        c->out = o;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
}

/* "Connection: close" among the head's fields, or an HTTP/1.0 request
 * (which this server, like the library, does not keep alive). */
static bool head_closes(const struct conn *c, uint64_t from, uint64_t to)
{
    if (c->h1.http10)
        return true;
    const char *h = (const char *)c->in + (from - c->base);
    const char *end = (const char *)c->in + (to - c->base);
    for (const char *l = h; l < end;) {
        const char *e = memchr(l, '\n', (size_t)(end - l));
        if (!e)
            break;
        size_t n = (size_t)(e - l);
        if (n > 11 && (l[0] | 0x20) == 'c' && strncasecmp(l, "connection:", 11) == 0) {
            for (const char *v = l + 11; v + 5 <= e; v++)
                if (strncasecmp(v, "close", 5) == 0)
                    return true;
        }
        l = e + 1;
    }
    return false;
}

/* The framer's observer: a head is checked for Connection, a message's end
 * is answered. */
static void on_message(void *arg, const struct tiled_h1 *p, enum tiled_h1_event ev, uint64_t from, uint64_t to)
{
    (void)p;
    struct conn *c = arg;
    if (ev == TILED_H1_EV_HEAD) {
        c->close_this = head_closes(c, from, to);
    } else if (ev == TILED_H1_EV_END && !c->closing) {
        refresh_date();
        put(c, status_line, sizeof(status_line) - 1);
        put(c, date, DATE_LEN);
        if (c->close_this) {
            put(c, close_line, sizeof(close_line) - 1);
            c->closing = true;
        }
        put(c, fields, sizeof(fields) - 1);
        put(c, floor_body, sizeof(floor_body));
    }
}

static void set_events(struct conn *c, uint32_t events)
{
    if (c->events == events)
        return;
    struct epoll_event e = {.events = events, .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
    c->events = events;
}

static void conn_close(struct conn *c)
{
    close(c->fd);
    free(c->out);
    free(c);
}

/* Writes what is pending; false when the connection is to be closed. */
static bool flush_out(struct conn *c)
{
    if (!floor_write(c->fd, (const char *)c->out, &c->out_off, c->out_len))
        return false;
    size_t pending = c->out_len - c->out_off;
    if (!pending) {
        c->out_off = c->out_len = 0;
        if (c->closing)
            return false;
    }
    bool can_read = !c->closing && pending < OUT_STOP;
    set_events(c, (pending ? EPOLLOUT : 0u) | (can_read ? EPOLLIN : 0u));
    return true;
}


static bool readable(struct conn *c)
{
    ssize_t r = read(c->fd, c->in + c->len, IN_CAP - c->len);
    if (r == 0) { /* the client is done sending: what is pending still goes out */
        c->closing = true;
        return flush_out(c);
    }
    if (r < 0)
        return errno == EAGAIN || errno == EINTR;
    c->len += (size_t)r;
    size_t at = (size_t)(c->h1.pos - c->base);
    tiled_h1_feed(&c->h1, c->in + at, c->len - at);
    if (c->h1.status && !c->closing) {
        put(c, floor_refusal, sizeof(floor_refusal) - 1);
        c->closing = true;
    }
    /* Keep the unit in progress (a head's lines are judged whole). */
    size_t drop = (size_t)(floor_judged(&c->h1) - c->base);
    if (drop) {
        memmove(c->in, c->in + drop, c->len - drop);
        c->len -= drop;
        c->base += drop;
    }
    return flush_out(c);
}

static void accept_all(int lfd)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct conn *c = malloc(sizeof(*c));
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->events = EPOLLIN;
        tiled_h1_init(&c->h1);
        c->h1.observer = on_message;
        c->h1.observer_arg = c;
        c->base = 0;
        c->len = 0;
        c->close_this = c->closing = false;
        c->out = NULL;
        c->out_off = c->out_len = c->out_cap = 0;
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
    }
}

static int listen_fd, signal_fd;

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: own_floor PORT\n");
        return 2;
    }
    unsigned port = (unsigned)atoi(argv[1]);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    signal_fd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);

    listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(listen_fd, 1024) != 0) {
        fprintf(stderr, "own_floor: cannot listen on port %u\n", port);
        return 1;
    }
    ep = epoll_create1(EPOLL_CLOEXEC);
    /* The two fixed sockets are told apart from connections by address. */
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = &listen_fd};
    epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd, &e);
    e.data.ptr = &signal_fd;
    epoll_ctl(ep, EPOLL_CTL_ADD, signal_fd, &e);
    printf("listening on %u (own reader, no library)\n", port);
    fflush(stdout);

    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++) {
            void *d = evs[i].data.ptr;
            if (d == &listen_fd) {
                accept_all(listen_fd);
                continue;
            }
            if (d == &signal_fd)
                return 0;
            if (!d)
                continue; /* closed earlier in this batch */
            struct conn *c = d;
            uint32_t ev = evs[i].events;
            bool ok = !(ev & EPOLLERR);
            if (ok && (ev & EPOLLOUT))
                ok = flush_out(c);
            if (ok && (ev & (EPOLLIN | EPOLLHUP)) && (c->events & EPOLLIN))
                ok = readable(c);
            else if (ok && (ev & EPOLLHUP) && !(c->events & EPOLLOUT))
                ok = false;
            if (!ok) {
                for (int j = i + 1; j < n; j++)
                    if (evs[j].data.ptr == c)
                        evs[j].data.ptr = NULL;
                conn_close(c);
            }
        }
    }
    return 0;
}
