#!/usr/bin/env python3
"""Removes tests that now pass from xfail.txt and recounts the group headers.

    build/bin/kiln-conformance --xfail test/conformance/xfail.txt > run.txt
    test/conformance/prune-xfail.py run.txt test/conformance/xfail.txt
"""
import re
import sys

run, path = sys.argv[1], sys.argv[2]
ENTRY = re.compile(r"^([\w-]+/)?test_")  # node tests, or SUITE/test_ for the other suites
passed = {line.split()[1] for line in open(run)
          if line.startswith("PASS ") and "UNEXPECTED PASS" in line}
lines = [l for l in open(path).read().splitlines()
         if not (ENTRY.match(l) and l.split(":")[0] in passed)]
out, i = [], 0
while i < len(lines):
    line = lines[i]
    if line.startswith("# ") and re.search(r"\(\d+\)$", line):
        j = i + 1
        while j < len(lines) and ENTRY.match(lines[j]):
            j += 1
        members = lines[i + 1:j]
        if members:
            out.append(re.sub(r"\(\d+\)$", "(%d)" % len(members), line))
            out += members
        i = j
        continue
    out.append(line)
    i += 1
text = "\n".join(out) + "\n"
while "\n\n\n" in text:
    text = text.replace("\n\n\n", "\n\n")
open(path, "w").write(text)
print("removed %d passing entries" % len(passed))
