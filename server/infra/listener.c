/* listener.c - a listening socket's drain (see listener.h). */
#include "listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

const struct tiled_socket_io tiled_socket_system_io = {.recv = recv, .sendmsg = sendmsg, .shutdown = shutdown};

/* Why a bind or listen failed, with what to change. */
static int listen_error(struct tile_error *e, const char *host, long long port, const char *port_flag, int err)
{
    const char *why;
    char flag[64];
    switch (err) {
    case EADDRINUSE:
        why = "the address is in use: another process listens there";
        snprintf(flag, sizeof(flag), "choose another %s", port_flag);
        break;
    case EACCES:
        why = "permission denied: ports below 1024 need root or CAP_NET_BIND_SERVICE";
        snprintf(flag, sizeof(flag), "choose another %s", port_flag);
        break;
    case EADDRNOTAVAIL:
        why = "the address is not one of this machine's";
        snprintf(flag, sizeof(flag), "set --host");
        break;
    case EAFNOSUPPORT:
        why = "this machine has no such address family (IPv6 turned off?)";
        snprintf(flag, sizeof(flag), "set --host");
        break;
    default:
        why = strerror(err);
        snprintf(flag, sizeof(flag), "check --host and %s", port_flag);
        break;
    }
    char shown[300];
    tiled_listener_url_host(host, shown, sizeof(shown));
    return tile_error_set(e, TILE_EIO, "cannot listen on %s:%lld: %s (%s)", shown, port, why, flag);
}

static int bind_one(const struct addrinfo *ai, int backlog)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0)
        return -1;
    int one = 1, zero = 0;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        (ai->ai_family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) < 0) ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, backlog) < 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

int tiled_listener_open(const char *host, long long port, const char *port_flag, int backlog, struct tile_error *e)
{
    char service[24];
    snprintf(service, sizeof(service), "%lld", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        char shown[300];
        tiled_listener_url_host(host, shown, sizeof(shown));
        return tile_error_set(e, TILE_EINVAL, "cannot listen on %s:%lld: the host does not resolve (%s) (set --host)",
                              shown, port, rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    }
    int fd = -1, err = EADDRNOTAVAIL;
    for (const struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = bind_one(ai, backlog);
        if (fd < 0)
            err = errno;
    }
    freeaddrinfo(res);
    return fd >= 0 ? fd : listen_error(e, host, port, port_flag, err);
}

unsigned tiled_listener_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return 0;
    if (ss.ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)(const void *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)(const void *)&ss)->sin6_port);
    return 0;
}

void tiled_listener_url_host(const char *host, char *dst, size_t cap)
{
    snprintf(dst, cap, strchr(host, ':') ? "[%s]" : "%s", host);
}

/* A classic BPF program on a TCP socket sees the TCP header from offset 0;
 * its 14th byte holds the flags. */
int tiled_listener_hold(int fd)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 13),
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0x12),       /* SYN | ACK */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x02, 0, 1), /* SYN alone */
        BPF_STMT(BPF_RET | BPF_K, 0),                    /* dropped */
        BPF_STMT(BPF_RET | BPF_K, 0xffffffffu),          /* kept whole */
    };
    struct sock_fprog prog = {.len = sizeof(code) / sizeof(code[0]), .filter = code};
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog));
}

/* Linux gives a listener's accept queue as tcpi_unacked. */
unsigned tiled_listener_queued(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 ? ti.tcpi_unacked : 0;
}

void tiled_listener_peer(int fd, char *dst, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    dst[0] = '\0';
    if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
        return;
    if (ss.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)&ss)->sin6_addr, dst, (socklen_t)cap);
    else if (ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)&ss)->sin_addr, dst, (socklen_t)cap);
}
