/* mhd_floor.c - a minimal libmicrohttpd application: the library's own
 * speed and framing, with no tiled code in the way.
 *
 * One epoll thread (MHD_USE_EPOLL_INTERNAL_THREAD); for each request, a
 * response built from a copied 64-byte body with the four headers every
 * small tiled reply carries (Content-Type, X-Request-Id, Server-Timing,
 * Vary), queued and destroyed: the per-request work of an application that
 * answers through the library's public API and nothing else. Bodies are
 * read and dropped. It is the floor row of `make bench-peers` and the
 * subject of bench/mhd_framing.py, which sends it the framing table of
 * tests/server/test_framing.py to see what the library refuses by itself.
 *
 *   mhd_floor PORT [DISCIPLINE]
 *   mhd_floor levels       prints the discipline levels this build takes
 *
 * DISCIPLINE is libmicrohttpd's MHD_OPTION_CLIENT_DISCIPLINE_LVL (-3..3;
 * 1.0 and later only). It prints "listening on PORT" once it listens and
 * runs until SIGTERM or SIGINT.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "floor.h"



int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mhd_floor PORT [DISCIPLINE] | mhd_floor levels\n");
        return 2;
    }
    if (strcmp(argv[1], "levels") == 0) {
        puts(MHD_VERSION >= 0x00097701 ? "-3 -2 -1 0 1 2 3" : "0");
        return 0;
    }
    int discipline = argc > 2 ? atoi(argv[2]) : 0;
    unsigned port = (unsigned)atoi(argv[1]);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    struct MHD_OptionItem opts[] = {
#if MHD_VERSION >= 0x00097701
        {MHD_OPTION_CLIENT_DISCIPLINE_LVL, discipline, NULL},
#endif
        {MHD_OPTION_END, 0, NULL},
    };
#if MHD_VERSION < 0x00097701
    if (discipline != 0) {
        fprintf(stderr, "mhd_floor: libmicrohttpd %s has no MHD_OPTION_CLIENT_DISCIPLINE_LVL\n", MHD_get_version());
        return 2;
    }
#endif
    struct MHD_Daemon *d =
        MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD, (uint16_t)port, NULL, NULL, floor_answer, NULL,
                         MHD_OPTION_CONNECTION_LIMIT, 4096u, MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
                         MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "mhd_floor: cannot listen on port %u\n", port);
        return 1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("listening on %u (libmicrohttpd %s, discipline %d)\n", di ? di->port : port, MHD_get_version(),
           discipline);
    fflush(stdout);
    int sig;
    sigwait(&sigs, &sig);
    MHD_stop_daemon(d);
    return 0;
}
