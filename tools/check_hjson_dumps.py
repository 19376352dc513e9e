#!/usr/bin/python3
"""Write the hjson_dumps test vectors into tests/data/hjson/ (spec/hsds-format.md §3.0).

    /usr/bin/python3 tools/check_hjson_dumps.py [tests/data]

HSDS writes every JSON object with Python's json.dumps(obj) and default settings; h5osfs's
hjson_dumps (src/schema/hjson.c) must write the same bytes. The expected text of each vector is
json.dumps itself (this interpreter's json module, the one HSDS uses), not a second
implementation.

Each output file is a JSON array of [input, expected] pairs of strings:
  input     the value as JSON text written differently from json.dumps on purpose: no spaces,
            non-ASCII characters as raw UTF-8, floats with 17 significant digits ("%.17e"),
            NaN / Infinity / -Infinity as Python's bare tokens, integers beyond int64 as digits.
            The C test parses it with hjson_loadb (which turns the tokens and big integers into
            its marker strings), writes it back with hjson_dumps and compares byte for byte.
  expected  json.dumps(value)

Files: floats.json (random doubles of every exponent, float32 and float16 values widened to
double as h5value_to_json gives them, every power of two, integral floats, the repr thresholds
1e-05 / 0.0001 / 1e+16), strings.json (control characters, quotes, every escape, BMP and astral
characters, random code points), structures.json (nesting, key order, empty containers, integers
at the int64 / uint64 limits, NaN and infinities, booleans, null). Deterministic (fixed seed).

Before writing, the script checks its own input texts: json.loads(input) must give back a value
whose json.dumps is the expected text, so a vector can never disagree with itself.
"""
import json
import math
import os
import random
import struct
import sys

SEED = 20240917
FLOATS_PER_VECTOR = 25


