#!/usr/bin/env bash
# The release check: what `pip install nbrefine` would give a user, built and tried for real.
#
#   scripts/check_release.sh
#
# 1. an sdist, built by `python -m build --sdist` from a clean copy of the checkout (the tracked
#    files, as a fresh clone has them: the build hook runs `jlpm install` and `jlpm build:prod`
#    itself, so this needs Node.js >= 20 and the npm registry);
# 2. the wheel, built from that sdist (as `python -m build` does) with Node.js off PATH: the
#    sdist carries the built extension, so no Node.js is needed;
# 3. what each holds: no node_modules, build outputs or test artifacts in the sdist; the
#    extension's package.json, static/ and install.json in the wheel;
# 4. `twine check --strict` on both;
# 5. the wheel and JupyterLab (from PyPI) installed into a fresh virtual environment, then, from
#    an empty folder, with no Node.js on PATH, no checkout, an empty environment and its own HOME:
#    `nbrefine --version`, `jupyter labextension list` (the extension enabled, from that
#    environment) and the demo (`nbrefine fix` on a copy of notebooks/demo.ipynb: exit 1, six
#    cells fixed offline, the last cell's logic bug still failing).
#
# The dists are left in dist/ (CI uploads them). Needs the dev environment's build and twine
# (the test extra, which ./dev installs), Node.js and the network (PyPI, npm). Each failure is
# one line starting with "check_release: FAIL:".
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
VENV="${NBREFINE_VENV:-.venv}"
PY="$VENV/bin/python"
started=$SECONDS

fail() {
    echo "check_release: FAIL: $*" >&2
    exit 1
}
step() { echo "check_release: [$((SECONDS - started)) s] $*"; }

[ -x "$PY" ] || fail "no virtual environment at $VENV: run ./dev test first (it installs the test extra)"
"$PY" -c "import build, twine" 2>/dev/null || fail "build and twine are missing in $VENV: pip install -e '.[test]'"
command -v node >/dev/null || fail "Node.js (>= 20) is needed to build the extension into the sdist"
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || fail "run it in a git checkout (it builds from the tracked files)"
version="$("$PY" -c 'import runpy; print(runpy.run_path("nbrefine/_version.py")["__version__"])')"

work="$(mktemp -d -t nbrefine-release.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/dist" "$work/sdist" "$work/nonode" "$work/home" "$work/run"

# A PATH without Node.js: every command of the current PATH, linked, except node and its tools.
IFS=: read -r -a path_dirs <<<"$PATH"
for dir in "${path_dirs[@]}"; do
    [ -d "$dir" ] || continue
    for cmd in "$dir"/*; do
        name="${cmd##*/}"
        case "$name" in node | nodejs | npm | npx | corepack | yarn | yarnpkg | jlpm) continue ;; esac
        [ -x "$cmd" ] && [ ! -e "$work/nonode/$name" ] && ln -s "$cmd" "$work/nonode/$name"
    done
done
NONODE="$work/nonode"
if PATH="$NONODE" command -v node >/dev/null; then fail "could not take Node.js off PATH"; fi

# 1. The sdist, from the tracked files (and new ones not ignored), plus planted test artifacts
#    and caches that it must leave out.
git ls-files -z --cached --others --exclude-standard \
    | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$work/src"
mkdir -p "$work/src/tests/browser/artifacts" "$work/src/nbrefine/__pycache__" "$work/src/.pytest_cache"
echo planted >"$work/src/tests/browser/artifacts/planted.png"
echo planted >"$work/src/nbrefine/__pycache__/planted.cpython-311.pyc"
echo planted >"$work/src/.pytest_cache/planted"
step "building the sdist (the extension with jlpm) from a clean copy"
CI=true "$PY" -m build --sdist --outdir "$work/dist" "$work/src" >"$work/sdist.log" 2>&1 \
    || fail "python -m build --sdist failed; the end of its log: $(tail -n 5 "$work/sdist.log" | tr '\n' ' ')"
sdist="$work/dist/nbrefine-$version.tar.gz"
[ -f "$sdist" ] || fail "no $(basename "$sdist") (built: $(ls "$work/dist"))"

# 2. The wheel, from the unpacked sdist, without Node.js.
tar -xzf "$sdist" -C "$work/sdist"
step "building the wheel from the sdist, no Node.js on PATH"
PATH="$NONODE" "$PY" -m build --wheel --outdir "$work/dist" "$work/sdist/nbrefine-$version" \
    >"$work/wheel.log" 2>&1 \
    || fail "the wheel does not build from the sdist without Node.js; the end of its log: $(tail -n 5 "$work/wheel.log" | tr '\n' ' ')"
wheel="$work/dist/nbrefine-$version-py3-none-any.whl"
[ -f "$wheel" ] || fail "no $(basename "$wheel") (built: $(ls "$work/dist"))"

# 3. What they hold.
"$PY" - "$sdist" "$wheel" "$version" <<'EOF' || exit 1
import re, sys, tarfile, zipfile

sdist, wheel, version = sys.argv[1:]
problems = []
top = f"nbrefine-{version}/"
with tarfile.open(sdist) as tar:
    names = [n[len(top):] for n in tar.getnames() if n.startswith(top)]
forbidden = re.compile(
    r"(^|/)(node_modules|__pycache__|\.pytest_cache|\.mypy_cache|\.ruff_cache|\.yarn|\.venv|\.git)(/|$)"
    r"|^labextension/lib/|\.tsbuildinfo$|\.pyc$|^tests/browser/artifacts/|^(dist|build|out)/|\.fixed\.ipynb$"
)
bad = sorted(n for n in names if forbidden.search(n))
if bad:
    problems.append(f"the sdist carries {len(bad)} files it must not, e.g. {bad[:3]}")
