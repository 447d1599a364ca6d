/* tls_conn.c - TLS sessions of the gRPC transport with GnuTLS, the library
 * libmicrohttpd already links for HTTPS. The policy and the certificate
 * are the daemon's (server/tls/tls.h): the same --tls-cert/--tls-key and
 * --tls-priorities as HTTPS, in the form HTTP/2 allows (TLS 1.2 or later,
 * none of RFC 9113 Appendix A's suites), with ALPN "h2", which gRPC
 * clients require over TLS.
 */
#include <errno.h>
#include <gnutls/gnutls.h>
#include <stdlib.h>
#include <string.h>

#include "h2.h"
#include "log.h"
#include "tls.h"

struct tiled_grpc_tls_conn {
    gnutls_session_t s;
    struct tiled_tls *tls;
    int fd;
    bool established; /* the handshake is done: a close says close_notify */
};

struct tiled_grpc_tls_conn *grpc_tls_conn_new(struct tiled_tls *tls, int fd)
{
    static const gnutls_datum_t h2 = {(unsigned char *)"h2", 2};
    struct tiled_grpc_tls_conn *tc = calloc(1, sizeof(*tc));
    if (!tc)
        return NULL;
    tc->tls = tls;
    tc->fd = fd;
    if (gnutls_init(&tc->s, GNUTLS_SERVER | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL) < 0) {
        free(tc);
        return NULL;
    }
    if (tiled_tls_session_start(tls, tc->s, fd, true) < 0 ||
        gnutls_alpn_set_protocols(tc->s, &h2, 1, GNUTLS_ALPN_SERVER_PRECEDENCE) < 0) {
        grpc_tls_conn_free(tc);
        return NULL;
    }
    gnutls_transport_set_int(tc->s, fd);
    return tc;
}

void grpc_tls_conn_free(struct tiled_grpc_tls_conn *tc)
{
    if (!tc)
        return;
    gnutls_deinit(tc->s);
    tiled_tls_session_end(tc->tls, tc->fd);
    free(tc);
}

int grpc_tls_handshake(struct tiled_grpc_tls_conn *tc, bool *want_write)
{
    int rc = gnutls_handshake(tc->s);
    if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED) {
        *want_write = gnutls_record_get_direction(tc->s) == 1;
        return 0;
    }
    if (rc < 0) {
        /* The alert that says why (a missing or untrusted client
         * certificate, a suite or version in common with none), one try on
         * the non-blocking socket: the connection ends either way. */
        (void)gnutls_alert_send_appropriate(tc->s, rc);
        return -1;
    }
    /* A client that offered ALPN without h2 was refused by GnuTLS (no
     * common protocol); one that offered none speaks HTTP/2 by prior
     * knowledge, which this server takes. The policy already keeps HTTP/2
     * to what RFC 9113 9.2 allows; a resumed session is checked again. */
    gnutls_datum_t proto;
    if (gnutls_alpn_get_selected_protocol(tc->s, &proto) == 0 && (proto.size != 2 || memcmp(proto.data, "h2", 2) != 0))
        return -1;
    if (!tiled_tls_h2_acceptable(tc->s)) {
        gnutls_alert_send(tc->s, GNUTLS_AL_FATAL, GNUTLS_A_INSUFFICIENT_SECURITY);
        return -1;
    }
    tc->established = true;
    return 1;
}

long grpc_tls_recv(struct tiled_grpc_tls_conn *tc, uint8_t *buf, size_t cap)
{
    ssize_t n = gnutls_record_recv(tc->s, buf, cap);
    if (n >= 0)
        return n;
    if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) {
        errno = EAGAIN;
        return -1;
    }
    if (n == GNUTLS_E_REHANDSHAKE) {
        /* A client-initiated renegotiation (TLS 1.2): refused, never
         * begun. GnuTLS answers it with a no_renegotiation warning (RFC
         * 5246 7.2.2), one try. The connection then ends: GnuTLS keeps the
         * ClientHello queued, and the next read would fail on it. */
        (void)gnutls_alert_send_appropriate(tc->s, (int)n);
        tiled_log_event(TILED_LOG_INFO, "tls_renegotiation_refused", "{s:s}", "transport", "grpc");
    }
    tc->established = false; /* a failed session sends nothing more */
    return -2;
}

long grpc_tls_send(struct tiled_grpc_tls_conn *tc, const uint8_t *p, size_t n, bool again)
{
    /* GnuTLS keeps the record it could not send; a repeat passes nothing. */
    ssize_t r = again ? gnutls_record_send(tc->s, NULL, 0) : gnutls_record_send(tc->s, p, n);
    if (r >= 0)
        return r;
    if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) {
        errno = EAGAIN;
        return -1;
    }
    tc->established = false;
    return -2;
}

bool grpc_tls_pending(struct tiled_grpc_tls_conn *tc)
{
    return gnutls_record_check_pending(tc->s) > 0;
}

void grpc_tls_bye(struct tiled_grpc_tls_conn *tc)
{
    /* One try on the non-blocking socket: the alert is a few dozen bytes,
     * and a client that reads nothing more does not hold the close up. */
    if (tc && tc->established)
        (void)gnutls_bye(tc->s, GNUTLS_SHUT_WR);
    if (tc)
        tc->established = false;
}
