#!/usr/bin/env python3
"""The phases of the test command, from the tests' Swift Testing tags.

Usage: scripts/test-phases.py BUNDLE
Prints one line per phase, `NAME REGEX`: first `tagged`, every test that has a phase tag (the
first phase skips them), then `timing`, `load`, `outage` and `fuzz` in the order they run, each
a regular expression `swift test --filter` takes. The tags are declared in
Tests/TestSupport/TestPhases.swift.

`swift test --filter` matches test ids, not tags (Swift 6.3.1), so the bundle lists its tests
with their tags through Swift Testing's event stream (`--list-tests` with
`--experimental-event-stream-output`, version 0, whose experimental `_tags` field
SWT_EXPERIMENTAL_EVENT_STREAM_FIELDS_ENABLED turns on): see docs/upstream.md. Fails, naming
the cause, when the list has no tags at all or a phase has no test, rather than run a phase
empty or every test in the first one.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

PHASES = ["timing", "load", "outage", "fuzz"]


def fail(message):
    print(f"test-phases: {message}", file=sys.stderr)
    sys.exit(1)


def listed(bundle):
    with tempfile.TemporaryDirectory() as folder:
        stream = os.path.join(folder, "tests.jsonl")
        environment = dict(os.environ, SWT_EXPERIMENTAL_EVENT_STREAM_FIELDS_ENABLED="1")
        subprocess.run(
            [bundle, "--testing-library", "swift-testing", "--list-tests",
             "--experimental-event-stream-output", stream, "--experimental-event-stream-version", "0"],
            env=environment, stdout=subprocess.DEVNULL, check=True)
        with open(stream) as lines:
            records = [json.loads(line) for line in lines if line.strip()]
    return [record["payload"] for record in records if record.get("kind") == "test"]


def outermost(ids):
    """The ids no other id of the set contains (a suite stands for its tests)."""
    return sorted(i for i in ids if not any(i.startswith(other + "/") for other in ids if other != i))


def pattern(ids):
    return "|".join(re.escape(i) + "(/|$)" for i in outermost(set(ids)))


def main():
    if len(sys.argv) != 2:
        fail("usage: scripts/test-phases.py BUNDLE")
    tests = listed(sys.argv[1])
    if not tests:
        fail("the test bundle listed no tests")
    if not any("_tags" in test for test in tests):
        fail("the test list carries no tags: this toolchain's event stream lacks the experimental "
             "_tags field (docs/upstream.md, 'Tests chosen by tag')")
    phases = {phase: [] for phase in PHASES}
    for test in tests:
        tags = [tag.lstrip(".") for tag in test.get("_tags", [])]
        found = [phase for phase in PHASES if phase in tags]
        if len(found) > 1:
            fail(f"{test['id']} has the tags of two phases: {', '.join(found)}")
        if found:
            phases[found[0]].append(test["id"])
    for phase, ids in phases.items():
        if not ids:
            fail(f"no test has the tag .{phase} (Tests/TestSupport/TestPhases.swift)")
    print("tagged " + pattern([i for ids in phases.values() for i in ids]))
    for phase in PHASES:
        print(f"{phase} " + pattern(phases[phase]))


main()
