"""Which modules exist, found without importing them (the top-level scan is cached once),
and the names packages are installed under (``sklearn`` is ``%pip install scikit-learn``).

May import: the standard library, nothing else of this package; never the sandbox, the engine,
IPython or the CLI (the offline tier only reads what the failure context gives it)."""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import pkgutil
import sys
import threading

_MODULE_LOCK = threading.Lock()
_TOP_MODULES: frozenset[str] | None = None
_FIND_SPEC_CACHE: dict[str, bool] = {}

#: import name -> the name to ``%pip install``.
PIP_NAMES = {
    "sklearn": "scikit-learn",
    "cv2": "opencv-python",
    "PIL": "pillow",
    "yaml": "pyyaml",
    "bs4": "beautifulsoup4",
    "dateutil": "python-dateutil",
    "skimage": "scikit-image",
    "Bio": "biopython",
    "dotenv": "python-dotenv",
    "docx": "python-docx",
    "fitz": "pymupdf",
    "attr": "attrs",
    "Crypto": "pycryptodome",
    "serial": "pyserial",
    "jwt": "pyjwt",
    "magic": "python-magic",
    "google.protobuf": "protobuf",
}
#: A package's install name written as an import -> the import name.
_IMPORT_NAMES = {
    "scikit_learn": "sklearn",
    "scikitlearn": "sklearn",
    "opencv": "cv2",
    "opencv_python": "cv2",
    "pillow": "PIL",
    "pyyaml": "yaml",
    "beautifulsoup4": "bs4",
    "beautifulsoup": "bs4",
    "python_dateutil": "dateutil",
    "scikit_image": "skimage",
    "pytorch": "torch",
    "tensorflow_gpu": "tensorflow",
}
#: Import names of well-known packages: one that is missing is not installed, not misspelt.
_POPULAR_PACKAGES = (
    "numpy pandas matplotlib seaborn scipy sklearn statsmodels plotly polars xarray pyarrow dask numba "
    "sympy networkx bokeh altair xgboost lightgbm catboost torch torchvision tensorflow keras jax "
    "transformers datasets requests httpx openpyxl xlrd tqdm pydantic fastapi flask django sqlalchemy "
    "psycopg2 pymongo redis boto3 geopandas shapely folium nltk spacy gensim"
)
_KNOWN_PACKAGES = frozenset(
    {*PIP_NAMES, *(module.split(".")[0] for module in PIP_NAMES), *_POPULAR_PACKAGES.split()}
)
_UNSAFE_STDLIB = frozenset({"antigravity", "this", "idlelib", "turtle", "turtledemo", "tkinter", "__hello__"})


def _importable(name: str) -> bool:
    """Whether top-level module ``name`` can be imported (without importing it)."""
    if _FIND_SPEC_CACHE.get(name) or name in sys.modules:
        return True
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError, AttributeError):
        found = False
    if found:  # only successes are kept: a package installed later must still be found
        _FIND_SPEC_CACHE[name] = True
    return found


def _top_modules() -> frozenset[str]:
    global _TOP_MODULES
    with _MODULE_LOCK:
        if _TOP_MODULES is None:
            names = set(sys.builtin_module_names)
            names |= {name.split(".")[0] for name in list(sys.modules)}
            with contextlib.suppress(Exception):
                names |= {info.name for info in pkgutil.iter_modules()}
            _TOP_MODULES = frozenset(n for n in names if n.isidentifier())
        return _TOP_MODULES


def _submodules(package: str) -> list[str] | None:
    """Submodule names of a dotted package, found without importing it (None: not a package)."""
    parts = package.split(".")
    try:
        spec = importlib.util.find_spec(parts[0]) if parts[0] not in sys.modules else None
    except (ImportError, ValueError, AttributeError):
        return None
    module = sys.modules.get(parts[0])
    locations: list[str] | None
    if module is not None:
        locations = list(getattr(module, "__path__", []) or [])
    else:
        locations = list(spec.submodule_search_locations or []) if spec is not None else None
    if not locations:
        return None
    for index in range(1, len(parts)):
        full = ".".join(parts[: index + 1])
        loaded = sys.modules.get(full)
        if loaded is not None:
            locations = list(getattr(loaded, "__path__", []) or [])
        else:
            sub = importlib.machinery.PathFinder.find_spec(full, locations)
            if sub is None or not sub.submodule_search_locations:
                return None
            locations = list(sub.submodule_search_locations)
        if not locations:
            return None
    return [info.name for info in pkgutil.iter_modules(locations)]