def input_text(value):
    """JSON text of value, deliberately unlike json.dumps (see the module docstring)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return "%.17e" % value
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(input_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + input_text(v)
                              for k, v in value.items()) + "}"
    raise TypeError(type(value))


def pair(value):
    text = input_text(value)
    want = json.dumps(value)
    again = json.dumps(json.loads(text))
    if again != want:
        raise SystemExit("self-check failed for %r: %r != %r" % (value, again, want))
    return [text, want]


def random_bits_double(r):
    while True:
        x = struct.unpack("<d", struct.pack("<Q", r.getrandbits(64)))[0]
        if math.isfinite(x):
            return x


def widened(fmt, x):
    """x rounded to float32 ('f') or float16 ('e') and back to double."""
    try:
        return struct.unpack("<" + fmt, struct.pack("<" + fmt, x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def floats(r):
    values = [0.0, -0.0, 0.1, 0.2, 0.3, 1 / 3, 2 / 3, 1e-05, 0.0001, 0.00012345, 1e-4 * 0.999,
              1e16, 1e15, 9999999999999998.0, 1e16 * 1.5, 1e17, 1e22, 1e23, 1708897646.0599918,
              5e-324, 1e-323, 2.2250738585072014e-308, 2.225073858507201e-308,
              1.7976931348623157e308, 9007199254740993.0, 123456789012345680.0, 0.5, 2.0, 2.5,
              100.0, 1e100, 1e-100, 3.14159, 2.718281828459045, 0.009999999776482582, 1e21,
              12345678901234567890.0, 4.35, 0.1 + 0.2, 1e-07, 1.5e-07, 123e-20]
    values += [math.ldexp(1.0, e) for e in range(-1074, 1024)]            # every power of two
    values += [-math.ldexp(1.0, e) for e in range(-1074, 1024, 7)]
    values += [math.ldexp(1.0, e) * (1 - 2 ** -53) for e in range(-1021, 1024, 3)]
    values += [random_bits_double(r) for _ in range(2000)]
    values += [r.random() for _ in range(500)]
    values += [r.uniform(-1e6, 1e6) for _ in range(500)]
    values += [float(r.randrange(-10 ** 18, 10 ** 18)) for _ in range(300)]
    values += [float(r.randrange(0, 10 ** 6)) for _ in range(100)]
    values += [round(r.uniform(0, 1) * 10 ** r.randrange(-8, 20), r.randrange(0, 6))
               for _ in range(400)]
    values += [widened("f", random_bits_double(r)) for _ in range(500)]
    values += [widened("f", r.uniform(-100, 100)) for _ in range(300)]
    values += [widened("e", r.uniform(-70000, 70000)) for _ in range(200)]
    values += [widened("e", r.uniform(-1, 1)) for _ in range(100)]
    values = [v for v in values if math.isfinite(v)]
    return [pair(values[k:k + FLOATS_PER_VECTOR])
            for k in range(0, len(values), FLOATS_PER_VECTOR)]


def random_code_point(r):
    """Any character but a surrogate or NUL (hjson_loadb refuses "\\u0000": only the fixed
    vectors hold one, and they parse without hjson_loadb's tokens)."""
    while True:
        c = r.choice([r.randrange(0x20, 0x7f), r.randrange(1, 0x20), r.randrange(0x80, 0x800),
                      r.randrange(0x800, 0x10000), r.randrange(0x10000, 0x110000)])
        if not 0xd800 <= c <= 0xdfff:
            return chr(c)


def strings(r):
    values = ["", "plain ascii", "quote \" backslash \\ slash /", "\n\r\t\b\f",
              "".join(chr(c) for c in range(1, 0x20)), "nul \u0000 inside", "\u0000", "\x7f",
              "é", "vlen ütf-8 ✓", "δέλτα", "中文字符", "\u2028\u2029", "\ufeff", "\uffff",
              "\U0001f600", "\U0010ffff", "\U00010000", "mixed \U0001f600 é \x01 \" end",
              "\x80\x9f\xa0\xff", "datasets/d-d64bf735-c43d061d-3325-40539c-e34ccc"]
    fixed = list(values)
    values += ["".join(random_code_point(r) for _ in range(r.randrange(1, 30)))
               for _ in range(200)]
    return [pair(v) for v in values] + [pair(fixed)]


def nested(depth):
    v = 1.5
    for k in range(depth):
        v = [v, k] if k % 2 else {"k%d" % k: v}
    return v


def structures(r):
    values = [
        None, True, False, 0, -1, 42, [], {}, [[]], {"": {}}, [1, [2, [3, []]]],
        2 ** 63 - 1, -2 ** 63, 2 ** 63, 2 ** 64 - 1, -2 ** 63 - 1, 18000000000000000000,
        10 ** 30, -10 ** 25, [2 ** 64 - 1, -2 ** 63],
        math.nan, math.inf, -math.inf, [math.nan, math.inf, -math.inf, 1.0],
        {"z": 1, "a": 2, "m": [True, False, None]},
        {"é": "é", "\U0001f600": ["\U0001f600"], "ctl\n": "\t"},
        {"class": "H5T_COMPOUND", "fields": [{"name": "x", "type": "H5T_STD_I32LE"},
                                            {"name": "y", "type": {"class": "H5T_FLOAT",
                                                                   "base": "H5T_IEEE_F64LE"}}]},
        {"type": {"class": "H5T_STRING", "length": "H5T_VARIABLE"},
         "shape": {"class": "H5S_SCALAR"}, "value": "vlen ütf-8 ✓",
         "created": 1795302886.8066278},
        {"fillValue": math.nan, "dims": [0, 4], "u64": 18446744073709551615},
        nested(60), nested(301),
    ]
    for _ in range(100):
        values.append({"k%d" % r.randrange(1000): [r.randrange(-2 ** 63, 2 ** 64), r.random(),
                                                     random_code_point(r), r.random() < 0.5]
                       for _ in range(r.randrange(0, 6))})
    return [pair(v) for v in values]


def main():
    data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")
    out = os.path.join(data, "hjson")
    os.makedirs(out, exist_ok=True)
    r = random.Random(SEED)
    for name, make in (("floats", floats), ("strings", strings), ("structures", structures)):
        vectors = make(r)
        with open(os.path.join(out, name + ".json"), "w", encoding="ascii") as f:
            json.dump(vectors, f, indent=0)
            f.write("\n")
        print("%s.json: %d vectors" % (name, len(vectors)))


if __name__ == "__main__":
    main()
