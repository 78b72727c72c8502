#!/usr/bin/env python3
"""Validates JSON documents against a JSON Schema (draft 2020-12) with the jsonschema package.

    validate_json.py SCHEMA FILE...      each FILE holds one document; '-' reads stdin
    validate_json.py --check             exits 0 when jsonschema can be imported (for CMake)
    validate_json.py --lines DEF SCHEMA FILE...
                                         each non-empty line of each FILE is a document, validated
                                         against the schema's $defs/DEF (--watch's JSON lines: watch_sample)

Exit status: 0 every document is valid, 1 one is not (each error is printed), 2 usage or I/O error,
3 jsonschema is missing.
"""
import json
import sys


def main(argv):
    try:
        import jsonschema
    except ImportError as e:
        print(f"validate_json: the Python package jsonschema is missing ({e}); install python3-jsonschema",
              file=sys.stderr)
        return 3
    if argv[1:] == ["--check"]:
        return 0
    definition = None
    if argv[1:2] == ["--lines"]:  # issue 36: watch
        if len(argv) < 5:
            print(__doc__, file=sys.stderr)
            return 2
        definition = argv[2]
        argv = [argv[0]] + argv[3:]
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        schema = json.load(f)
    if definition is not None:
        if definition not in schema.get("$defs", {}):
            print(f"validate_json: the schema has no $defs/{definition}", file=sys.stderr)
            return 2
        return validate_lines(jsonschema, schema, definition, argv[2:])
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator = validator_class(schema)
    status = 0
    for path in argv[2:]:
        try:
            if path == "-":
                document = json.load(sys.stdin)
            else:
                with open(path, encoding="utf-8") as f:
                    document = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{path}: not JSON: {e}", file=sys.stderr)
            return 2
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
        for e in errors:
            where = "/".join(str(p) for p in e.absolute_path) or "(document)"
            print(f"{path}: {where}: {e.message}", file=sys.stderr)
        if errors:
            status = 1
        else:
            print(f"{path}: valid")
    return status


def validate_lines(jsonschema, schema, definition, paths):
    """Each non-empty line of each file against $defs/definition; a file without lines is invalid."""
    sub = {"$schema": schema.get("$schema"), "$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"}
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator = validator_class(sub)
    status = 0
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                lines = [line for line in f.read().split("\n") if line.strip()]
        except OSError as e:
            print(f"{path}: {e}", file=sys.stderr)
            return 2
        if not lines:
            print(f"{path}: no JSON lines", file=sys.stderr)
            status = 1
        for number, line in enumerate(lines, 1):
            try:
                document = json.loads(line)
            except ValueError as e:
                print(f"{path}:{number}: not JSON: {e}", file=sys.stderr)
                return 2
            for e in sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path)):
                where = "/".join(str(p) for p in e.absolute_path) or "(document)"
                print(f"{path}:{number}: {where}: {e.message}", file=sys.stderr)
                status = 1
        if status == 0:
            print(f"{path}: {len(lines)} valid lines")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
