#!/usr/bin/env python3
"""Validates spec files against schema/schedcheck.schema.json.

Usage: schema_check.py SCHEMA FILE...   Prints one line per invalid file and exits 1 if any;
exits 77 when python3-jsonschema or python3-yaml is missing (the test then skips).
"""
import json
import sys

try:
    import jsonschema
    import yaml
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)


def main():
    schema = json.load(open(sys.argv[1]))
    validator = jsonschema.Draft202012Validator(schema)
    bad = 0
    for path in sys.argv[2:]:
        errors = list(validator.iter_errors(yaml.safe_load(open(path))))
        if errors:
            bad += 1
            print(f"{path}: {errors[0].message[:300]}")
    print(f"{len(sys.argv) - 2 - bad} of {len(sys.argv) - 2} files valid")
    sys.exit(1 if bad else 0)


main()
