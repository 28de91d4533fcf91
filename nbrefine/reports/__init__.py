"""Reports over a batch of notebooks, rendered from the run record one notebook at a time.

``summary``: the repository/CI summary (Markdown, JSON, JUnit XML); ``classroom``: the class
report of a teaching run (one HTML page for the instructor, a feedback file per student).
Every figure in them is computed from the run.

May import: nothing (its modules are imported by name)."""
