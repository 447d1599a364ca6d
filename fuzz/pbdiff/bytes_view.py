#!/usr/bin/env python3
"""bytes_view.py IN.proto OUT.proto - the same messages, as protobuf-c reads them
for the differential target (fuzz/fuzz_pbdiff.c), with two wire-identical changes:

- every `string` field becomes `bytes`: protobuf-c hands strings over as
  NUL-terminated char *, which would cut a string at an embedded NUL byte;
  as bytes it gives the exact length and contents (protobuf-c checks no
  UTF-8 either way; the target checks it itself);
- every `map<string, V> name = N;` becomes `repeated NameEntry name = N;`
  with `message NameEntry { bytes key = 1; V value = 2; }` declared beside
  it: the map's own wire form (a map is a repeated entry message), but
  with the key as bytes. The target applies the map rule (the last entry
  of a key wins) itself.

Field numbers, names and nesting are untouched, so the generated C names
are those protoc-c gives the original file.
"""
import re
import sys

MAP = re.compile(r"^(\s*)map<\s*string\s*,\s*([\w.]+)\s*>\s+(\w+)\s*=\s*(\d+)\s*;")
STRING = re.compile(r"^(\s*)(repeated\s+)?string(\s+\w+\s*=)")


def entry_name(field):
    return "".join(part[:1].upper() + part[1:] for part in field.split("_")) + "Entry"


def convert(text):
    out = []
    for line in text.splitlines():
        m = MAP.match(line)
        if m:
            ind, value, field, num = m.groups()
            name = entry_name(field)
            out.append(f"{ind}message {name} {{ bytes key = 1; {value} value = 2; }}")
            out.append(f"{ind}repeated {name} {field} = {num};")
            continue
        out.append(STRING.sub(lambda s: f"{s.group(1)}{s.group(2) or ''}bytes{s.group(3)}", line))
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        text = f.read()
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write(convert(text))
