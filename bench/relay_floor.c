/* relay_floor.c - the floor of design A for the HTTP transport: the
 * application owns the client socket, judges its bytes with the strict
 * framer (server/http/h1wire.c), and relays them to libmicrohttpd over a
 * socketpair handed to the library with MHD_add_connection.
 *
 * One thread, one epoll set: the listening socket, each client socket, the
 * application's end of each socketpair, and libmicrohttpd's own epoll fd
 * (MHD_USE_EPOLL without an internal thread, MHD_USE_NO_LISTEN_SOCKET;
 * MHD_run when that fd is readable or MHD_get_timeout says so). Bytes read
 * from a client go through tiled_h1_feed, and only the bytes it judged good
 * go on to the library; the reply bytes the library writes into the
 * socketpair are copied back to the client. Pipelined requests go down one
 * stream and come back in order; a request may arrive in any number of
 * pieces (an unfinished line stays held until the framer can judge it).
 * On a framing violation the judged bytes still go on, the library's side
 * is shut for writing, and once its replies are out the client gets a 400
 * and the connection closes.
 *
 * The library answers exactly as bench/mhd_floor.c does (the same access
 * handler: a response built per request, 64-byte copied body, four
 * headers), so the difference between the two is the cost of the relay.
 *
 *   relay_floor PORT [tcp]
 *
 * With "tcp" the inner hop is a loopback TCP connection instead of a
 * socketpair (a variant, to tell the hop's cost from the rest).
 *
 * It prints "listening on PORT" once it listens and runs until SIGTERM or
 * SIGINT. A measurement tool in bench/, not part of the daemon.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <microhttpd.h>

#include "h1wire.h"

#include "floor.h"

#define IN_CAP (16 * 1024)  /* client bytes held: more than the framer's longest head */
#define OUT_CAP (16 * 1024) /* reply bytes in flight from the library to the client */




struct conn {
    int cfd;              /* the client's socket */
    int sfd;              /* the application's end of the socketpair */
    uint32_t cev, sev;    /* the events each is registered for */
    bool fwd_blocked;     /* judged bytes wait for room in the socketpair */
    bool refused;         /* the framer refused: the library's side is shut, a 400 follows its replies */
    bool client_eof;      /* the client shut its side: so is the library's, its replies still go out */
    int fed;              /* its index in fed[] while it waits for MHD_run, else -1 */
    struct tiled_h1 h1;
    uint64_t base;        /* stream offset of in[0]: every byte before it went to the library */
    size_t len;           /* bytes held in in[] */
    size_t out_off, out_len; /* reply bytes not yet written to the client: out[out_off..out_len) */
    unsigned char in[IN_CAP];
    unsigned char out[OUT_CAP];
};

static int ep;
static struct MHD_Daemon *daemon_;

/* Connections that sent the library bytes in this turn of the loop: after
 * MHD_run their replies are read at once, not on the next epoll_wait. */
static struct conn **fed;
static int nfed, capfed;

/* epoll data: the connection's address with its low bit saying which
 * socket, or one of the tags (a heap address is never this small). */
#define SIDE_CLIENT 0u
#define SIDE_LIB 1u
#define TAG_LISTEN 2u
#define TAG_MHD 4u
#define TAG_SIGNAL 6u
#define TAG_SPENT 8u

static void set_events(struct conn *c, unsigned side, uint32_t events)
{
    uint32_t *cur = side == SIDE_CLIENT ? &c->cev : &c->sev;
    if (*cur == events)
        return;
    struct epoll_event e = {.events = events, .data.u64 = (uint64_t)(uintptr_t)c | side};
    epoll_ctl(ep, EPOLL_CTL_MOD, side == SIDE_CLIENT ? c->cfd : c->sfd, &e);
    *cur = events;
}

/* What each socket waits for, from the connection's state: replies are
 * read from the library only while the client takes them, the client only
 * while its bytes can go on. In the steady state nothing changes. */
static void rearm(struct conn *c)
{
    bool out_pending = c->out_off < c->out_len;
    bool can_read = !c->fwd_blocked && !c->refused && !c->client_eof && c->len < IN_CAP;
    set_events(c, SIDE_CLIENT, (out_pending ? EPOLLOUT : 0u) | (can_read ? EPOLLIN : 0u));
    set_events(c, SIDE_LIB, (out_pending ? 0u : EPOLLIN) | (c->fwd_blocked ? EPOLLOUT : 0u));
}

static void conn_close(struct conn *c)
{
    if (c->fed >= 0)
        fed[c->fed] = NULL;
    close(c->cfd); /* closing removes both from the epoll set */
    close(c->sfd); /* the library sees its end close and frees its connection */
    free(c);
}


/* Sends the judged bytes not yet sent to the library; false if the
 * connection is gone. */
