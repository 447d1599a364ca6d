/* main.c - the tiled binary: dispatches to its subcommands.
 *
 *   tiled tile ...              tile a .npy file offline (cli_tile.c)
 *   tiled [serve] [options]     run the HTTP daemon (serve.c)
 *   tiled probe URL             exit 0 when URL answers 2xx (probe.c)
 */
#include <string.h>

#include "cli.h"
#include "serve.h"

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "tile") == 0)
        return tiled_cli_tile(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "probe") == 0)
        return tiled_cli_probe(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "serve") == 0)
        return tiled_serve_main(argc - 1, argv + 1);
    return tiled_serve_main(argc, argv); /* options alone (or none) mean serve */
}
