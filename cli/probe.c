/* probe.c - `tiled probe URL`: a health check with no other tool needed.
 *
 * Container HEALTHCHECKs and scripts call the binary itself, so images need
 * no curl. It sends one GET to an http://HOST:PORT/PATH URL (IPv4 literal
 * or a resolvable name) and exits 0 on a 2xx status, 1 otherwise, within a
 * timeout.
 */
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli.h"

#define PROBE_TIMEOUT_MS 3000

static int parse_url(const char *url, char *host, size_t hcap, char *port, size_t pcap, const char **path)
{
    if (strncmp(url, "http://", 7) != 0)
        return -1;
    const char *h = url + 7, *end = h + strcspn(h, ":/");
    if (end == h || (size_t)(end - h) >= hcap)
        return -1;
    memcpy(host, h, (size_t)(end - h));
    host[end - h] = '\0';
    const char *p = "80";
    size_t plen = 2;
    if (*end == ':') {
        p = end + 1;
        plen = strcspn(p, "/");
        end = p + plen;
    }
    if (plen == 0 || plen >= pcap)
        return -1;
    memcpy(port, p, plen);
    port[plen] = '\0';
    *path = *end ? end : "/";
    return 0;
}

static int wait_fd(int fd, short events)
{
    struct pollfd pfd = {fd, events, 0};
    return poll(&pfd, 1, PROBE_TIMEOUT_MS) == 1 ? 0 : -1;
}

static int probe(const char *url)
{
    char host[256], port[16], req[1024], resp[64];
    const char *path;
    if (parse_url(url, host, sizeof(host), port, sizeof(port), &path) < 0) {
        fprintf(stderr, "tiled probe: '%s' is not an http://HOST:PORT/PATH URL\n", url);
        return 2;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, port, &hints, &ai) != 0) {
        fprintf(stderr, "tiled probe: cannot resolve %s\n", host);
        return 1;
    }
    int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    int ok = fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
    freeaddrinfo(ai);
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, host);
    ok = ok && n > 0 && (size_t)n < sizeof(req) && wait_fd(fd, POLLOUT) == 0 && write(fd, req, (size_t)n) == n;
    ssize_t got = ok && wait_fd(fd, POLLIN) == 0 ? read(fd, resp, sizeof(resp) - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (got < 12) {
        fprintf(stderr, "tiled probe: no answer from %s\n", url);
        return 1;
    }
    resp[got] = '\0';
    int status = (int)strtol(resp + 9, NULL, 10); /* "HTTP/1.1 200" */
    printf("%d\n", status);
    return status >= 200 && status < 300 ? 0 : 1;
}

int tiled_cli_probe(int argc, char **argv)
{
    if (argc != 2 || strcmp(argv[1], "--help") == 0) {
        fprintf(argc == 2 ? stdout : stderr, "usage: tiled probe http://HOST:PORT/PATH\n");
        return argc == 2 ? 0 : 2;
    }
    return probe(argv[1]);
}
