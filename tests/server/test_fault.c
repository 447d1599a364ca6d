/* test_fault.c - the one table from error kinds to answers (reply.h's
 * tiled_fault_status): it is total, each tile_error code is its own kind,
 * each kind's HTTP status and gRPC code form a pair that Triton or gRPC
 * documents, and a reply made from a kind carries exactly that pair on
 * both transports (tiled_reply_grpc_status is what the gRPC transport
 * sends). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "reply.h"

/* Every status reply.h lists (the table must use only those: /metrics
 * counts no other). */
#define TILED_STATUS_CODE_(name, code) code,
static const int listed[] = {TILED_STATUSES(TILED_STATUS_CODE_)};
#undef TILED_STATUS_CODE_

/* The (HTTP, gRPC) pairs with their sources: Triton answers each of its error
 * codes with one HTTP status (http_server.cc HttpCodeFromError) and one
 * gRPC code (grpc_utils.cc GrpcStatusUtil::CodeToStatus); gRPC's own
 * libraries answer a message over the limit, a message they cannot read,
 * an unsupported compression and a passed deadline (statuscodes.md,
 * compression.md). */
static const struct {
    int http, grpc;
    const char *source;
} documented[] = {
    {400, TILED_GRPC_INVALID_ARGUMENT, "Triton INVALID_ARG"},
    {500, TILED_GRPC_INTERNAL, "Triton INTERNAL"},
    {503, TILED_GRPC_UNAVAILABLE, "Triton UNAVAILABLE"},
    {404, TILED_GRPC_NOT_FOUND, "Triton NOT_FOUND"},
    {501, TILED_GRPC_UNIMPLEMENTED, "Triton UNSUPPORTED"},
    /* An output the request's form cannot carry: Triton's INVALID_ARG
     * ("sending FP16 data via JSON is not supported"); HTTP names it 406. */
    {406, TILED_GRPC_INVALID_ARGUMENT, "Triton INVALID_ARG, HTTP 406 Not Acceptable"},
    {413, TILED_GRPC_RESOURCE_EXHAUSTED, "gRPC: a message over the limit; HTTP 413 Content Too Large"},
    {400, TILED_GRPC_INTERNAL, "gRPC: a request message that fails to parse"},
    {415, TILED_GRPC_UNIMPLEMENTED, "gRPC: an unsupported compression; HTTP 415 Unsupported Media Type"},
    {408, TILED_GRPC_DEADLINE_EXCEEDED, "gRPC: the deadline passed; HTTP 408 Request Timeout"},
};

static bool is_listed(int status)
{
    for (size_t i = 0; i < sizeof(listed) / sizeof(listed[0]); i++) {
        if (listed[i] == status)
            return true;
    }
    return false;
}

static void every_kind_has_an_answer(void **state)
{
    (void)state;
    for (int f = 0; f < TILED_FAULT_COUNT; f++) {
        const struct tiled_fault_status *s = &tiled_fault_status[f];
        if (!(s->http >= 400 && s->http <= 599 && is_listed(s->http)))
            fail_msg("kind %d has HTTP status %d, not an error status reply.h lists", f, s->http);
        if (!(s->grpc > TILED_GRPC_OK && s->grpc <= TILED_GRPC_UNAUTHENTICATED))
            fail_msg("kind %d has gRPC code %d, not an error code", f, s->grpc);
    }
}

static void every_pair_is_documented(void **state)
{
    (void)state;
    for (int f = 0; f < TILED_FAULT_COUNT; f++) {
        const struct tiled_fault_status *s = &tiled_fault_status[f];
        bool found = false;
        for (size_t i = 0; i < sizeof(documented) / sizeof(documented[0]) && !found; i++)
            found = documented[i].http == s->http && documented[i].grpc == s->grpc;
        if (!found)
            fail_msg("kind %d answers HTTP %d with gRPC %d, a pair neither Triton nor gRPC documents", f, s->http,
                     s->grpc);
    }
}

/* The answers the tests of both transports pin (test_bad_input,
 * test_v2_protocol, test_shared_memory, test_grpc*). */
static void the_kinds_answer_as_before(void **state)
{
    (void)state;
    static const struct {
        enum tiled_fault f;
        int http, grpc;
    } want[] = {
        {TILED_FAULT_UNSET, 500, TILED_GRPC_INTERNAL},
        {TILED_FAULT_INVALID, 400, TILED_GRPC_INVALID_ARGUMENT},
        {TILED_FAULT_TOO_BIG, 413, TILED_GRPC_RESOURCE_EXHAUSTED},
        {TILED_FAULT_UNAVAILABLE, 503, TILED_GRPC_UNAVAILABLE},
        {TILED_FAULT_IO, 500, TILED_GRPC_INTERNAL},
        {TILED_FAULT_UNSUPPORTED, 400, TILED_GRPC_INVALID_ARGUMENT},
        {TILED_FAULT_NOT_ACCEPTABLE, 406, TILED_GRPC_INVALID_ARGUMENT},
        {TILED_FAULT_GRPC_WIRE, 400, TILED_GRPC_INTERNAL},
        {TILED_FAULT_CODING, 415, TILED_GRPC_UNIMPLEMENTED},
        {TILED_FAULT_TIMEOUT, 408, TILED_GRPC_DEADLINE_EXCEEDED},
    };
    assert_int_equal(sizeof(want) / sizeof(want[0]), TILED_FAULT_COUNT);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_int_equal(tiled_fault_status[want[i].f].http, want[i].http);
        assert_int_equal(tiled_fault_status[want[i].f].grpc, want[i].grpc);
    }
}