static bool forward(struct conn *c)
{
    size_t upto = (size_t)(floor_judged(&c->h1) - c->base);
    size_t sent = 0;
    while (sent < upto) {
        ssize_t w = write(c->sfd, c->in + sent, upto - sent);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            return false;
        }
        sent += (size_t)w;
    }
    if (sent) {
        memmove(c->in, c->in + sent, c->len - sent);
        c->len -= sent;
        c->base += sent;
        if (c->fed < 0) {
            if (nfed == capfed) {
                capfed = capfed ? 2 * capfed : 256;
                fed = realloc(fed, (size_t)capfed * sizeof(*fed));
                if (!fed)
                    abort();
            }
            c->fed = nfed;
            fed[nfed++] = c;
        }
    }
    c->fwd_blocked = sent < upto;
    if ((c->refused || c->client_eof) && !c->fwd_blocked)
        shutdown(c->sfd, SHUT_WR); /* the library finishes what it has, then closes */
    rearm(c);
    return true;
}

static bool client_readable(struct conn *c)
{
    ssize_t r = read(c->cfd, c->in + c->len, IN_CAP - c->len);
    if (r == 0) { /* the client is done sending: the replies to what it sent still go out */
        c->client_eof = true;
        return forward(c);
    }
    if (r < 0)
        return errno == EAGAIN || errno == EINTR;
    c->len += (size_t)r;
    size_t at = (size_t)(c->h1.pos - c->base);
    tiled_h1_feed(&c->h1, c->in + at, c->len - at);
    if (c->h1.status)
        c->refused = true;
    return forward(c);
}

/* Writes the pending reply bytes; false if the connection is gone. */
static bool flush_out(struct conn *c)
{
    if (!floor_write(c->cfd, (const char *)c->out, &c->out_off, c->out_len))
        return false;
    if (c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    rearm(c);
    return true;
}

static bool lib_readable(struct conn *c)
{
    ssize_t r = read(c->sfd, c->out, OUT_CAP);
    if (r < 0)
        return errno == EAGAIN || errno == EINTR;
    if (r == 0) { /* the library closed; after a refusal, the 400 goes last (best effort) */
        if (c->refused && write(c->cfd, floor_refusal, sizeof(floor_refusal) - 1) < 0)
            return false;
        return false;
    }
    c->out_off = 0;
    c->out_len = (size_t)r;
    return flush_out(c);
}

/* The inner hop: a socketpair, or with "tcp" on the command line a
 * loopback TCP connection to a listening socket of this process (to tell
 * the cost of the hop from the library's setsockopt calls on AF_UNIX). */
static bool inner_tcp;
static int inner_lfd = -1;
static struct sockaddr_in inner_addr;

static int inner_pair(int sp[2])
{
    if (!inner_tcp)
        return socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp);
    int a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (a < 0)
        return -1;
    if (connect(a, (struct sockaddr *)&inner_addr, sizeof(inner_addr)) != 0) {
        close(a);
        return -1;
    }
    int b = accept4(inner_lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); /* queued once connect returned */
    if (b < 0 || fcntl(a, F_SETFL, O_NONBLOCK) != 0) {
        close(a);
        if (b >= 0)
            close(b);
        return -1;
    }
    int one = 1;
    setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sp[0] = a;
    sp[1] = b;
    return 0;
}

