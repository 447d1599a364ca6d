/* test_cors.c - the Origin check and the CORS headers (cors.h, and the
 * service's answer to a refused origin, cors_reply.h): origins
 * compare by scheme, host and port (case-insensitive, default ports filled
 * in, IPv6 literals by address), the request's own origin is the listener's
 * scheme with the Host header, "null" is nobody's, the --cors-origins list is
 * checked at start, and the answer headers while CORS is on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cors.h"
#include "cors_reply.h"

static void own_origin_is_scheme_host_and_port(void **state)
{
    (void)state;
    assert_true(tiled_cors_same_origin("http://127.0.0.1:8080", "127.0.0.1:8080", false));
    assert_false(tiled_cors_same_origin("http://127.0.0.1:8081", "127.0.0.1:8080", false));
    assert_false(tiled_cors_same_origin("http://localhost:8080", "127.0.0.1:8080", false));
    /* The listener's scheme: https only with TLS. */
    assert_false(tiled_cors_same_origin("https://127.0.0.1:8080", "127.0.0.1:8080", false));
    assert_true(tiled_cors_same_origin("https://127.0.0.1:8443", "127.0.0.1:8443", true));
    assert_false(tiled_cors_same_origin("http://127.0.0.1:8443", "127.0.0.1:8443", true));
    /* No Host, no Origin: nothing to be the same as. */
    assert_false(tiled_cors_same_origin("http://h", NULL, false));
    assert_false(tiled_cors_same_origin(NULL, "h", false));
}

static void default_ports_and_case(void **state)
{
    (void)state;
    assert_true(tiled_cors_same_origin("http://h:80", "h", false));
    assert_true(tiled_cors_same_origin("http://h", "h:80", false));
    assert_true(tiled_cors_same_origin("http://h", "h:", false)); /* an empty port is the default */
    assert_true(tiled_cors_same_origin("https://h:443", "h", true));
    assert_true(tiled_cors_same_origin("https://h", "h:443", true));
    assert_false(tiled_cors_same_origin("http://h:443", "h", true));
    assert_false(tiled_cors_same_origin("http://h", "h:8080", false));
    assert_true(tiled_cors_same_origin("HTTP://App.Example:80", "app.example", false));
    assert_true(tiled_cors_same_origin("hTTpS://APP.example", "App.Example:443", true));
    assert_true(tiled_cors_same_origin("http://h:0080", "h", false));
}

static void ipv6_literals(void **state)
{
    (void)state;
    assert_true(tiled_cors_same_origin("http://[::1]:8080", "[::1]:8080", false));
    assert_true(tiled_cors_same_origin("http://[0:0::1]:8080", "[::1]:8080", false));
    assert_true(tiled_cors_same_origin("http://[2001:DB8::A]", "[2001:db8::a]:80", false));
    assert_false(tiled_cors_same_origin("http://[::2]:8080", "[::1]:8080", false));
    assert_false(tiled_cors_same_origin("http://[::1]:8080", "[::1]:8081", false));
    assert_false(tiled_cors_same_origin("http://[::1", "[::1]", false));
    assert_false(tiled_cors_same_origin("http://[::1]x", "[::1]", false));
}

static void not_origins(void **state)
{
    (void)state;
    const char *bad[] = {"null", "", "h", "http:/h", "http://", "http://h/", "http://h:80/", "http://u@h",
                         "http://h:65536", "http://h:8x", "://h", "1http://h", "http://h?x", "http://h#x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_false(tiled_cors_same_origin(bad[i], "h", false));
        assert_false(tiled_cors_allows("http://h, https://h", bad[i]));
    }
    assert_true(tiled_cors_same_origin("http://h:65535", "h:65535", false));
}

