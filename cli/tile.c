/* tile.c - `tiled tile`: tile a .npy file offline (see cli.h).
 *
 * DESIGN. The CLI is the /v1 .npy path without HTTP: its options are the
 * query parameters of the same name, applied by tile_request_query_param(),
 * so values are parsed and checked exactly as the server does; the input is
 * decoded by tile_v1_npy_decode(), tiled by tile_run() and written with
 * tile_npy_write_file(), keeping the input's string kind and width (every
 * output string is an input string, so the input's width always fits).
 * A file is read whole into memory: a CLI has no one else to protect.
 * Usage errors are found before any file is opened.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "npy.h"
#include "request.h"

#define CLI_MAX_THREADS 4096
#define CLI_READ_START (64u << 10)

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

struct cli_opt {
    const char *name;
    const char *arg;
    bool query; /* a /v1 query parameter of the same name */
    const char *help;
};

static const struct cli_opt cli_opts[] = {
    {.name = "repeats", .arg = "R,R,...", .query = true,
     .help = "repeats per axis (semantics onnx, numpy, openvino, directml)"},
    {.name = "semantics", .arg = "NAME", .query = true, .help = "onnx (default), onnx1, numpy, openvino or directml"},
    {.name = "tiles", .arg = "N", .query = true,
     .help = "copies along --axis (semantics onnx1, implied by --tiles/--axis)"},
    {.name = "axis", .arg = "K", .query = true, .help = "the axis --tiles copies along; negative counts from the end"},
    {.name = "threads", .arg = "N", .query = false, .help = "tiling threads; 0 = one per CPU (default)"},
};
#define CLI_NOPTS (int)(sizeof(cli_opts) / sizeof(cli_opts[0]))

struct cli_args {
    const char *in, *out;
    int64_t threads;
    bool seen[CLI_NOPTS];
    bool help;
};

static void cli_usage(FILE *f, bool full)
{
    fprintf(f, "usage: tiled tile --repeats R,R,... [--semantics S] [--threads N] IN.npy OUT.npy\n"
               "       tiled tile --tiles N --axis K [--threads N] IN.npy OUT.npy\n");
    if (!full)
        return;
    fprintf(f, "\nTiles the array in IN.npy and writes the result to OUT.npy ('-' is stdin/stdout).\n\n");
    for (int i = 0; i < CLI_NOPTS; i++) {
        char flag[40];
        snprintf(flag, sizeof(flag), "--%s %s", cli_opts[i].name, cli_opts[i].arg);
        fprintf(f, "  %-22s %s\n", flag, cli_opts[i].help);
    }
    fprintf(f, "  %-22s %s\n", "--help", "show this help");
}

static const struct cli_opt *cli_find(const char *name, size_t len)
{
    for (int i = 0; i < CLI_NOPTS; i++) {
        if (strlen(cli_opts[i].name) == len && strncmp(cli_opts[i].name, name, len) == 0)
            return &cli_opts[i];
    }
    return NULL;
}

static int cli_apply(const struct cli_opt *o, const char *value, struct cli_args *a, struct tile_request *r,
                     struct tile_error *e)
{
    bool *seen = &a->seen[o - cli_opts];
    if (*seen)
        return tile_error_set(e, TILE_EINVAL, "option --%s is given twice", o->name);
    *seen = true;
    if (o->query)
        return tile_request_query_param(r, NULL, false, o->name, value, NULL, e);
    if (tile_parse_int64(value, strlen(value), &a->threads, "--threads", e) < 0)
        return -1;
    if (a->threads < 0 || a->threads > CLI_MAX_THREADS)
        return tile_error_set(e, TILE_EINVAL, "--threads must be in 0..%d (0 = one per CPU), got %lld",
                              CLI_MAX_THREADS, (long long)a->threads);
    return 0;
}

/* Sets a positional argument (IN, then OUT). */
static int cli_positional(const char *arg, struct cli_args *a, struct tile_error *e)
{
    if (!a->in)
        a->in = arg;
    else if (!a->out)
        a->out = arg;
    else
        return tile_error_set(e, TILE_EINVAL, "unexpected argument '%s' (expected IN.npy OUT.npy)", arg);
    return 0;
}