static void accept_all(int lfd)
{
    for (;;) {
        struct sockaddr_storage sa;
        socklen_t sl = sizeof(sa);
        int fd = accept4(lfd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        int sp[2];
        if (inner_pair(sp) != 0) {
            close(fd);
            continue;
        }
        struct conn *c = malloc(sizeof(*c));
        if (!c) {
            close(fd);
            close(sp[0]);
            close(sp[1]);
            continue;
        }
        c->cfd = fd;
        c->sfd = sp[0];
        c->cev = c->sev = EPOLLIN;
        c->fwd_blocked = c->refused = c->client_eof = false;
        c->fed = -1;
        tiled_h1_init(&c->h1);
        c->base = 0;
        c->len = c->out_off = c->out_len = 0;
        /* The library owns sp[1] from here, and closes it. Its address is
         * the inner socket's own, not the client's (which stays here). On
         * an AF_UNIX socket libmicrohttpd 0.9.75 still tries TCP_NODELAY and
         * TCP_CORK around every reply; both fail (EOPNOTSUPP, not taken as
         * "not IP"), two failing setsockopt calls per request. */
        struct sockaddr_un su = {.sun_family = AF_UNIX};
        (void)sl;
        const struct sockaddr *ia = inner_tcp ? (const struct sockaddr *)&inner_addr : (const struct sockaddr *)&su;
        socklen_t il = inner_tcp ? (socklen_t)sizeof(inner_addr) : (socklen_t)sizeof(su);
        if (MHD_add_connection(daemon_, sp[1], ia, il) != MHD_YES) {
            close(fd);
            close(sp[0]);
            free(c);
            continue;
        }
        struct epoll_event e = {.events = EPOLLIN, .data.u64 = (uint64_t)(uintptr_t)c | SIDE_CLIENT};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
        e.data.u64 = (uint64_t)(uintptr_t)c | SIDE_LIB;
        epoll_ctl(ep, EPOLL_CTL_ADD, sp[0], &e);
    }
}

/* One socket's events; false if the connection is gone. */
static bool on_event(struct conn *c, unsigned side, uint32_t ev)
{
    if (side == SIDE_CLIENT) {
        if (ev & (EPOLLERR | EPOLLHUP))
            return false;
        if ((ev & EPOLLOUT) && !flush_out(c))
            return false;
        if ((ev & EPOLLIN) && (c->cev & EPOLLIN))
            return client_readable(c);
        return true;
    }
    if ((ev & EPOLLOUT) && !forward(c))
        return false;
    if ((ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !(c->out_off < c->out_len))
        return lib_readable(c);
    return true;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: relay_floor PORT [tcp]\n");
        return 2;
    }
    unsigned port = (unsigned)atoi(argv[1]);
    inner_tcp = argc > 2 && strcmp(argv[2], "tcp") == 0;
    if (inner_tcp) {
        inner_addr.sin_family = AF_INET;
        inner_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t al = sizeof(inner_addr);
        inner_lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (inner_lfd < 0 || bind(inner_lfd, (struct sockaddr *)&inner_addr, sizeof(inner_addr)) != 0 ||
            listen(inner_lfd, 64) != 0 || getsockname(inner_lfd, (struct sockaddr *)&inner_addr, &al) != 0) {
            fprintf(stderr, "relay_floor: no loopback socket for the inner hop\n");
            return 1;
        }
    }
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd_sig = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 1024) != 0) {
        fprintf(stderr, "relay_floor: cannot listen on port %u\n", port);
        return 1;
    }
    daemon_ = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL, floor_answer, NULL,
                               MHD_OPTION_CONNECTION_LIMIT, 4096u, MHD_OPTION_END);
    if (!daemon_) {
        fprintf(stderr, "relay_floor: libmicrohttpd did not start\n");
        return 1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_EPOLL_FD);
    if (!di) {
        fprintf(stderr, "relay_floor: libmicrohttpd has no epoll fd\n");
        return 1;
    }
    ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event e = {.events = EPOLLIN, .data.u64 = TAG_LISTEN};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &e);
    e.data.u64 = TAG_MHD;
    epoll_ctl(ep, EPOLL_CTL_ADD, di->epoll_fd, &e);
    e.data.u64 = TAG_SIGNAL;
    epoll_ctl(ep, EPOLL_CTL_ADD, sfd_sig, &e);
    printf("listening on %u (libmicrohttpd %s behind a relay over %s)\n", port, MHD_get_version(),
           inner_tcp ? "loopback TCP" : "a socketpair");
    fflush(stdout);

    struct epoll_event evs[256];
    int timeout = -1;
    for (;;) {
        int n = epoll_wait(ep, evs, 256, timeout);
        if (n < 0 && errno != EINTR)
            break;
        bool run_lib = n == 0; /* the library's timeout came */
        for (int i = 0; i < n; i++) {
            uint64_t d = evs[i].data.u64;
            if (d == TAG_LISTEN) {
                accept_all(lfd);
            } else if (d == TAG_MHD) {
                run_lib = true;
            } else if (d == TAG_SIGNAL) {
                MHD_stop_daemon(daemon_);
                return 0;
            } else if (d != TAG_SPENT) {
                struct conn *c = (struct conn *)(uintptr_t)(d & ~(uint64_t)1);
                if (!on_event(c, (unsigned)(d & 1), evs[i].events)) {
                    /* Later events of this batch may name it: mark them spent. */
                    for (int j = i + 1; j < n; j++)
                        if ((evs[j].data.u64 & ~(uint64_t)1) == (uint64_t)(uintptr_t)c)
                            evs[j].data.u64 = TAG_SPENT;
                    conn_close(c);
                }
            }
        }
        if (run_lib || nfed)
            MHD_run(daemon_);
        /* The library has answered what it was sent: copy the replies now. */
        for (int i = 0; i < nfed; i++) {
            struct conn *c = fed[i];
            if (!c)
                continue;
            c->fed = -1;
            if (!(c->out_off < c->out_len) && !lib_readable(c))
                conn_close(c);
        }
        nfed = 0;
        MHD_UNSIGNED_LONG_LONG t;
        timeout = MHD_get_timeout(daemon_, &t) == MHD_YES ? (t > 1000 ? 1000 : (int)t) : -1;
    }
    MHD_stop_daemon(daemon_);
    return 0;
}
