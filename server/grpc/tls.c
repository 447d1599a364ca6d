/* tls.c - TLS for the gRPC transport with GnuTLS, the library
 * libmicrohttpd already links for HTTPS: the same --tls-cert/--tls-key,
 * and ALPN "h2", which gRPC clients require over TLS.
 */
#include <errno.h>
#include <gnutls/gnutls.h>
#include <stdlib.h>
#include <string.h>

#include "h2.h"

struct tiled_grpc_tls {
    gnutls_certificate_credentials_t cred;
    gnutls_priority_t priority;
};

struct tiled_grpc_tls_conn {
    gnutls_session_t s;
};

struct tiled_grpc_tls *grpc_tls_new(const char *cert_pem, const char *key_pem, struct tile_error *e)
{
    struct tiled_grpc_tls *tls = calloc(1, sizeof(*tls));
    if (!tls) {
        tile_error_set(e, TILE_ENOMEM, "cannot allocate the gRPC TLS state");
        return NULL;
    }
    gnutls_datum_t cert = {(unsigned char *)cert_pem, (unsigned)strlen(cert_pem)};
    gnutls_datum_t key = {(unsigned char *)key_pem, (unsigned)strlen(key_pem)};
    int rc = gnutls_certificate_allocate_credentials(&tls->cred);
    if (rc >= 0)
        rc = gnutls_certificate_set_x509_key_mem(tls->cred, &cert, &key, GNUTLS_X509_FMT_PEM);
    if (rc >= 0)
        rc = gnutls_priority_init(&tls->priority, NULL, NULL); /* the system's defaults */
    if (rc < 0) {
        tile_error_set(e, TILE_EINVAL, "gRPC TLS: cannot use --tls-cert/--tls-key: %s", gnutls_strerror(rc));
        grpc_tls_free(tls);
        return NULL;
    }
    return tls;
}

void grpc_tls_free(struct tiled_grpc_tls *tls)
{
    if (!tls)
        return;
    if (tls->priority)
        gnutls_priority_deinit(tls->priority);
    if (tls->cred)
        gnutls_certificate_free_credentials(tls->cred);
    free(tls);
}

struct tiled_grpc_tls_conn *grpc_tls_conn_new(struct tiled_grpc_tls *tls, int fd)
{
    static const gnutls_datum_t h2 = {(unsigned char *)"h2", 2};
    struct tiled_grpc_tls_conn *tc = calloc(1, sizeof(*tc));
    if (!tc)
        return NULL;
    if (gnutls_init(&tc->s, GNUTLS_SERVER | GNUTLS_NONBLOCK) < 0) {
        free(tc);
        return NULL;
    }
    if (gnutls_priority_set(tc->s, tls->priority) < 0 ||
        gnutls_credentials_set(tc->s, GNUTLS_CRD_CERTIFICATE, tls->cred) < 0 ||
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
    free(tc);
}

int grpc_tls_handshake(struct tiled_grpc_tls_conn *tc, bool *want_write)
{
    int rc = gnutls_handshake(tc->s);
    if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED) {
        *want_write = gnutls_record_get_direction(tc->s) == 1;
        return 0;
    }
    if (rc < 0)
        return -1;
    /* A client that offered ALPN without h2 was refused by GnuTLS (no
     * common protocol); one that offered none speaks HTTP/2 by prior
     * knowledge, which this server takes. */
    gnutls_datum_t proto;
    if (gnutls_alpn_get_selected_protocol(tc->s, &proto) == 0 && (proto.size != 2 || memcmp(proto.data, "h2", 2) != 0))
        return -1;
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
    return -2;
}

bool grpc_tls_pending(struct tiled_grpc_tls_conn *tc)
{
    return gnutls_record_check_pending(tc->s) > 0;
}
