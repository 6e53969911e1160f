#!/usr/bin/env python3
"""JSON Schema keywords of the grammar compiler that need more than an expression tree, on small
hand-written schemas and instances: key presence (not {required}, dependencies /
dependentRequired / dependentSchemas of key lists, oneOf / anyOf of required sets), enum / const
filtered by every other keyword (not, uniqueItems, maxLength, nested not / oneOf), not-enum beside
a pattern, minLength / maxLength with a pattern (a DFA times a character count),
patternProperties beside properties / additionalProperties (key languages as DFAs), and format date's days per month, uniqueItems over items from a small finite set, a '$' inside a pattern's group, and not of a string-only schema (pattern / length / format). Each instance
carries its expected verdict, which Python `jsonschema` must confirm (when it is installed: the
labels are then checked against an independent validator), and `ignis grammar-check --batch`
with the Llama 3 tokenizer must accept exactly the valid ones (serialized as json.dumps writes
them). Schemas past what is supported must be refused naming the keyword. Skips (77) without the
tokenizer."""
import json
import os
import subprocess
import sys
import tempfile

ignis = os.environ.get("IGNIS", "build/ignis")
data = os.environ.get("IGNIS_TESTDATA", "../shared/testdata")
tok = os.path.join(data, "tokenizers", "llama3")
if not os.path.exists(os.path.join(tok, "tokenizer.json")):
    print("skip: no Llama 3 tokenizer")
    sys.exit(77)
try:
    import jsonschema
except ImportError:
    jsonschema = None

