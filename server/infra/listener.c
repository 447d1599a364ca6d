/* listener.c - a listening socket's drain (see listener.h). */
#include "listener.h"

#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

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
