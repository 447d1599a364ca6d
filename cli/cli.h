/* cli.h - the offline subcommands of the tiled binary (core/ and api/ only). */
#ifndef TILED_CLI_H
#define TILED_CLI_H

/* tiled tile --repeats 2,3 [--semantics S] [--tiles N --axis K]
 *            [--threads N] IN.npy OUT.npy        ('-' is stdin / stdout)
 * argv[0] is the subcommand name ("tile"). Returns the process exit status:
 * 0 on success, 1 when the input cannot be read, tiled or written (the
 * message goes to stderr as "tiled: ..."), 2 on a usage error. */
int tiled_cli_tile(int argc, char **argv);

/* `tiled probe [--cacert FILE | --insecure] [--cert FILE --key FILE] URL`:
 * GET an http:// or https:// URL, exit 0 on a 2xx status (argv[0] is
 * "probe"); https needs the full binary (probe.c says why). */
int tiled_cli_probe(int argc, char **argv);

#endif
