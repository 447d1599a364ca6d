/* main.c - the tiled binary: dispatches to its subcommands. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("tiled\n");
    return 0;
}
