"""pbreencode.py - other valid encodings of a protobuf message, for the
differential tests of tiled's hand-written decoder (tests/server/
test_pb_differential.py over a real channel, fuzz/gen_pbdiff_corpus.py for the
libFuzzer target's seeds).

reencode(msg, rng) walks a message of the Python protobuf package by its
descriptor and writes its fields with the freedom the wire format gives a
writer (https://protobuf.dev/programming-guides/encoding/):

- fields in any order (the elements of one repeated field keep theirs);
- repeated scalars packed, unpacked, or in several packed runs, mixed;
- a singular scalar or string written more than once, earlier with other
  values (the last one wins), a oneof's other members written first;
- a sub-message split into several occurrences (they are merged);
- a map key written more than once, earlier with other values, and
  partial entries (key or value missing) for other keys;
- map entries with value before key, keys written twice;
- unknown fields of every wire type (varint, fixed64, length-delimited,
  fixed32, groups with nested groups), and known field numbers with another
  wire type, before, between and after the known fields, at every depth;
- over-long varints (padded with 0x80 bytes up to ten; tags, 32-bit
  varints, up to five), in tags, lengths and values, and ten-byte varints
  whose last byte carries bits past the 64th (dropped by the reader);
- int32/uint32 values with junk above bit 31 (truncated by the reader),
  bools as any non-zero varint;
- proto3 defaults written explicitly (0, "", false).

The bytes are not always the same meaning as `msg`: the tests compare a
decoder's reading with the Python protobuf parser's reading of the same
bytes, never with `msg` itself.
"""
import struct

from google.protobuf import descriptor as _d

FD = _d.FieldDescriptor

VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5

_WIRE = {
    FD.TYPE_DOUBLE: I64, FD.TYPE_FLOAT: I32, FD.TYPE_INT64: VARINT, FD.TYPE_UINT64: VARINT,
    FD.TYPE_INT32: VARINT, FD.TYPE_FIXED64: I64, FD.TYPE_FIXED32: I32, FD.TYPE_BOOL: VARINT,
    FD.TYPE_STRING: LEN, FD.TYPE_BYTES: LEN, FD.TYPE_MESSAGE: LEN, FD.TYPE_UINT32: VARINT,
    FD.TYPE_ENUM: VARINT, FD.TYPE_SFIXED32: I32, FD.TYPE_SFIXED64: I64, FD.TYPE_SINT32: VARINT,
    FD.TYPE_SINT64: VARINT,
}


def _repeated(fd):
    return fd.label == FD.LABEL_REPEATED


def _is_map(fd):
    return (fd.type == FD.TYPE_MESSAGE and _repeated(fd)
            and fd.message_type.GetOptions().map_entry)


