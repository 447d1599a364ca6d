/* waithook.c - the event-wait hook: the access lines a transport thread
 * gathered are written before it waits for more events. Nothing calls it
 * by name: it is the C library's epoll_wait(), defined by the daemon (as
 * wirehook.c defines recv()), so it has no header.
 *
 * WHY. A transport thread gathers the access lines of the requests it ends
 * (log.c), and writes them at once before it next sleeps: a busy thread
 * then writes the lines of every request one wait returned in one write(2),
 * an idle one writes each line as its request ends. The place to do it is
 * just before the thread waits for events, and libmicrohttpd's thread
 * offers no hook there (its loop is internal: MHD_USE_INTERNAL_POLLING_THREAD).
 *
 * HOW. Its thread waits in epoll_wait() (MHD_USE_EPOLL), and so do the
 * gRPC loops (server/grpc/loop.c). This file defines epoll_wait(): the
 * dynamic linker binds libmicrohttpd's calls, and the daemon's own, to it;
 * it writes what is gathered and calls the C library's (dlsym RTLD_NEXT, as
 * wirehook.c does for recv). With nothing gathered the cost is one relaxed
 * load. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <sys/epoll.h>

#include "log.h"

typedef int (*epoll_wait_fn)(int, struct epoll_event *, int, int);

static _Atomic(epoll_wait_fn) real_epoll_wait;

int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
    epoll_wait_fn f = atomic_load_explicit(&real_epoll_wait, memory_order_relaxed);
    if (!f) { /* the first call: found now (every thread finds the same) */
        f = (epoll_wait_fn)dlsym(RTLD_NEXT, "epoll_wait");
        atomic_store_explicit(&real_epoll_wait, f, memory_order_relaxed);
    }
    tiled_log_flush();
    return f(epfd, events, maxevents, timeout);
}
