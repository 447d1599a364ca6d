/* pgo_train.c - the training load of the daemon's profile-guided build
 * (scripts/pgo-train.sh, the Makefile's PGO): the requests whose profile
 * the request path is compiled with.
 *
 *   pgo_train PORT [ROUNDS]
 *
 * The small request of each kind the service is measured with (JSON, raw
 * and .npy /v1, v2 JSON: bench/peers/run.py's), v2 with binary tensors
 * (tritonclient's default), other dtypes, a larger tile, the reads a
 * deployment makes (health, metadata, /metrics) and refusals (a body that
 * is not JSON, an unknown route), over CONNS kept-alive connections: each
 * round sends one request on every connection, then reads the answers, so
 * the event loop also sees several ready connections a turn. Every answer's
 * status is checked: a daemon that answers wrongly fails the build rather
 * than teach it a wrong profile. Exit status 0 when every answer was as
 * expected.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define CONNS 4

struct req {
    const char *what;
    const char *method, *target, *ctype, *extra; /* extra: more header lines, each ending in \r\n */
    const char *body;
    size_t body_len;
    int status;   /* the status it must get */
    int weight;   /* sent this many times a round on each connection; -N: once every N rounds */
};

/* v2 with binary tensors: the JSON, then the input's 16 bytes (main
 * builds the body and its Inference-Header-Content-Length). */
static const char v2_binary_json[] =
    "{\"inputs\":[{\"name\":\"input\",\"shape\":[2,2],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":16}},"
    "{\"name\":\"repeats\",\"shape\":[2],\"datatype\":\"INT64\",\"data\":[2,2]}],"
    "\"outputs\":[{\"name\":\"output\",\"parameters\":{\"binary_data\":true}}]}";
static char v2_binary[sizeof(v2_binary_json) - 1 + 16];
static char v2_binary_extra[64];

static const char npy_small[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }"
                                "                                                          \n"
                                "\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40";

static const char raw_small[] = "\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40";

#define S(s) s, sizeof(s) - 1

static struct req reqs[] = {
    {"json", "POST", "/v1/tile", "application/json", "",
     S("{\"input\":{\"dtype\":\"float32\",\"shape\":[2,2],\"data\":[1,2,3,4]},\"repeats\":[2,2]}"), 200, 16},
    {"raw", "POST", "/v1/tile?dtype=float32&shape=2,2&repeats=2,2", "application/octet-stream", "", S(raw_small), 200,
     16},
    {"npy", "POST", "/v1/tile?repeats=2,2", "application/x-npy", "", S(npy_small), 200, 16},
    {"v2", "POST", "/v2/models/tile/infer", "application/json", "",
     S("{\"inputs\":[{\"name\":\"input\",\"shape\":[2,2],\"datatype\":\"FP32\",\"data\":[1,2,3,4]},"
       "{\"name\":\"repeats\",\"shape\":[2],\"datatype\":\"INT64\",\"data\":[2,2]}]}"),
     200, 16},
    {"v2 binary", "POST", "/v2/models/tile/infer", "application/octet-stream",
     v2_binary_extra, v2_binary, sizeof(v2_binary), 200, 8},
    {"json int64", "POST", "/v1/tile", "application/json", "",
     S("{\"input\":{\"dtype\":\"int64\",\"shape\":[3],\"data\":[-1,0,9007199254740993]},\"repeats\":[5]}"), 200, 2},
    {"json string", "POST", "/v1/tile", "application/json", "",
     S("{\"input\":{\"dtype\":\"string\",\"shape\":[2],\"data\":[\"a\",\"b\\u00e9\"]},\"repeats\":[3]}"), 200, 2},
    {"v2 uint8", "POST", "/v2/models/tile/versions/13/infer", "application/json", "",
     S("{\"id\":\"t\",\"inputs\":[{\"name\":\"input\",\"shape\":[3],\"datatype\":\"UINT8\",\"data\":[1,2,3]},"
       "{\"name\":\"repeats\",\"shape\":[1],\"datatype\":\"INT64\",\"data\":[4]}]}"),
     200, 1},
    {"raw larger", "POST", "/v1/tile?dtype=uint8&shape=4096&repeats=16", "application/octet-stream", "", NULL, 4096,
     200, 1},
    {"ready", "GET", "/v2/health/ready", NULL, "", NULL, 0, 200, 1},
    {"metadata", "GET", "/v2/models/tile", NULL, "", NULL, 0, 200, 1},
    {"metrics", "GET", "/metrics", NULL, "", NULL, 0, 200, -25},
    {"not JSON", "POST", "/v1/tile", "application/json", "", S("{\"input\":"), 400, 1},
    {"no route", "GET", "/nowhere", NULL, "", NULL, 0, 404, 1},
};

