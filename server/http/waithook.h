/* waithook.h - the event-wait hook (waithook.c): the access lines a
 * transport thread gathered are written before it waits for more events.
 * Nothing to call: the hook is the C library's epoll_wait(), defined by
 * the daemon (as wirehook.h defines recv()). */
#ifndef TILED_WAITHOOK_H
#define TILED_WAITHOOK_H

#endif
