"""``nbrefine fix`` over many notebooks: one kernel per notebook, several at once.

The seam, for executors to come (a cluster):

* :func:`nbrefine.batch.notebook_job.repair_one` repairs ONE notebook and returns a picklable
  :class:`~nbrefine.batch.notebook_job.NotebookResult` (the repaired notebook's text, its report, its
  timings); it writes nothing.
* An :class:`~nbrefine.batch.pool.Executor` runs those jobs: :class:`~nbrefine.batch.pool.LocalPool`
  (worker processes on this machine) today.
* The model requests of every job share one :class:`~nbrefine.batch.gate.RequestGate` (a limit
  on concurrent requests, one budget, a shared back-off on 429s), opened in each kernel from a
  spec string: :class:`~nbrefine.batch.gate.FileGate` on one machine.
* :mod:`nbrefine.batch.client` is the client: it writes every result, records it in the run
  record (``--resume``) and renders the reports (:mod:`nbrefine.reports`).

May import: nothing (its modules are imported by name)."""