for needed in ("pyproject.toml", "README.md", "LICENSE", "nbrefine/_version.py", "nbrefine/labextension/package.json",
               "labextension/src/index.ts", "labextension/yarn.lock", "labextension/install.json"):
    if needed not in names:
        problems.append(f"the sdist lacks {needed}")
ext = f"nbrefine-{version}.data/data/share/jupyter/labextensions/nbrefine-labextension/"
with zipfile.ZipFile(wheel) as whl:
    files = whl.namelist()
    metadata = whl.read(f"nbrefine-{version}.dist-info/METADATA").decode()
for needed in ("package.json", "install.json"):
    if ext + needed not in files:
        problems.append(f"the wheel lacks {ext + needed}")
if not any(f.startswith(ext + "static/") and f.endswith(".js") for f in files):
    problems.append(f"the wheel has no {ext}static/*.js")
if f"nbrefine-{version}.dist-info/licenses/LICENSE" not in files:
    problems.append("the wheel lacks its LICENSE")
if f"\nVersion: {version}\n" not in metadata:
    problems.append(f"the wheel's METADATA does not say Version: {version}")
bad = sorted(f for f in files if re.search(r"__pycache__|\.pyc$|node_modules", f))
if bad:
    problems.append(f"the wheel carries {len(bad)} files it must not, e.g. {bad[:3]}")
for problem in problems:
    print(f"check_release: FAIL: {problem}", file=sys.stderr)
if problems:
    sys.exit(1)
print(f"check_release: the sdist holds {len(names)} files, the wheel {len(files)}; the extension is in the wheel")
EOF

# 4. twine.
"$PY" -m twine check --strict "$sdist" "$wheel" >"$work/twine.log" 2>&1 \
    || fail "twine check: $(grep -v '^Checking' "$work/twine.log" | tr '\n' ' ')"
step "twine check --strict passed on both"

# 5. A fresh environment with the wheel, JupyterLab and the demo's pandas, from PyPI.
step "installing the wheel, jupyterlab and pandas into a fresh virtual environment"
"$PY" -m venv "$work/venv"
env -u PYTHONPATH -u VIRTUAL_ENV "$work/venv/bin/python" -m pip install -q "$wheel" jupyterlab pandas \
    >"$work/pip.log" 2>&1 || fail "pip install of the wheel failed: $(tail -n 3 "$work/pip.log" | tr '\n' ' ')"

# From here on: an empty folder, an empty environment, no Node.js, no checkout.
fresh() {
    (cd "$work/run" && env -i HOME="$work/home" PATH="$work/venv/bin:$NONODE" LANG=C.UTF-8 "$@")
}
fresh sh -c 'command -v node' >/dev/null && fail "node is on the fresh environment's PATH"
where="$(fresh python -c 'import nbrefine; print(nbrefine.__file__)')"
case "$where" in "$work/venv/"*) ;; *) fail "nbrefine imports from $where, not the fresh environment" ;; esac
said="$(fresh nbrefine --version)"
[ "$said" = "nbrefine $version" ] || fail "nbrefine --version says '$said', not 'nbrefine $version'"

listed="$(fresh jupyter labextension list 2>&1)" || fail "jupyter labextension list failed: $listed"
printf '%s\n' "$listed" | "$work/venv/bin/python" -c '
import re, sys
want, version = sys.argv[1:]
folder, found = None, []
for line in sys.stdin:
    line = re.sub(r"\x1b\[[0-9;]*m", "", line).rstrip()  # its colours
    if line.startswith("/"):
        folder = line
    elif line.split()[:1] == ["nbrefine-labextension"]:
        found.append((folder, " ".join(line.split())))
expect = f"nbrefine-labextension v{version} enabled OK (python, nbrefine)"
if found != [(want, expect)]:
    shown = found or "no nbrefine-labextension"
    sys.exit(f"check_release: FAIL: jupyter labextension list shows {shown}, not {expect!r} in {want}")
' "$work/venv/share/jupyter/labextensions" "$version" || exit 1
step "jupyter labextension list: nbrefine-labextension v$version enabled OK, from the fresh environment"

cp "$ROOT/notebooks/demo.ipynb" "$work/run/"
cp -r "$ROOT/notebooks/data" "$work/run/"
status=0
fresh nbrefine fix demo.ipynb -o demo.fixed.ipynb --report report.json >"$work/demo.log" 2>&1 || status=$?
[ "$status" = 1 ] || fail "the demo exited $status, not 1: $(tail -n 5 "$work/demo.log" | tr '\n' ' ')"
fresh python -c '
import json, sys
cells = json.load(open("report.json"))["cells"]
fixed = [c["id"] for c in cells if c["status"] == "fixed"]
unfixed = [c["id"] for c in cells if c["status"] == "unfixed"]
if len(fixed) != 6 or unfixed != ["share"]:
    sys.exit(f"check_release: FAIL: the demo fixed {len(fixed)} cells {fixed} and left {unfixed} failing, "
             "not 6 fixed and the share cell failing")
' || exit 1
step "the demo in the fresh environment: exit 1, 6 cells fixed, the logic bug left failing"

mkdir -p "$ROOT/dist"
rm -f "$ROOT/dist/nbrefine-"*
cp "$sdist" "$wheel" "$ROOT/dist/"
sizes="$(cd "$ROOT/dist" && du -k "nbrefine-$version.tar.gz" "nbrefine-$version-py3-none-any.whl" | awk '{printf "%s %s KiB; ", $2, $1}')"
echo "check_release: OK in $((SECONDS - started)) s: dist/ holds ${sizes%; }"