OK, BAD = True, False
CASES = [
    ("not required pair",
     {"type": "object", "properties": {"cmd": {"type": "string"}, "args": {"type": "array"}}, "additionalProperties": False,
      "not": {"allOf": [{"required": ["cmd"]}, {"required": ["args"]}]}},
     [({}, OK), ({"cmd": "x"}, OK), ({"args": []}, OK), ({"cmd": "x", "args": []}, BAD), ({"args": [], "cmd": "y"}, BAD),
      ({"z": 1}, BAD)]),
    ("not required, any type",
     {"not": {"required": ["a"]}},
     [({"b": 1}, OK), ({"a": 1}, BAD), (3, BAD), ("s", BAD), ([1], BAD)]),
    ("dependencies",
     {"type": "object", "properties": {"a": {}, "b": {}, "c": {"type": "integer"}}, "dependencies": {"a": ["b"], "c": ["a"]}},
     [({"a": 1, "b": 2}, OK), ({"a": 1}, BAD), ({"b": 1}, OK), ({"c": 1, "a": 1, "b": 0}, OK), ({"c": 1, "b": 1}, BAD),
      ({"x": 1, "a": 2}, BAD), ({"x": 1, "b": 2}, OK)]),
    ("dependentRequired",
     {"dependentRequired": {"x": ["y", "z"]}},
     [({"x": 1, "y": 1, "z": 1}, OK), ({"x": 1, "y": 1}, BAD), ({"y": 1}, OK), (5, OK), ("s", OK), ({}, OK)]),
    ("dependentSchemas of required",
     {"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}},
     [({"a": 1}, BAD), ({"a": 1, "b": 1}, OK), ({"b": 1}, OK)]),
    ("oneOf of required sets",
     {"type": "object", "properties": {"name": {"type": "string"}, "u": {"type": "string"}, "v": {"type": "string"}},
      "oneOf": [{"required": ["name", "u"]}, {"required": ["name", "v"]}]},
     [({"name": "a", "u": "x"}, OK), ({"v": "y", "name": "b"}, OK), ({"name": "a", "u": "x", "v": "y"}, BAD),
      ({"name": "a"}, BAD), ({"u": "x"}, BAD), ({}, BAD)]),
    ("anyOf of required sets",
     {"type": "object", "anyOf": [{"required": ["p"]}, {"required": ["q"]}]},
     [({"p": 1}, OK), ({"q": 1, "p": 2}, OK), ({"r": 1}, BAD)]),
    ("enum filtered",
     {"enum": [1, "ab", "abc", [1, 1], [1, 2], {"a": True}, {"a": 1.0}], "not": {"type": "integer"}, "maxLength": 2,
      "uniqueItems": True, "not_a": 0, "properties": {"a": {"type": "number"}}},
     [(1, BAD), ("ab", OK), ("abc", BAD), ([1, 1], BAD), ([1, 2], OK), ({"a": True}, BAD), ({"a": 1.0}, OK)]),
    ("enum with nested not / oneOf",
     {"allOf": [{"enum": [{"bar": 2, "foo": 1}, {"foo": 1}]},
                {"not": {"not": {"oneOf": [{"required": ["foo", "bar"]}, {"required": ["foo", "baz"]}]}}}]},
     [({"bar": 2, "foo": 1}, OK), ({"foo": 1}, BAD), ({"bar": 2, "foo": 1, "baz": 3}, BAD)]),
    ("const beside not",
     {"const": {"a": [1, 2]}, "not": {"properties": {"a": {"maxItems": 1}}}},
     [({"a": [1, 2]}, OK), ({"a": [1]}, BAD)]),
    ("not enum beside a pattern",
     {"type": "string", "pattern": "^[a-z]+$", "not": {"enum": ["null", "int"]}},
     [("abc", OK), ("null", BAD), ("nul", OK), ("nulls", OK), ("int", BAD), ("Int", BAD), ("", BAD)]),
    ("lengths with a pattern",
     {"type": "string", "pattern": "^[a-z]+@[a-z]+$", "minLength": 5, "maxLength": 8},
     [("a@b", BAD), ("ab@cd", OK), ("abcd@efg", OK), ("abcd@efgh", BAD), ("ab@cD", BAD)]),
    ("lengths in characters",
     {"type": "string", "pattern": "x$", "maxLength": 3},
     [("éé" + "x", OK), ("ééé" + "x", BAD), ("é\"x", OK), ("x", OK), ("日本x", OK), ("日本語x", BAD), ("ab", BAD)]),
    ("patternProperties beside additionalProperties",
     {"type": "object", "properties": {"id": {"type": "integer"}},
      "patternProperties": {"^x-": {"type": "string"}, "^x-n": {"type": "number"}}, "additionalProperties": {"type": "boolean"}},
     [({"id": 1, "x-a": "s", "flag": True}, OK), ({"x-a": 1}, BAD), ({"x-n1": "s"}, BAD), ({"x-n1": 2}, BAD),
      ({"other": "s"}, BAD), ({"other": False}, OK), ({"id": "s"}, BAD), ({"x": "s"}, BAD), ({"x-": "s"}, OK)]),
    ("patternProperties on a named property",
     {"type": "object", "properties": {"xa": {"type": "integer"}}, "patternProperties": {"^x": {"minimum": 5}}},
     [({"xa": 3}, BAD), ({"xa": 7}, OK), ({"xb": 3}, BAD), ({"xb": "s"}, OK), ({"y": 3}, OK), ({"xa": 7.5}, BAD)]),
    ("unanchored patternProperties",
     {"patternProperties": {"[0-9a-f]{4}": {"type": "null"}}},
     [({"zz00ab": None}, OK), ({"00ab": 1}, BAD), ({"q": 1}, OK), ({"00ab": None, "q": [1]}, OK)]),
    ("patternProperties with required",
     {"type": "object", "patternProperties": {"^test_[a-z_]+$": {"type": "object"}}, "required": ["meta"],
      "properties": {"meta": {"type": "string"}}},
     [({"meta": "m", "test_a": {}}, OK), ({"meta": "m", "test_a": 1}, BAD), ({"test_a": {}}, BAD), ({"meta": "m", "test_1": 1}, OK)]),
    ("format date: days within the month",  # February 29 of a common year is accepted (not in the labels)
     {"type": "string", "format": "date"},
     [("2024-02-29", OK), ("2024-02-30", BAD), ("1990-02-31", BAD), ("2023-04-31", BAD), ("2023-04-30", OK), ("2023-12-31", OK)]),
]
CASES += [
    ("uniqueItems over an enum",
     {"type": "array", "items": {"enum": ["a", "b", "c", 1, 1.0]}, "uniqueItems": True, "maxItems": 3},
     [([], OK), (["a"], OK), (["a", "b", "c"], OK), (["a", "a"], BAD), (["b", "a", "b"], BAD), ([1, "a"], OK), ([1, 1.0], BAD),
      (["a", "b", "c", 1], BAD), (["d"], BAD)]),
    ("uniqueItems over booleans, minItems",
     {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True, "minItems": 2},
     [([True, False], OK), ([False, True], OK), ([True, True], BAD), ([True], BAD), ([True, False, True], BAD)]),
    ("uniqueItems over enum objects",
     {"type": "array", "items": {"enum": [{"a": 1, "b": 2}, {"b": 2, "a": 1}, {"a": 2}]}, "uniqueItems": True},
     [([{"a": 1, "b": 2}, {"a": 2}], OK), ([{"b": 2, "a": 1}], OK), ([{"a": 1, "b": 2}, {"b": 2, "a": 1}], BAD),
      ([{"a": 2}, {"a": 2}], BAD)]),
]
CASES += [
    ("'$' inside a group",
     {"type": "string", "pattern": "^(ab($|-))+"},
     [("ab", OK), ("ab-ab", OK), ("ab-", OK), ("ab-abx", OK), ("abx", BAD), ("xab", BAD), ("", BAD)]),
    ("'$' inside a group, a path",
     {"type": "string", "pattern": "^(\\/?((\\.{2})|([a-z0-9\\-]*))($|\\/))*$"},
     [("a/b", OK), ("a/b/", OK), ("../x-1", OK), ("", OK), ("A", BAD), ("a/B", BAD), ("a.b", BAD)]),
]
CASES += [
    ("not of an enum of mixed scalars",
     {"not": {"enum": ["a", None, True]}, "type": ["string", "null", "boolean"]},
     [("a", BAD), ("b", OK), (None, BAD), (True, BAD), (False, OK), ("", OK)]),
    ("not const on a string",
     {"type": "string", "not": {"const": "x"}},
     [("x", BAD), ("y", OK), ("xx", OK)]),
]
CASES += [
    ("not a pattern, strings only",
     {"type": "string", "not": {"pattern": "^tmp"}},
     [("tmpx", BAD), ("tmp", BAD), ("atmp", OK), ("", OK), ("tm", OK)]),
    ("not a pattern, any type",
     {"not": {"pattern": "[0-9]"}},
     [("a1", BAD), ("ab", OK), (1, BAD), (None, BAD)]),
    ("not a length beside a pattern",
     {"type": "string", "pattern": "^[a-z]*$", "not": {"type": "string", "maxLength": 2}},
     [("abc", OK), ("ab", BAD), ("", BAD), ("abC", BAD)]),
    ("not a format",
     {"type": "string", "not": {"format": "uuid"}, "maxLength": 40},
     [("x", OK), ("123e4567-e89b-12d3-a456-426614174000", BAD)]),
]
REFUSED = [
    ("dependentSchemas", {"dependentSchemas": {"a": {"properties": {"b": {"type": "integer"}}}}}),
    ("uniqueItems", {"type": "array", "uniqueItems": True, "items": {"type": "string"}}),
    ("not", {"type": "integer", "not": {"enum": [1, 2]}}),
]


def expected_ok():
    """Every label agrees with jsonschema (when installed)."""
    if jsonschema is None:
        print("note: jsonschema not installed; labels not cross-checked")
        return True
    ok = True
    for name, schema, insts in CASES:
        cls = jsonschema.Draft202012Validator if "dependencies" not in schema else jsonschema.Draft7Validator
        v = cls(schema, format_checker=cls.FORMAT_CHECKER)
        for inst, want in insts:
            if v.is_valid(inst) != want:
                print(f"FAIL label: {name}: {json.dumps(inst)}: jsonschema says {not want}")
                ok = False
    return ok


def main():
    ok = expected_ok()
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for name, schema, insts in CASES:
            tests = [{"valid": w, "text": json.dumps(i, ensure_ascii=False)} for i, w in insts]
            f.write(json.dumps({"name": name, "schema": schema, "tests": tests}, ensure_ascii=False) + "\n")
        for kw, schema in REFUSED:
            f.write(json.dumps({"name": "refused " + kw, "schema": schema, "tests": []}) + "\n")
        batch = f.name
    try:
        out = subprocess.run([ignis, "grammar-check", tok, "--batch", batch], capture_output=True, text=True, timeout=300)
    finally:
        os.unlink(batch)
    if out.returncode != 0:
        print(out.stderr)
        return 1
    res = [json.loads(l) for l in out.stdout.splitlines() if l.strip()]
    n = 0
    for (name, schema, insts), r in zip(CASES, res):
        if not r["supported"]:
            print(f"FAIL {name}: refused: {r.get('error')}")
            ok = False
            continue
        for (inst, want), acc in zip(insts, r["accepted"]):
            n += 1
            if acc != want:
                print(f"FAIL {name}: {json.dumps(inst, ensure_ascii=False)}: {'accepted' if acc else 'rejected'}, want {'valid' if want else 'invalid'}")
                ok = False
    for (kw, _), r in zip(REFUSED, res[len(CASES):]):
        if r["supported"] or kw not in r.get("error", ""):
            print(f"FAIL refusal of {kw}: {r}")
            ok = False
    print(f"{len(CASES)} schemas, {n} instances, {len(REFUSED)} refusals")
    print("test_grammar_keywords:", "ok" if ok else "FAIL")
    return 0 if ok else 1


sys.exit(main())
