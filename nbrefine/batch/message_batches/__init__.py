"""``--batch``: the model requests of a batch of notebooks as Anthropic Message Batches.

:mod:`.spool` is the kernel's side (each request written to a spool folder, its result awaited);
:mod:`.rounds` is the client's (the requests gathered into one Message Batch a round at a time,
polled, and each result handed back). "Batch" alone, in this package's parent, means many
notebooks; here a *Message Batch* is Anthropic's API object.

May import: nothing (its modules are imported by name)."""
