/* h1drive.h - drives the HTTP/1.1 framer (server/http/h1wire.h) over one
 * byte stream cut into pieces, the way the receive hook does (a piece starts
 * at the first byte the framer has not consumed), and records what it
 * concluded: every boundary its observer is told (adjacent body pieces
 * merged, so that the record does not depend on the cuts) and the verdict.
 * Feeding the same stream whole, byte by byte or in any cuts must give the
 * same record: the unit test (tests/server/test_h1wire.c), the fuzzer
 * (fuzz/fuzz_h1wire.c) and the differential harness (h1wire_dump.c) share
 * this. Header-only (static inline functions), no allocation.
 */
#ifndef TILED_H1DRIVE_H
#define TILED_H1DRIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "h1wire.h"

#define H1DRIVE_EVENTS 4096

struct h1drive_event {
    uint64_t from, to;
    int kind; /* 'H' head, 'D' body bytes, 'E' message end */
    /* A head's request line: the method at `from`, the target at target_from. */
    uint32_t method_len, target_len;
    uint64_t target_from;
};

struct h1drive {
    struct tiled_h1 p;
    struct h1drive_event ev[H1DRIVE_EVENTS];
    size_t n_ev;
    bool overflow; /* more events than ev[] holds: the record is incomplete */
};

static inline void h1drive_observe(void *arg, const struct tiled_h1 *p, enum tiled_h1_event ev, uint64_t from, uint64_t to)
{
    struct h1drive *d = arg;
    int kind = ev == TILED_H1_EV_HEAD ? 'H' : ev == TILED_H1_EV_DATA ? 'D' : 'E';
    if (kind == 'D' && d->n_ev && d->ev[d->n_ev - 1].kind == 'D' && d->ev[d->n_ev - 1].to == from) {
        d->ev[d->n_ev - 1].to = to; /* one body piece continued */
        return;
    }
    if (d->n_ev == H1DRIVE_EVENTS) {
        d->overflow = true;
        return;
    }
    d->ev[d->n_ev++] = (struct h1drive_event){.from = from, .to = to, .kind = kind};
    if (kind == 'H') { /* target_off counts from the head's unit, which starts at or before `from` */
        d->ev[d->n_ev - 1].method_len = p->method_len;
        d->ev[d->n_ev - 1].target_len = p->target_len;
        d->ev[d->n_ev - 1].target_from = p->unit_start + p->target_off;
    }
}

static inline void h1drive_init(struct h1drive *d)
{
    memset(d, 0, sizeof(*d));
    tiled_h1_init(&d->p);
    d->p.observer = h1drive_observe;
    d->p.observer_arg = d;
}

/* Feeds s[0..limit) from where the framer stands: one call, as a receive
 * that brought the stream up to `limit`. */
static inline void h1drive_upto(struct h1drive *d, const unsigned char *s, size_t limit)
{
    if (d->p.status || d->p.pos >= limit)
        return;
    size_t at = (size_t)d->p.pos;
    tiled_h1_feed(&d->p, s + at, limit - at);
}

/* The whole stream in pieces of `step` bytes (0: in one piece). */
static inline void h1drive_steps(struct h1drive *d, const unsigned char *s, size_t n, size_t step)
{
    h1drive_init(d);
    if (step == 0)
        step = n ? n : 1;
    for (size_t limit = step < n ? step : n; !d->p.status; limit += step) {
        if (limit > n)
            limit = n;
        h1drive_upto(d, s, limit);
        if (limit == n)
            break;
    }
}

/* The whole stream, cut at the increasing offsets cuts[0..ncuts), then whole. */
static inline void h1drive_cuts(struct h1drive *d, const unsigned char *s, size_t n, const size_t *cuts, size_t ncuts)
{
    h1drive_init(d);
    for (size_t k = 0; k < ncuts && cuts[k] < n; k++)
        h1drive_upto(d, s, cuts[k]);
    h1drive_upto(d, s, n);
}

/* Two records are the same: verdict, where the framer stands, boundaries. */
static inline bool h1drive_same(const struct h1drive *a, const struct h1drive *b)
{
    if (a->p.status != b->p.status || strcmp(a->p.message, b->p.message) != 0 || a->p.pos != b->p.pos ||
        a->p.unit_start != b->p.unit_start || a->p.accepted != b->p.accepted || a->p.in_body != b->p.in_body ||
        a->n_ev != b->n_ev || a->overflow != b->overflow)
        return false;
    for (size_t k = 0; k < a->n_ev; k++) {
        if (a->ev[k].kind != b->ev[k].kind || a->ev[k].from != b->ev[k].from || a->ev[k].to != b->ev[k].to ||
            a->ev[k].method_len != b->ev[k].method_len || a->ev[k].target_len != b->ev[k].target_len ||
            a->ev[k].target_from != b->ev[k].target_from)
            return false;
    }
    return true;
}

#endif
