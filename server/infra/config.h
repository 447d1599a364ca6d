/* config.h - every daemon option, defined once.
 *
 * One table (config.c) yields each option's --flag, its TILED_* environment
 * variable, its default, its range and its --help line; --help,
 * --print-config and the configuration table of docs/operations.md all loop over it.
 * Precedence: default < environment < command line.
 */
#ifndef TILED_CONFIG_H
#define TILED_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "error.h"

enum tiled_log_format { TILED_LOG_JSON, TILED_LOG_TEXT };
enum tiled_log_level { TILED_LOG_ERROR, TILED_LOG_WARN, TILED_LOG_INFO, TILED_LOG_DEBUG };
enum tiled_shm_kind { TILED_SHM_NONE, TILED_SHM_SYSTEM };

struct tiled_config {
    char host[256];
    int64_t port;
    int64_t workers;          /* tiling worker threads; 0 = online CPUs */
    int64_t http_threads;     /* event-loop threads of each transport (HTTP, gRPC) */
    int64_t grpc_port;        /* -1 = no gRPC listener, 0 = a free port */
    int64_t max_grpc_message; /* bytes of one gRPC message, either way */
    int64_t max_grpc_conn_memory; /* request-message and unsent reply bytes one gRPC connection's calls hold */
    int64_t grpc_max_conn_age;       /* seconds (jittered) before a gRPC connection is sent GOAWAY; 0 = never */
    int64_t grpc_max_conn_age_grace; /* seconds its calls then have before it is closed; 0 = no bound */
    int64_t queue;            /* queued requests before 503 */
    int64_t max_body;         /* bytes */
    int64_t max_memory;       /* bytes all requests may hold at once; 0 = no bound */
    int64_t max_output;       /* bytes of an output, however it is sent */
    int64_t max_stream;       /* bytes of a streamed output */
    int64_t max_rank;
    int64_t max_json_depth;
    int64_t max_connections;
    int64_t idle_timeout;     /* seconds */
    int64_t header_timeout;   /* seconds to send a request head (a gRPC call: its request); 0 = off */
    int64_t drain_timeout;    /* seconds */
    int64_t stream_threshold; /* bytes above which outputs are streamed */
    int64_t body_cache;       /* bytes of free response bodies kept (bodycache.h) */
    int64_t stream_chunk;     /* bytes per streamed chunk */
    int64_t inline_max;       /* bytes of body/output handled on a transport's thread */
    int64_t log_format;       /* enum tiled_log_format */
    int64_t log_level;        /* enum tiled_log_level */
    int64_t log_flush_ms;     /* access lines off the loops gathered this long at most (0: none gathered) */
    char api_key_file[256];   /* "" = no authentication */
    char tls_cert[256];       /* PEM files; both or neither */
    char tls_key[256];
    char tls_client_ca[256];  /* PEM CA certificates clients must present one of; "" = none asked */
    char tls_priorities[256]; /* GnuTLS priority string of both ports */
    int64_t hsts_max_age;     /* seconds of Strict-Transport-Security; 0 = no header */
    int64_t shared_memory;    /* enum tiled_shm_kind */
    int64_t shm_max_regions;
    int64_t shm_max_bytes;    /* bytes mapped at once */
    char shm_key_prefix[256]; /* "" = any valid key */
    char cors_origins[256];   /* "" = no CORS; "*" or comma-separated origins */
    char otlp_endpoint[256];  /* "" = no span export (trace.h) */
};

/* Fills defaults, then TILED_* variables from `environ`, then argv flags
 * (argv[0] is the subcommand name). Returns 0, 1 when --help or
 * --print-config was handled (output written to `out`), or -1 with `e`. */
int tiled_config_load(struct tiled_config *cfg, int argc, char **argv, FILE *out, struct tile_error *e);

/* --help text and the effective configuration (`flag = value` lines). */
void tiled_config_help(FILE *out);
void tiled_config_print(const struct tiled_config *cfg, FILE *out);

/* The configuration table of docs/operations.md in Markdown. */
void tiled_config_markdown(FILE *out);

#endif
