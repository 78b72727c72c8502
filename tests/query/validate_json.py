#!/usr/bin/env python3
"""Validates JSON documents against a JSON Schema (draft 2020-12) with the jsonschema package.

    validate_json.py SCHEMA FILE...      each FILE holds one document; '-' reads stdin
    validate_json.py --check             exits 0 when jsonschema can be imported (for CMake)

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
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        schema = json.load(f)
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


if __name__ == "__main__":
    sys.exit(main(sys.argv))
