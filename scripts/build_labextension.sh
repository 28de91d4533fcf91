#!/usr/bin/env bash
# Build nbrefine's JupyterLab 4 / Notebook 7 extension: labextension/ -> nbrefine/labextension
# (the prebuilt extension that the wheel ships as share/jupyter/labextensions/nbrefine-labextension).
#
#   scripts/build_labextension.sh           build when the sources are newer than the last build
#   scripts/build_labextension.sh --clean   first remove node_modules, lib and the build output
#   scripts/build_labextension.sh --link    also link the build into the venv's
#                                           share/jupyter/labextensions (what `jupyter lab` from
#                                           the venv then loads; like `jupyter labextension develop`)
#
# Needs Node.js >= 20 and the npm registry; jlpm and jupyter-builder come from the venv
# (`pip install -e ".[browser]"`). With CI=true the lock file must be up to date (--immutable).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${NBREFINE_VENV:-.venv}"
EXT=labextension
OUT=nbrefine/labextension
clean=0 link=0
for arg in "$@"; do
    case "$arg" in
        --clean) clean=1 ;;
        --link) link=1 ;;
        *) echo "usage: $0 [--clean] [--link]" >&2; exit 2 ;;
    esac
done

if ! command -v node >/dev/null; then
    echo "build_labextension: Node.js is needed (>= 20) to build the extension" >&2
    exit 1
fi
if [ ! -x "$VENV/bin/jlpm" ] || [ ! -x "$VENV/bin/jupyter-builder" ]; then
    echo "build_labextension: jlpm/jupyter-builder missing in $VENV: pip install -e \".[browser]\"" >&2
    exit 1
fi
VENV="$(cd "$VENV" && pwd)"
export PATH="$VENV/bin:$PATH"

if [ "$clean" = 1 ]; then
    rm -rf "$EXT/node_modules" "$EXT/lib" "$EXT/tsconfig.tsbuildinfo" "$OUT"
fi

stale=1
if [ -f "$OUT/package.json" ] && [ -d "$EXT/node_modules" ]; then
    newer=$(find "$EXT/src" "$EXT/package.json" "$EXT/tsconfig.json" "$EXT/yarn.lock" "$EXT/.yarnrc.yml" \
        -newer "$OUT/package.json" -print -quit)
    [ -z "$newer" ] && stale=0
fi

if [ "$stale" = 1 ]; then
    started=$SECONDS
    (
        cd "$EXT"
        if [ "${CI:-}" = true ]; then jlpm install --immutable; else jlpm install; fi
        jlpm build:prod
    )
    touch "$OUT/package.json"
    echo "build_labextension: built $OUT in $((SECONDS - started)) s"
else
    echo "build_labextension: $OUT is up to date"
fi

if [ "$link" = 1 ]; then
    dest="$VENV/share/jupyter/labextensions/nbrefine-labextension"
    mkdir -p "$(dirname "$dest")"
    rm -rf "$dest"
    ln -s "$PWD/$OUT" "$dest"
    echo "build_labextension: linked $dest -> $OUT"
fi
