#!/usr/bin/env python3
"""Checks a JUnit XML report the way Jenkins' JUnit plugin reads it (its junit-10 XSD rules).

Usage: junit_check.py FILE   Prints "testsuites=N testcases=T failures=F errors=E" and exits 0, or
prints the first problem and exits 1. Uses only the standard library (xml.etree).

Rules checked: the root is <testsuites> holding only <testsuite>; a <testsuite> has a name and a
tests count, optional failures/errors/skipped counts and a decimal time, and holds <properties>
(<property name value>), <testcase>, <system-out>, <system-err>; a <testcase> has a name, an
optional classname and decimal time, and holds at most <skipped>, <error>, <failure> (with
message and type), <system-out>, <system-err>; the counts agree with the test cases.
"""
import re
import sys
import xml.etree.ElementTree as ET

DECIMAL = re.compile(r"^-?[0-9]+(\.[0-9]+)?$")


def fail(msg):
    print(msg)
    sys.exit(1)


def count(el, attr):
    v = el.get(attr)
    if v is None:
        return None
    if not v.isdigit():
        fail(f"<{el.tag}> {attr}='{v}' is not a whole number")
    return int(v)


def main():
    root = ET.parse(sys.argv[1]).getroot()
    if root.tag != "testsuites":
        fail(f"root is <{root.tag}>, not <testsuites>")
    totals = [0, 0, 0, 0]
    for suite in root:
        if suite.tag != "testsuite":
            fail(f"<testsuites> holds <{suite.tag}>")
        if not suite.get("name"):
            fail("a <testsuite> has no name")
        tests = count(suite, "tests")
        if tests is None:
            fail(f"<testsuite name='{suite.get('name')}'> has no tests count")
        if suite.get("time") is not None and not DECIMAL.match(suite.get("time")):
            fail(f"<testsuite> time='{suite.get('time')}' is not a decimal")
        cases = failures = errors = skipped = 0
        for child in suite:
            if child.tag == "properties":
                for p in child:
                    if p.tag != "property" or p.get("name") is None or p.get("value") is None:
                        fail("<properties> holds something other than <property name value>")
            elif child.tag == "testcase":
                cases += 1
                if not child.get("name"):
                    fail("a <testcase> has no name")
                if child.get("time") is not None and not DECIMAL.match(child.get("time")):
                    fail(f"<testcase> time='{child.get('time')}' is not a decimal")
                for r in child:
                    if r.tag not in ("skipped", "error", "failure", "system-out", "system-err"):
                        fail(f"<testcase> holds <{r.tag}>")
                    if r.tag in ("error", "failure") and (r.get("message") is None or r.get("type") is None):
                        fail(f"<{r.tag}> without message or type")
                failures += any(r.tag == "failure" for r in child)
                errors += any(r.tag == "error" for r in child)
                skipped += any(r.tag == "skipped" for r in child)
            elif child.tag not in ("system-out", "system-err"):
                fail(f"<testsuite> holds <{child.tag}>")
        if tests != cases:
            fail(f"<testsuite name='{suite.get('name')}'> says tests={tests} but holds {cases} test cases")
        for attr, n in (("skipped", skipped),):
            if count(suite, attr) not in (None, n):
                fail(f"<testsuite> {attr}={suite.get(attr)} but {n} test cases are {attr}")
        nf, ne = failures, errors
        if count(suite, "failures") not in (None, nf) or count(suite, "errors") not in (None, ne):
            fail(f"<testsuite name='{suite.get('name')}'> failure or error counts disagree with its elements")
        totals[0] += 1
        totals[1] += cases
        totals[2] += nf
        totals[3] += ne
    print(f"testsuites={totals[0]} testcases={totals[1]} failures={totals[2]} errors={totals[3]}")


main()
