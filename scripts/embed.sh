#!/bin/sh
# embed.sh NAME FILE - prints a C source defining NAME (the bytes of FILE,
# NUL-terminated) and NAME_len (its length without the NUL).
set -eu
name=$1
file=$2
echo "/* Generated from $file by scripts/embed.sh; do not edit. */"
echo "#include <stddef.h>"
echo "const unsigned char ${name}[] = {"
od -An -v -tx1 "$file" | sed 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'
echo "0x00};"
echo "const size_t ${name}_len = $(wc -c < "$file");"
