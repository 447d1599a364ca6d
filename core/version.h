/* version.h - tiled's version, one definition for the daemon (HTTP Server
 * header, v2 metadata, gRPC ServerMetadata, traces, metrics) and the CLI
 * (`tiled --version`). */
#ifndef TILE_VERSION_H
#define TILE_VERSION_H

#define TILED_VERSION "0.1.0"

#endif
