/* main.c - the tiled binary: dispatches to its subcommands.
 *
 *   tiled tile ...              tile a .npy file offline (tile.c)
 *   tiled probe URL             exit 0 when URL answers 2xx (probe.c)
 *   tiled [serve] [options]     run the daemon: HTTP, gRPC (server/serve.c)
 *   tiled --version             the version and the libraries
 *   tiled                       usage (exit 2): nothing starts unasked
 *
 * DESIGN. The CLI depends on core/ and api/ only. The daemon's entry point
 * is reached through one function with the signature every subcommand has
 * (serve.h: tiled_serve_main), declared weak here: the full binary links
 * server/ and gets it, a CLI-only build (make cli-only) links without
 * server/ and says that serving is not built in. Each subcommand prints its
 * own usage; this file prints only the list of subcommands.
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "version.h"

int tiled_serve_main(int argc, char **argv) __attribute__((weak));
void tiled_serve_libraries(char *dst, size_t cap) __attribute__((weak));

static int usage(FILE *out, int status)
{
    fprintf(out, "usage: tiled <command> [options]\n\n"
                 "commands:\n"
                 "  serve   run the daemon: HTTP, and gRPC with --grpc-port (the default when only options\n"
                 "          are given)\n"
                 "  tile    tile a .npy file offline\n"
                 "  probe   exit 0 when a URL answers with a 2xx status\n\n"
                 "`tiled COMMAND --help` shows the options of a command; `tiled --version` the version.\n");
    return status;
}

/* The version, and the libraries this build runs on (the daemon's only
 * where it is built in). */
static int version(void)
{
    char libs[256];
    if (tiled_serve_libraries)
        tiled_serve_libraries(libs, sizeof(libs));
    else
        snprintf(libs, sizeof(libs), "jansson %s; built without the daemon", jansson_version_str());
    printf("tiled %s (%s)\n", TILED_VERSION, libs);
    return 0;
}

static int serve(int argc, char **argv)
{
    if (!tiled_serve_main) {
        fprintf(stderr, "tiled: this build has no HTTP daemon (built without server/)\n");
        return 2;
    }
    return tiled_serve_main(argc, argv);
}

static const struct tiled_command {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {.name = "serve", .run = serve},
    {.name = "tile", .run = tiled_cli_tile},
    {.name = "probe", .run = tiled_cli_probe},
};

int main(int argc, char **argv)
{
    if (argc < 2) /* as tritonserver and mlserver do: nothing is started unasked */
        return usage(stderr, 2);
    if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return usage(stdout, 0);
    if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0)
        return version();
    for (size_t i = 0; argc > 1 && i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    }
    if (argc > 1 && argv[1][0] != '-') {
        fprintf(stderr, "tiled: unknown command '%s'\n", argv[1]);
        return usage(stderr, 2);
    }
    return serve(argc, argv); /* options alone mean serve */
}
