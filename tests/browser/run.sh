#!/usr/bin/env bash
# Browser tests: nbrefine's labextension and review panel in a real JupyterLab 4 and a real
# Notebook 7 (servers on 127.0.0.1), driven by Playwright in Debian's headless chromium.
#
#   tests/browser/run.sh [pytest args]
#
# Sets up what it needs, each step skipped when already done:
#   1. Debian's chromium (apt-get install; needs root, as in CI) — no browser download;
#   2. the `browser` extra (jupyterlab, notebook, jupyter-builder, playwright) in the venv;
#   3. the extension, built by scripts/build_labextension.sh (Node.js + the npm registry);
# then runs tests/browser with NBREFINE_BROWSER_TESTS=1 (without it they are skipped).
# Screenshots and server logs go to tests/browser/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${NBREFINE_VENV:-.venv}"
CHROMIUM="${NBREFINE_CHROMIUM:-/usr/lib/chromium/chromium}"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
started=$SECONDS

if [ ! -x "$CHROMIUM" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "run.sh: no chromium at $CHROMIUM; install Debian's package: sudo apt-get install -y chromium" >&2
        exit 1
    fi
    echo "run.sh: installing Debian's chromium"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
stamp="$VENV/.nbrefine-browser-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "run.sh: installing the browser extra"
    "$VENV/bin/python" -m pip install -q -e ".[test,browser]"
    touch "$stamp"
fi

scripts/build_labextension.sh

echo "run.sh: set up in $((SECONDS - started)) s; running the browser tests"
export NBREFINE_BROWSER_TESTS=1
exec "$VENV/bin/python" -m pytest tests/browser -p no:cacheprovider "$@"
