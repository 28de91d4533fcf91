"""The ground truth a repair is built on, gathered in the kernel: the failure, the values, the history.

The bottom layer of nbrefine (besides :mod:`nbrefine._errors`): failure capture, typed value
summaries, secret redaction, the notebook's history and the one scope analysis. Everything here is
plain Python with no IPython import, and nothing here imports another nbrefine layer.

May import: :mod:`nbrefine._errors`, the standard library and third-party libraries.
"""