static void a_tile_error_code_is_its_kind(void **state)
{
    (void)state;
    for (int c = 0; c < TILE_ERRCODE_COUNT; c++) {
        struct tile_error e = {.code = (enum tile_errcode)c};
        assert_int_equal(tiled_fault_of(&e), c);
    }
    struct tile_error unknown = {.code = (enum tile_errcode)TILE_ERRCODE_COUNT};
    assert_int_equal(tiled_fault_of(&unknown), TILED_FAULT_UNSET);
    /* A gRPC message not read: too big and out of memory keep their kind,
     * the rest is the wire's. */
    struct tile_error big = {.code = TILE_ETOOBIG}, oom = {.code = TILE_ENOMEM}, flag = {.code = TILE_EUNSUPPORTED},
                      bad = {.code = TILE_EINVAL};
    assert_int_equal(tiled_fault_of_message(&big), TILED_FAULT_TOO_BIG);
    assert_int_equal(tiled_fault_of_message(&oom), TILED_FAULT_UNAVAILABLE);
    assert_int_equal(tiled_fault_of_message(&flag), TILED_FAULT_GRPC_WIRE);
    assert_int_equal(tiled_fault_of_message(&bad), TILED_FAULT_GRPC_WIRE);
}

/* A reply made from each kind, or from a tile_error of each code, is sent
 * with the table's HTTP status and gRPC code and says what went wrong. */
static void a_reply_carries_the_pair(void **state)
{
    (void)state;
    for (int f = 0; f < TILED_FAULT_COUNT; f++) {
        struct tiled_reply r = {0};
        tiled_reply_fault(&r, (enum tiled_fault)f, "kind %d", f);
        assert_int_equal(r.status, tiled_fault_status[f].http);
        assert_int_equal(tiled_reply_grpc_status(&r), tiled_fault_status[f].grpc);
        char want[32];
        snprintf(want, sizeof(want), "kind %d", f);
        assert_string_equal(r.message, want);
        assert_non_null(strstr(r.body, want));
        tiled_reply_free(&r);
    }
    for (int c = 0; c < TILE_ERRCODE_COUNT; c++) {
        struct tiled_reply r = {0};
        struct tile_error e = {0};
        tile_error_set(&e, (enum tile_errcode)c, "code %d", c);
        e.code = (enum tile_errcode)c; /* TILE_OK too */
        tiled_reply_tile_error(&r, &e);
        assert_int_equal(r.status, tiled_fault_status[c].http);
        assert_int_equal(tiled_reply_grpc_status(&r), tiled_fault_status[c].grpc);
        tiled_reply_free(&r);
    }
    /* A reply that had a gRPC code of its own gets the new kind's. */
    struct tiled_reply r = {0};
    tiled_reply_fault(&r, TILED_FAULT_CODING, "first");
    tiled_reply_fault(&r, TILED_FAULT_INVALID, "second");
    assert_int_equal(r.status, 400);
    assert_int_equal(tiled_reply_grpc_status(&r), TILED_GRPC_INVALID_ARGUMENT);
    tiled_reply_free(&r);
}

/* A reply's headers: one per name, a name set again (in any case)
 * replaces its value, and the table holds as many names as reply.h
 * promises; Vary is a set of its own (test_caching.c). */
static void a_reply_keeps_one_header_per_name(void **state)
{
    (void)state;
    struct tiled_reply r;
    memset(&r, 0, sizeof(r));
    tiled_reply_header(&r, "Retry-After", "1");
    tiled_reply_header(&r, "retry-after", "2");
    tiled_reply_header(&r, "Cache-Control", "no-store");
    assert_int_equal(r.nheaders, 2);
    assert_string_equal(r.headers[0][0], "Retry-After");
    assert_string_equal(r.headers[0][1], "2");
    assert_string_equal(r.headers[1][1], "no-store");
    char name[32];
    for (int k = 2; k < TILED_REPLY_HEADERS; k++) {
        snprintf(name, sizeof(name), "X-Name-%d", k);
        tiled_reply_header(&r, name, "v");
    }
    assert_int_equal(r.nheaders, TILED_REPLY_HEADERS);
    tiled_reply_header(&r, "X-Name-2", "again"); /* full, but the name is there: replaced */
    assert_string_equal(r.headers[2][1], "again");
    tiled_reply_free(&r);
    assert_int_equal(r.nheaders, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_kind_has_an_answer),     cmocka_unit_test(every_pair_is_documented),
        cmocka_unit_test(the_kinds_answer_as_before),   cmocka_unit_test(a_tile_error_code_is_its_kind),
        cmocka_unit_test(a_reply_carries_the_pair),        cmocka_unit_test(a_reply_keeps_one_header_per_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
