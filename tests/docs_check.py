#!/usr/bin/env python3
"""The front door stays true: README.md, CHANGELOG.md and docs/*.md name only what exists.

- every relative link points at a file or folder of the repository;
- every LOOM_* name is a variable of base/env.cpp's table, a name of the public
  headers, or a CMake option or preset variable;
- every loom-* program named in backquotes is one the build makes;
- README.md is at most 220 lines, its status table's cells at most 120 characters, and
  neither it nor docs/ cites an issue by number (they mean nothing to a reader).

    docs_check.py REPOSITORY
"""
import glob
import os
import re
import sys

root = sys.argv[1]
pages = [os.path.join(root, "README.md"), os.path.join(root, "CHANGELOG.md")]
pages += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
failures = []


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


known = set(re.findall(r'\{"(LOOM_[A-Z0-9_]+)"', read(os.path.join(root, "base", "env.cpp"))))
for header in glob.glob(os.path.join(root, "include", "loom", "*")):
    known |= set(re.findall(r"\bLOOM_[A-Z0-9_]+", read(header)))
cmake = [os.path.join(root, "CMakePresets.json")] + glob.glob(os.path.join(root, "cmake", "*"))
cmake += glob.glob(os.path.join(root, "**", "CMakeLists.txt"), recursive=True)
cmake += glob.glob(os.path.join(root, "scripts", "*"))
for path in cmake:
    if "/build/" not in path and os.path.isfile(path):
        known |= set(re.findall(r"\bLOOM_[A-Z0-9_]+", read(path)))
# Programs the build makes (add_executable and OUTPUT_NAME), and the pkg-config files it installs.
tools = set()
for path in glob.glob(os.path.join(root, "**", "CMakeLists.txt"), recursive=True) + glob.glob(os.path.join(root, "cmake", "*")):
    if "/build/" not in path:
        text = read(path)
        tools |= set(re.findall(r"add_executable\((loom[a-z-]*)", text))
        tools |= set(re.findall(r"OUTPUT_NAME (loom[a-z-]*)", text))
        tools |= {os.path.basename(p)[:-len(".pc.in")] for p in glob.glob(os.path.join(root, "cmake", "*.pc.in"))}

for page in pages:
    text = read(page)
    name = os.path.relpath(page, root)
    here = os.path.dirname(page)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = os.path.normpath(os.path.join(here, target.split("#")[0]))
        if not os.path.exists(path):
            failures.append(f"{name}: the link {target} points at nothing")
    for var in sorted(set(re.findall(r"\bLOOM_[A-Z0-9_]+", text)) - known):
        failures.append(f"{name}: {var} is no variable, API name or build option of Loom's")
    for tool in sorted(set(re.findall(r"`(loom-[a-z-]*[a-z])", text)) - tools):
        failures.append(f"{name}: the program {tool} is not one the build makes")
    for m in re.finditer(r"\bissues? \d+", text):
        failures.append(f"{name}: cites {m.group(0)}; say what it is instead")

readme = read(pages[0]).split("\n")
if len(readme) > 220:
    failures.append(f"README.md: {len(readme)} lines, more than 220 (details belong in docs/)")
status = False
for line in readme:
    if line.startswith("## "):
        status = line.startswith("## Status")
    if status and line.startswith("|"):
        for cell in line.strip("|").split("|"):
            if len(cell.strip()) > 120:
                failures.append(f"README.md: a status cell of {len(cell.strip())} characters: {cell.strip()[:60]}...")

for f in failures:
    print("FAIL:", f)
if failures:
    sys.exit(1)
print(f"{len(pages)} pages: every link, LOOM_* name and tool exists; README.md {len(readme)} lines")
