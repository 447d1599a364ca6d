/* client.c - the TLS client of `tiled probe https://...` (see client.h). */
#include "client.h"

#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Each wait is bounded by the socket's timeouts; an answer that keeps
 * trickling is bounded by this in all. */
#define PROBE_TOTAL_MS 5000

static long fail(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static long fail(char *why, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return -1;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* After the handshake, GnuTLS returns GNUTLS_E_AGAIN both when the
 * socket's receive timeout ran out and when it read a TLS 1.3 ticket where
 * data was wanted: the second is no end, so either is retried until the
 * deadline. */
static bool retry(int rc, int64_t deadline)
{
    return (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED) && now_ms() < deadline;
}

/* Alerts by which a server says it wants a client certificate it trusts. */
static bool wants_client_cert(gnutls_alert_description_t a)
{
    return a == GNUTLS_A_CERTIFICATE_REQUIRED || a == GNUTLS_A_BAD_CERTIFICATE || a == GNUTLS_A_UNKNOWN_CA ||
           a == GNUTLS_A_CERTIFICATE_UNKNOWN;
}

/* Why the handshake (or, in TLS 1.3, where a client certificate is judged
 * after the client's side of it ends, the first read) failed, in words the
 * caller can act on. */
static long tls_error(gnutls_session_t s, int rc, const char *cacert, bool own_cert, bool handshake, char *why,
                      size_t cap)
{
    if (rc == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
        gnutls_datum_t out = {NULL, 0};
        unsigned status = gnutls_session_get_verify_cert_status(s);
        int prc = gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0);
        const char *text = prc == 0 ? (const char *)out.data : gnutls_strerror(rc);
        int len = (int)strlen(text);
        while (len > 0 && text[len - 1] == ' ') /* GnuTLS ends each sentence with one */
            len--;
        fail(why, cap, "the server's certificate does not verify against %s: %.*s (%s, or skip the check with "
                       "--insecure)",
             cacert ? cacert : "the system's trust store", len, text,
             status & GNUTLS_CERT_UNEXPECTED_OWNER ? "probe a name or address the certificate carries"
                                                   : "give the CA that issued it with --cacert FILE");
        gnutls_free(out.data);
        return -1;
    }
    if (rc == GNUTLS_E_FATAL_ALERT_RECEIVED) {
        gnutls_alert_description_t a = gnutls_alert_get(s);
        return fail(why, cap, "the server refused the %s: %s%s", handshake ? "TLS handshake" : "connection",
                    gnutls_alert_get_name(a),
                    wants_client_cert(a) && !own_cert ? " (it asks for a client certificate: --cert FILE --key FILE)"
                                                      : "");
    }
    if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED)
        return fail(why, cap, "no answer in time %s", handshake ? "to the TLS handshake" : "over TLS");
    if (handshake && (rc == GNUTLS_E_UNEXPECTED_PACKET_LENGTH || rc == GNUTLS_E_UNSUPPORTED_VERSION_PACKET ||
                      rc == GNUTLS_E_UNEXPECTED_PACKET || rc == GNUTLS_E_PREMATURE_TERMINATION ||
                      rc == GNUTLS_E_PULL_ERROR))
        return fail(why, cap, "no TLS handshake: %s (does the port speak plain HTTP? then probe http://)",
                    gnutls_strerror(rc));
    /* After a TLS 1.3 handshake the server judges the client's certificate
     * and may close while the request is still being written: the write
     * fails (the peer reset it) or the read finds the end, which is one. */
    if (!handshake && (rc == GNUTLS_E_PREMATURE_TERMINATION || rc == GNUTLS_E_PUSH_ERROR ||
                       rc == GNUTLS_E_PULL_ERROR))
        return fail(why, cap, "the server closed the connection after the TLS handshake%s",
                    own_cert ? "" : " (a server that requires a client certificate does so: --cert FILE --key FILE)");
    return fail(why, cap, "TLS %s failed: %s", handshake ? "handshake" : "connection", gnutls_strerror(rc));
}

/* The credentials: trust anchors unless insecure, a client certificate
 * when given. */