static void the_list(void **state)
{
    (void)state;
    const char *list = "https://app.example, http://localhost:3000,http://[::1]:9000";
    assert_true(tiled_cors_allows(list, "https://app.example"));
    assert_true(tiled_cors_allows(list, "https://APP.example:443"));
    assert_true(tiled_cors_allows(list, "http://localhost:3000"));
    assert_true(tiled_cors_allows(list, "http://[0::1]:9000"));
    assert_false(tiled_cors_allows(list, "http://app.example"));
    assert_false(tiled_cors_allows(list, "https://app.example.evil"));
    assert_false(tiled_cors_allows(list, "https://app.exampl"));
    assert_false(tiled_cors_allows(list, "http://localhost:30000"));
    assert_false(tiled_cors_allows(list, NULL));
    assert_false(tiled_cors_allows("", "https://app.example"));
    /* "*" lets in any page, "null" among them, but not a missing Origin. */
    assert_true(tiled_cors_allows("*", "https://any.example"));
    assert_true(tiled_cors_allows("https://a.example, *", "null"));
    assert_false(tiled_cors_allows("*", ""));
    assert_false(tiled_cors_allows("*", NULL));
}

static void the_list_is_checked(void **state)
{
    (void)state;
    struct tile_error e = {0};
    assert_int_equal(tiled_cors_check("", NULL), 0);
    assert_int_equal(tiled_cors_check("*", NULL), 0);
    assert_int_equal(tiled_cors_check("https://a.example, http://b.example:8080 ,http://[::1]", NULL), 0);
    assert_int_equal(tiled_cors_check("https://a.example, https://b.example/", &e), -1);
    assert_non_null(strstr(e.text, "'https://b.example/'"));
    assert_int_equal(tiled_cors_check("null", NULL), -1);
    assert_int_equal(tiled_cors_check("app.example", NULL), -1);
}

static void refusal(void **state)
{
    (void)state;
    struct tiled_reply r = {0};
    /* No Origin (curl, SDKs), its own, a listed one: let through. */
    assert_false(tiled_cors_refuse(&r, "", NULL, "h:1", false));
    assert_false(tiled_cors_refuse(&r, "", "http://h:1", "h:1", false));
    assert_false(tiled_cors_refuse(&r, "https://a.example", "https://a.example", "h:1", false));
    assert_int_equal(r.status, 0);
    /* Another, or "null": 403, and Vary says why when CORS is off. */
    assert_true(tiled_cors_refuse(&r, "", "null", "h:1", false));
    assert_int_equal(r.status, TILED_FORBIDDEN);
    assert_non_null(strstr(r.body, "origin 'null'"));
    assert_int_equal(r.nheaders, 0);
    assert_int_equal(r.vary, TILED_VARY_ORIGIN);
    tiled_reply_free(&r);
    r.status = 0;
    assert_true(tiled_cors_refuse(&r, "https://a.example", "https://b.example", "h:1", false));
    assert_int_equal(r.status, TILED_FORBIDDEN);
    assert_int_equal(r.vary, 0); /* with CORS on, every answer carries Vary */
    tiled_reply_free(&r);
    r.status = 0;
}

static const char *header(const char *const *h, const char *name)
{
    for (; h && h[0]; h += 2) {
        if (strcmp(h[0], name) == 0)
            return h[1];
    }
    return NULL;
}

static void answer_headers(void **state)
{
    (void)state;
    assert_null(tiled_cors_answer_headers("", "https://a.example"));
    const char *const *h = tiled_cors_answer_headers("https://a.example", NULL);
    assert_string_equal(header(h, "Vary"), "Origin");
    assert_null(header(h, "Access-Control-Allow-Origin"));
    h = tiled_cors_answer_headers("https://a.example", "https://a.example");
    assert_string_equal(header(h, "Vary"), "Origin");
    assert_string_equal(header(h, "Access-Control-Allow-Origin"), "https://a.example");
    assert_string_equal(header(h, "Timing-Allow-Origin"), "https://a.example");
    assert_non_null(strstr(header(h, "Access-Control-Expose-Headers"), "WWW-Authenticate"));
    assert_non_null(strstr(header(h, "Access-Control-Expose-Headers"), "Server-Timing"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(own_origin_is_scheme_host_and_port),
        cmocka_unit_test(default_ports_and_case),
        cmocka_unit_test(ipv6_literals),
        cmocka_unit_test(not_origins),
        cmocka_unit_test(the_list),
        cmocka_unit_test(the_list_is_checked),
        cmocka_unit_test(refusal),
        cmocka_unit_test(answer_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