class Encoder:
    """One re-encoding's choices, drawn from `rng` (a random.Random)."""

    def __init__(self, rng, level=1.0):
        self.rng = rng
        self.level = level  # 0: canonical-like; 1: every trick often

    def p(self, x):
        return self.rng.random() < x * self.level

    # -- varints -------------------------------------------------------------
    def varint(self, v, longest=10):
        v &= (1 << 64) - 1
        out = bytearray()
        while True:
            b = v & 0x7F
            v >>= 7
            if v:
                out.append(b | 0x80)
            else:
                out.append(b)
                break
        if self.p(0.15) and len(out) < longest:
            # pad: the last byte gets a continuation bit, then 0x80s, then 0
            pad = self.rng.randint(1, longest - len(out))
            out[-1] |= 0x80
            out += b"\x80" * (pad - 1) + b"\x00"
        if len(out) == 10 and self.p(0.3):
            out[9] |= self.rng.choice([0x02, 0x40, 0x7E])  # bits past the 64th (bit 0 is bit 63)
        return bytes(out)

    def tag(self, number, wire):
        # a tag is a 32-bit varint: parsers read at most five bytes of it
        return self.varint(number << 3 | wire, 5)

    def length_delimited(self, number, payload):
        return self.tag(number, LEN) + self.varint(len(payload)) + payload

    # -- scalars ---------------------------------------------------------------
    def scalar_value(self, fd, v):
        """The value's bytes (no tag) in its own wire type."""
        t = fd.type
        if t == FD.TYPE_BOOL:
            return self.varint(self.rng.choice([1, 2, 0x7F, 1 << 40]) if v and self.p(0.3) else int(bool(v)))
        if t in (FD.TYPE_INT32, FD.TYPE_ENUM):
            u = v & 0xFFFFFFFFFFFFFFFF if v < 0 else v
            if self.p(0.2):  # junk above bit 31: read as the low 32 bits
                u = (v & 0xFFFFFFFF) | (self.rng.getrandbits(32) << 32)
            return self.varint(u)
        if t == FD.TYPE_UINT32:
            return self.varint(v | (self.rng.getrandbits(32) << 32) if self.p(0.2) else v)
        if t in (FD.TYPE_INT64, FD.TYPE_UINT64):
            return self.varint(v & 0xFFFFFFFFFFFFFFFF)
        if t == FD.TYPE_SINT32 or t == FD.TYPE_SINT64:
            return self.varint((v << 1) ^ (v >> 63))
        if t == FD.TYPE_DOUBLE:
            return struct.pack("<d", v)
        if t == FD.TYPE_FLOAT:
            return struct.pack("<f", v)
        if t in (FD.TYPE_FIXED64, FD.TYPE_SFIXED64):
            return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)
        if t in (FD.TYPE_FIXED32, FD.TYPE_SFIXED32):
            return struct.pack("<I", v & 0xFFFFFFFF)
        raise ValueError(t)

    def other_value(self, fd):
        """Some other value of the field's type (written before the real one)."""
        t = fd.type
        if t == FD.TYPE_BOOL:
            return self.rng.random() < 0.5
        if t in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
            return float(self.rng.randint(-9, 9))
        if t in (FD.TYPE_STRING,):
            return self.rng.choice(["", "x", "other", "semantics"])
        if t == FD.TYPE_BYTES:
            return bytes(self.rng.getrandbits(8) for _ in range(self.rng.randint(0, 5)))
        if t in (FD.TYPE_UINT32, FD.TYPE_UINT64, FD.TYPE_FIXED32, FD.TYPE_FIXED64):
            return self.rng.randint(0, 300)
        return self.rng.randint(-300, 300)

    def single(self, fd, v):
        """One occurrence of a non-repeated field with value v."""
        if fd.type == FD.TYPE_MESSAGE:
            return self.message_occurrences(fd.number, v)
        if fd.type == FD.TYPE_STRING:
            return [self.length_delimited(fd.number, v.encode("utf-8"))]
        if fd.type == FD.TYPE_BYTES:
            return [self.length_delimited(fd.number, bytes(v))]
        return [self.tag(fd.number, _WIRE[fd.type]) + self.scalar_value(fd, v)]

    # -- messages ------------------------------------------------------------
    def message_occurrences(self, number, msg):
        """A sub-message as one or more occurrences of field `number`
        (a message split at field boundaries reads back merged)."""
        chunks = self.field_chunks(msg)
        if len(chunks) > 1 and self.p(0.2):
            cut = sorted(self.rng.sample(range(1, len(chunks)), self.rng.randint(1, min(2, len(chunks) - 1))))
            parts, last = [], 0
            for c in cut + [len(chunks)]:
                parts.append(b"".join(chunks[last:c]))
                last = c
            return [self.length_delimited(number, part) for part in parts]
        return [self.length_delimited(number, b"".join(chunks))]

    def unknown(self, desc, depth=0):
        """One field this message does not know (or a known number with
        another wire type), whose value any reader skips."""
        known = {f.number for f in desc.fields}
        choices = [n for n in (9, 10, 15, 16, 99, 2047, 2048, 536870911) if n not in known]
        number = self.rng.choice(choices)
        wire = self.rng.choice([VARINT, I64, LEN, I32, SGROUP])
        if known and self.p(0.15):
            fd = self.rng.choice(desc.fields)
            wrong = [w for w in (VARINT, I64, LEN, I32, SGROUP) if w != _WIRE[fd.type]]
            if _repeated(fd) and fd.type not in (FD.TYPE_STRING, FD.TYPE_BYTES, FD.TYPE_MESSAGE):
                wrong = [w for w in wrong if w != LEN]  # packed is not another type
            number, wire = fd.number, self.rng.choice(wrong)
        if wire == VARINT:
            return self.tag(number, wire) + self.varint(self.rng.getrandbits(self.rng.choice([1, 7, 35, 64])))
        if wire == I64:
            return self.tag(number, wire) + bytes(self.rng.getrandbits(8) for _ in range(8))
        if wire == I32:
            return self.tag(number, wire) + bytes(self.rng.getrandbits(8) for _ in range(4))
        if wire == LEN:
            payload = bytes(self.rng.getrandbits(8) for _ in range(self.rng.randint(0, 6)))
            return self.length_delimited(number, payload)
        inner = b""
        for _ in range(self.rng.randint(0, 2)):
            if depth < 2 and self.p(0.3):
                inner += self.unknown(desc, depth + 1)
            else:
                inner += self.tag(self.rng.randint(1, 20), VARINT) + self.varint(self.rng.randint(0, 1000))
        return self.tag(number, SGROUP) + inner + self.tag(number, EGROUP)

    def repeated_scalars(self, fd, values):
        """Runs of a repeated scalar field: packed, unpacked, split."""
        if fd.type in (FD.TYPE_STRING, FD.TYPE_BYTES):
            return [self.single(fd, v)[0] for v in values]
        runs, i = [], 0
        values = list(values)
        while i < len(values):
            n = self.rng.randint(1, len(values) - i) if self.p(0.4) else len(values) - i
            run = values[i:i + n]
            i += n
            if self.p(0.3):
                runs += [self.tag(fd.number, _WIRE[fd.type]) + self.scalar_value(fd, v) for v in run]
            else:
                runs.append(self.length_delimited(fd.number, b"".join(self.scalar_value(fd, v) for v in run)))
        if not values and self.p(0.1):
            runs.append(self.length_delimited(fd.number, b""))  # an empty packed run
        return runs

    def map_entries(self, fd, container):
        key_fd = fd.message_type.fields_by_name["key"]
        value_fd = fd.message_type.fields_by_name["value"]
        out = []

        def entry(key, value, key_first=True, partial=None):
            k = [] if partial == "key" else self.single(key_fd, key)
            if k and self.p(0.1):
                k = self.single(key_fd, self.other_value(key_fd)) + k  # the key twice
            if partial == "value":
                v = []
            elif value_fd.type == FD.TYPE_MESSAGE:
                v = self.message_occurrences(value_fd.number, value)
            else:
                v = self.single(value_fd, value)
            parts = k + v if key_first else v + k
            return self.length_delimited(fd.number, b"".join(parts))

        groups = []
        for key in container:
            value = container[key]
            group = []
            if self.p(0.2) and value_fd.type == FD.TYPE_MESSAGE:
                other = value_fd.message_type._concrete_class()
                group.append(entry(key, other, self.p(0.5)))  # replaced by the entry after it
            group.append(entry(key, value, not self.p(0.3)))
            groups.append(group)
        if self.p(0.15):
            stray = self.rng.choice(["unrelated", "x-partial"])
            if stray not in container:
                default = value_fd.message_type._concrete_class() if value_fd.type == FD.TYPE_MESSAGE else None
                groups.append([entry(stray, default, partial="value")])
        if self.p(0.1) and "" not in container:
            groups.append([entry("", value_fd.message_type._concrete_class(), partial="key")])
        self.rng.shuffle(groups)  # a map has no order; a key's entries keep theirs
        return [e for g in groups for e in g]

    def field_chunks(self, msg):
        """Every field of msg as a list of byte chunks in a free order."""
        desc = msg.DESCRIPTOR
        per_field = []
        present = {fd.number for fd, _ in msg.ListFields()}
        for fd, value in msg.ListFields():
            if _is_map(fd):
                chunks = self.map_entries(fd, value)
            elif _repeated(fd):
                if fd.type == FD.TYPE_MESSAGE:
                    chunks = [self.length_delimited(fd.number, b"".join(self.field_chunks(m))) for m in value]
                else:
                    chunks = self.repeated_scalars(fd, value)
            else:
                chunks = []
                if self.p(0.15):  # an earlier other value, replaced
                    if fd.containing_oneof is not None and self.p(0.5):
                        sib = self.rng.choice(fd.containing_oneof.fields)
                        if sib.type != FD.TYPE_MESSAGE:
                            chunks += self.single(sib, self.other_value(sib))
                    elif fd.type != FD.TYPE_MESSAGE:
                        chunks += self.single(fd, self.other_value(fd))
                chunks += self.single(fd, value)
            per_field.append(chunks)
        # proto3 defaults written out: scalars and strings not present
        for fd in desc.fields:
            if fd.number in present or _repeated(fd) or fd.containing_oneof is not None:
                continue
            if fd.type != FD.TYPE_MESSAGE and self.p(0.1):
                default = "" if fd.type == FD.TYPE_STRING else b"" if fd.type == FD.TYPE_BYTES else \
                    False if fd.type == FD.TYPE_BOOL else 0.0 if fd.type in (FD.TYPE_FLOAT, FD.TYPE_DOUBLE) else 0
                per_field.append(self.single(fd, default))
        # interleave the fields, each keeping its own order
        out = []
        queues = [list(c) for c in per_field if c]
        if not self.p(0.5):
            for q in queues:  # declaration order
                out += q
        else:
            while queues:
                q = self.rng.choice(queues)
                out.append(q.pop(0))
                if not q:
                    queues.remove(q)
        # unknown fields before, between and after
        n = self.rng.randint(0, 3) if self.p(0.4) else 0
        for _ in range(n):
            out.insert(self.rng.randint(0, len(out)), self.unknown(desc))
        return out


def reencode(msg, rng, level=1.0):
    """Some valid encoding of msg's fields (see the module's comment)."""
    return b"".join(Encoder(rng, level).field_chunks(msg))