static long credentials(gnutls_certificate_credentials_t cred, const char *cacert, bool insecure, const char *cert,
                        const char *key, char *why, size_t cap)
{
    int rc;
    if (cacert && (rc = gnutls_certificate_set_x509_trust_file(cred, cacert, GNUTLS_X509_FMT_PEM)) <= 0)
        return fail(why, cap, "--cacert %s: %s", cacert,
                    rc < 0 ? gnutls_strerror(rc) : "no PEM certificate in the file");
    /* An image without the ca-certificates package has an empty store:
     * that is said when the server's certificate then fails to verify. */
    if (!cacert && !insecure && (rc = gnutls_certificate_set_x509_system_trust(cred)) < 0)
        return fail(why, cap, "cannot load the system's trust store: %s (give --cacert FILE)", gnutls_strerror(rc));
    if ((cert != NULL) != (key != NULL))
        return fail(why, cap, "--cert and --key go together");
    if (cert && (rc = gnutls_certificate_set_x509_key_file(cred, cert, key, GNUTLS_X509_FMT_PEM)) < 0)
        return fail(why, cap, "--cert %s --key %s: %s", cert, key, gnutls_strerror(rc));
    return 0;
}

static long exchange(gnutls_session_t s, const char *cacert, bool own_cert, const char *req, size_t n, char *resp,
                     size_t cap, char *why, size_t why_cap)
{
    int64_t deadline = now_ms() + PROBE_TOTAL_MS;
    int rc;
    do /* on a blocking socket GNUTLS_E_AGAIN is its timeout: an end */
        rc = gnutls_handshake(s);
    while (rc == GNUTLS_E_INTERRUPTED);
    if (rc < 0)
        return tls_error(s, rc, cacert, own_cert, true, why, why_cap);
    for (size_t sent = 0; sent < n;) {
        ssize_t w = gnutls_record_send(s, req + sent, n - sent);
        if (w < 0 && retry((int)w, deadline))
            continue;
        if (w < 0)
            return tls_error(s, (int)w, cacert, own_cert, false, why, why_cap);
        sent += (size_t)w;
    }
    size_t got = 0;
    while (got + 1 < cap && !memchr(resp, '\n', got)) {
        ssize_t r = gnutls_record_recv(s, resp + got, cap - 1 - got);
        if (r == 0)
            break; /* the answer ended (close_notify) */
        if (r < 0 && retry((int)r, deadline))
            continue;
        if (r < 0) {
            if (got > 0) /* a server that closes without close_notify after its answer */
                break;
            return tls_error(s, (int)r, cacert, own_cert, false, why, why_cap);
        }
        got += (size_t)r;
    }
    resp[got] = '\0';
    (void)gnutls_bye(s, GNUTLS_SHUT_WR); /* the probe is done either way */
    return (long)got;
}

long tiled_tls_probe(int fd, const char *host, const char *cacert, bool insecure, const char *cert, const char *key,
                     const char *req, size_t n, char *resp, size_t cap, char *why, size_t why_cap)
{
    gnutls_certificate_credentials_t cred = NULL;
    gnutls_session_t s = NULL;
    unsigned char addr[16];
    long rc;
    if (cap == 0)
        return fail(why, why_cap, "no room for the answer");
    if ((rc = gnutls_certificate_allocate_credentials(&cred)) < 0) {
        cred = NULL;
        rc = fail(why, why_cap, "cannot allocate TLS credentials: %s", gnutls_strerror((int)rc));
        goto done;
    }
    if ((rc = credentials(cred, cacert, insecure, cert, key, why, why_cap)) < 0)
        goto done;
    if ((rc = gnutls_init(&s, GNUTLS_CLIENT | GNUTLS_NO_SIGNAL)) < 0) {
        s = NULL;
        rc = fail(why, why_cap, "cannot start a TLS session: %s", gnutls_strerror((int)rc));
        goto done;
    }
    /* SNI carries names only (RFC 6066 3): an address literal is left out. */
    bool literal = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
    if ((rc = gnutls_set_default_priority(s)) < 0 || (rc = gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, cred)) < 0 ||
        (!literal && (rc = gnutls_server_name_set(s, GNUTLS_NAME_DNS, host, strlen(host))) < 0)) {
        rc = fail(why, why_cap, "cannot set up the TLS session: %s", gnutls_strerror((int)rc));
        goto done;
    }
    if (!insecure) /* the handshake fails unless the chain and the name verify */
        gnutls_session_set_verify_cert(s, host, 0);
    gnutls_transport_set_int(s, fd);
    rc = exchange(s, cacert, cert != NULL, req, n, resp, cap, why, why_cap);
done:
    if (s)
        gnutls_deinit(s);
    if (cred)
        gnutls_certificate_free_credentials(cred);
    return rc;
}