static char zeros[4096];

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int send_req(int fd, const struct req *r)
{
    char head[512];
    const char *body = r->body ? r->body : zeros;
    int n = snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: pgo-train\r\n%s%s%s%s",
                     r->method, r->target, r->ctype ? "Content-Type: " : "", r->ctype ? r->ctype : "",
                     r->ctype ? "\r\n" : "", r->extra);
    if (r->body_len || strcmp(r->method, "POST") == 0)
        n += snprintf(head + n, sizeof(head) - (size_t)n, "Content-Length: %zu\r\n", r->body_len);
    n += snprintf(head + n, sizeof(head) - (size_t)n, "\r\n");
    return send_all(fd, head, (size_t)n) < 0 || send_all(fd, body, r->body_len) < 0 ? -1 : 0;
}

/* Reads one answer (a head with Content-Length, then that many bytes);
 * its status, or -1. */
static char buf[1 << 17];

static int read_answer(int fd)
{
    size_t len = 0;
    char *end = NULL;
    while (!end) {
        if (len == sizeof(buf) - 1)
            return -1;
        ssize_t r = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        len += (size_t)r;
        buf[len] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    int status = 0;
    if (sscanf(buf, "HTTP/1.1 %d", &status) != 1)
        return -1;
    const char *cl = strcasestr(buf, "\r\nContent-Length:");
    if (!cl || cl > end)
        return -1; /* every answer here has a length */
    size_t want = strtoul(cl + 17, NULL, 10), have = len - (size_t)(end + 4 - buf);
    while (have < want) {
        ssize_t r = recv(fd, buf, sizeof(buf) - 1 < want - have ? sizeof(buf) - 1 : want - have, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        have += (size_t)r;
    }
    return have == want ? status : -1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: pgo_train PORT [ROUNDS]\n");
        return 2;
    }
    int port = atoi(argv[1]), rounds = argc > 2 ? atoi(argv[2]) : 500;
    memcpy(v2_binary, v2_binary_json, sizeof(v2_binary_json) - 1);
    memcpy(v2_binary + sizeof(v2_binary_json) - 1, raw_small, 16);
    snprintf(v2_binary_extra, sizeof(v2_binary_extra), "Inference-Header-Content-Length: %zu\r\n",
             sizeof(v2_binary_json) - 1);
    int fds[CONNS];
    for (int i = 0; i < CONNS; i++) {
        if ((fds[i] = connect_to(port)) < 0) {
            fprintf(stderr, "pgo_train: cannot connect to 127.0.0.1:%d: %s\n", port, strerror(errno));
            return 1;
        }
    }
    unsigned long sent = 0;
    for (int k = 0; k < rounds; k++) {
        for (size_t q = 0; q < sizeof(reqs) / sizeof(reqs[0]); q++) {
            const struct req *r = &reqs[q];
            int times = r->weight >= 0 ? r->weight : k % -r->weight == 0;
            for (int w = 0; w < times; w++) {
                for (int i = 0; i < CONNS; i++) {
                    if (send_req(fds[i], r) < 0) {
                        fprintf(stderr, "pgo_train: %s: cannot send\n", r->what);
                        return 1;
                    }
                }
                for (int i = 0; i < CONNS; i++) {
                    int st = read_answer(fds[i]);
                    if (st != r->status) {
                        fprintf(stderr, "pgo_train: %s: status %d, expected %d: %.300s\n", r->what, st, r->status,
                                buf);
                        return 1;
                    }
                }
                sent += CONNS;
            }
        }
    }
    for (int i = 0; i < CONNS; i++)
        close(fds[i]);
    printf("pgo_train: %lu requests, every answer as expected\n", sent);
    return 0;
}
