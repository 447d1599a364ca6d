/* fake_transport.h - a transport without a socket for the service's unit
 * tests: a header list, a query lent to the requests as HTTP's is, and
 * suspend/resume hooks that record what the
 * service asked for, driving requests through service.h exactly as a real
 * transport does (route, body, dispatch, wait for the worker). */
#ifndef TILED_TESTS_FAKE_TRANSPORT_H
#define TILED_TESTS_FAKE_TRANSPORT_H

#include <pthread.h>
#include <stddef.h>

#include "route.h"
#include "server.h"
#include "service.h"

struct fake_conn {
    const char *headers[8][2];
    int nheaders;
    struct tiled_kv query[TILED_QUERY_MAX];
    int nquery;
    bool query_overflow;
    pthread_mutex_t lock;
    pthread_cond_t woken;
    int suspends, resumes;
};

extern const struct tiled_conn_ops fake_ops;

void fake_conn_init(struct fake_conn *c);
void fake_conn_header(struct fake_conn *c, const char *name, const char *value);
/* A query parameter (more than TILED_QUERY_MAX: the query overflows). */
void fake_conn_query(struct fake_conn *c, const char *key, const char *value);
const char *fake_header(void *conn, enum tiled_field f);

/* Takes a request (`len` body bytes; body NULL: none) through the service
 * as a transport does; returns it with its reply (a parked request is
 * waited for). */
struct tiled_req *fake_exchange(struct tiled_server *srv, struct fake_conn *c, enum tiled_transport transport,
                                const char *method, const char *path, const void *body, size_t len);

/* The server of the tests, made by fake_setup (cmocka's group setup):
 * default options with two workers, a pool and a body cache. */
extern struct tiled_server fake_srv;
int fake_setup(void **state);
int fake_teardown(void **state);

#endif
