"""nbrefine's version, in a leaf module: every layer may import it (the package root may not be
imported from inside: it loads the IPython side lazily). Imports nothing."""

__version__ = "0.1.0"