/* Options may come before, between or after the two files; '--' ends them. */
static int cli_parse(int argc, char **argv, struct cli_args *a, struct tile_request *r, struct tile_error *e)
{
    bool options = true;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (options && (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)) {
            a->help = true;
            return 0;
        }
        if (options && strcmp(arg, "--") == 0) {
            options = false;
            continue;
        }
        if (!options || arg[0] != '-' || arg[1] == '\0') {
            if (cli_positional(arg, a, e) < 0)
                return -1;
            continue;
        }
        const char *name = arg + (arg[1] == '-' ? 2 : 1), *eq = strchr(name, '=');
        const struct cli_opt *o = arg[1] == '-' ? cli_find(name, eq ? (size_t)(eq - name) : strlen(name)) : NULL;
        if (!o)
            return tile_error_set(e, TILE_EINVAL, "unknown option '%s'", arg);
        const char *value = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!value)
            return tile_error_set(e, TILE_EINVAL, "option --%s needs a value", o->name);
        if (cli_apply(o, value, a, r, e) < 0)
            return -1;
    }
    if (!a->out)
        return tile_error_set(e, TILE_EINVAL, "expected IN.npy and OUT.npy (use '-' for stdin/stdout)");
    /* --tiles/--axis alone mean ONNX Tile-1. */
    if (!r->has_semantics && (r->has_tiles || r->has_axis))
        r->semantics = TILE_SEM_ONNX1;
    return 0;
}

/* Reads all of `f` into a malloc'd buffer. */
static int cli_read_all(FILE *f, const char *name, char **buf, size_t *len, struct tile_error *e)
{
    size_t cap = CLI_READ_START, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (!b)
            return tile_error_set(e, TILE_ENOMEM, "cannot allocate %zu bytes to read '%s'", cap, name);
        n += fread(b + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *grown = NULL;
        if (!__builtin_mul_overflow(cap, 2, &cap))
            grown = realloc(b, cap);
        if (!grown)
            free(b);
        b = grown;
    }
    if (ferror(f)) {
        free(b);
        return tile_error_set(e, TILE_EIO, "cannot read '%s': %s", name, strerror(errno));
    }
    *buf = b;
    *len = n;
    return 0;
}

static int cli_read_input(const char *path, struct tile_request *r, struct tile_error *e)
{
    bool std = strcmp(path, "-") == 0;
    const char *name = std ? "stdin" : path;
    FILE *f = std ? stdin : fopen(path, "rb");
    if (!f)
        return tile_error_set(e, TILE_EIO, "cannot open '%s': %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0;
    int rc = cli_read_all(f, name, &buf, &len, e);
    if (!std)
        fclose(f);
    struct tile_error local = {0};
    if (rc == 0 && tile_v1_npy_decode(buf, len, NULL, r, &local) < 0)
        rc = tile_error_set(e, local.code, "%s: %s", name, local.text);
    free(buf);
    return rc;
}

static int cli_write_output(const char *path, const struct tile_tensor *t, const struct tile_request *r,
                            struct tile_error *e)
{
    bool std = strcmp(path, "-") == 0;
    if (std && isatty(STDOUT_FILENO))
        return tile_error_set(e, TILE_EIO, "refusing to write .npy data to a terminal (redirect stdout or name a file)");
    FILE *f = std ? stdout : fopen(path, "wb");
    if (!f)
        return tile_error_set(e, TILE_EIO, "cannot create '%s': %s", path, strerror(errno));
    int rc = tile_npy_write_file(f, t, r->npy_strkind, r->npy_strwidth, e);
    if (!std && fclose(f) != 0 && rc == 0)
        rc = tile_error_set(e, TILE_EIO, "cannot write '%s': %s", path, strerror(errno));
    if (rc < 0 && !std)
        remove(path);
    return rc;
}

/* Reads, tiles and writes; usage was checked already. */
static int cli_run(const struct cli_args *a, struct tile_request *r, struct tile_error *e)
{
    struct tile_spec spec;
    struct tile_tensor out;
    if (cli_read_input(a->in, r, e) < 0 || tile_request_spec(r, NULL, &spec, e) < 0)
        return -1;
    struct tile_pool *pool = tile_pool_init((int)a->threads, 0, e);
    if (!pool)
        return -1;
    int rc = tile_run(&r->input, &spec, &out, pool, e);
    tile_pool_free(pool);
    if (rc == 0) {
        rc = cli_write_output(a->out, &out, r, e);
        tile_tensor_free(&out);
    }
    return rc;
}

int tiled_cli_tile(int argc, char **argv)
{
    struct cli_args a = {0};
    struct tile_request r;
    struct tile_spec spec;
    struct tile_error e = {0};
    int status = CLI_OK;
    tile_request_init(&r);
    if (cli_parse(argc, argv, &a, &r, &e) < 0 || (!a.help && tile_request_spec(&r, NULL, &spec, &e) < 0)) {
        fprintf(stderr, "tiled: %s\n", e.text);
        cli_usage(stderr, false);
        status = CLI_USAGE;
    } else if (a.help) {
        cli_usage(stdout, true);
    } else if (cli_run(&a, &r, &e) < 0) {
        fprintf(stderr, "tiled: %s\n", e.text);
        status = CLI_FAIL;
    }
    tile_request_free(&r);
    return status;
}
