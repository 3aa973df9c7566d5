#!/usr/bin/env python3
"""Validates YAML specs or JSON reports against a JSON Schema (draft 2020-12 or draft-04, from its $schema).

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
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema)
    bad = 0
    for path in sys.argv[2:]:
        # YAML is a superset of JSON: one loader for specs and reports.
        errors = sorted(validator.iter_errors(yaml.safe_load(open(path))), key=lambda e: list(e.absolute_path))
        if errors:
            bad += 1
            e = errors[0]
            print(f"{path}: at {'/'.join(map(str, e.absolute_path))}: {e.message[:300]}")
    print(f"{len(sys.argv) - 2 - bad} of {len(sys.argv) - 2} files valid")
    sys.exit(1 if bad else 0)


main()
