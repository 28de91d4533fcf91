/**
 * After Accept: the cell tells one true story. The extension writes the fix into the cell and
 * then runs the cell itself, through JupyterLab, so that the notebook's own machinery records
 * the fixed run's outputs and execution count (the stale traceback and the "Run All stopped
 * here" line go with the old outputs); above those outputs it puts one line, "✔ Fixed by
 * nbrefine — 2 tries · details · undo", plus "2 cells below did not run · Run them" when a Run
 * All stopped at this cell. The kernel has done Accept's checks and first step (undoing what
 * the failed run rebound) before it asks, so the cell runs exactly once.
 *
 * The cell is found by the execute request that ran it (the kernel sends that request's id),
 * not by comparing texts: IPython rewrites a cell magic's whitespace-only lines, so the text
 * the kernel saw is not the text of the cell. "Edited since it ran" compares the cell with the
 * text that request sent.
 */
import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import type { Cell, ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import type { Kernel, KernelMessage } from '@jupyterlab/services';
import type { JSONObject } from '@lumino/coreutils';
import type * as nbformat from '@jupyterlab/nbformat';

/** The execute requests this frontend sent: message id -> the cell and the code it ran. */
const executions = new Map<string, { cellId: string; code: string }>();
const MAX_EXECUTIONS = 2000;
const tracked = new WeakSet<Kernel.IKernelConnection>();

/** Remember every execute request sent on `kernel` (their metadata carries the cell id). */
export function trackExecutions(kernel: Kernel.IKernelConnection): void {
  if (tracked.has(kernel)) {
    return;
  }
  tracked.add(kernel);
  kernel.anyMessage.connect((_, args) => {
    const msg = args.msg;
    if (args.direction !== 'send' || msg.header.msg_type !== 'execute_request') {
      return;
    }
    const cellId = (msg.metadata as JSONObject | undefined)?.['cellId'];
    const code = (msg.content as KernelMessage.IExecuteRequestMsg['content']).code;
    if (typeof cellId !== 'string' || typeof code !== 'string') {
      return;
    }
    executions.set(msg.header.msg_id, { cellId, code });
    if (executions.size > MAX_EXECUTIONS) {
      const oldest = executions.keys().next().value;
      if (oldest !== undefined) {
        executions.delete(oldest);
      }
    }
  });
}

/**
 * Which cell a write_cell request means, and the source it must still have: the cell the
 * request's `execute_request` ran and the code it sent, when this frontend sent it; else the
 * request's `cell_id` and `expected_source` (a page reloaded since, another client).
 */
export function target(data: JSONObject): { cellId: unknown; expected: unknown } {
  return ranAs(data['execute_request'], data['cell_id'], data['expected_source']);
}

/** `target` for one cell of a request: `ran` the request's `execute_request`. */
export function ranAs(
  ran: unknown,
  cellId: unknown,
  expected: unknown
): { cellId: unknown; expected: unknown } {
  const known = typeof ran === 'string' ? executions.get(ran) : undefined;
  if (known !== undefined && known.cellId === cellId) {
    return { cellId: known.cellId, expected: known.code };
  }
  return { cellId, expected };
}

export function widgetOf(panel: NotebookPanel, cell: ICellModel): Cell | undefined {
  return panel.content.widgets.find(widget => widget.model === cell);
}

/** Whether the request asks the frontend to run the cell, and this frontend can. */
export function canRun(
  panel: NotebookPanel,
  cell: ICellModel,
  data: JSONObject
): boolean {
  return (
    data['run'] === true &&
    cell.type === 'code' &&
    widgetOf(panel, cell) !== undefined &&
    !!panel.sessionContext.session?.kernel
  );
}

/** The code cells below `cell` that have not run since (a Run All stopped before them). */
export function notRunBelow(panel: NotebookPanel, cell: ICellModel): Cell[] {
  const widgets = panel.content.widgets;
  const index = widgets.findIndex(widget => widget.model === cell);
  return widgets
    .slice(index + 1)
    .filter(
      widget =>
        widget.model.type === 'code' &&
        (widget.model as ICodeCellModel).executionCount === null &&
        widget.model.sharedModel.getSource().trim() !== ''
    );
}

export async function run(panel: NotebookPanel, cells: Cell[]): Promise<boolean> {
  return NotebookActions.runCells(panel.content, cells, panel.sessionContext);
}

const BELOW = '<span class="nbr-below"></span>';

function belowNote(count: number): string {
  const cells = count === 1 ? '1 cell below did not run' : `${count} cells below did not run`;
  return (
    `<span class="nbr-below"> · ${cells} · <button type="button" class="nbr-link" ` +
    'data-nbrefine-action="run-below">Run them</button></span>'
  );
}

export function withBelow(output: nbformat.IOutput, count: number): nbformat.IOutput {
  const data = { ...((output.data as JSONObject | undefined) ?? {}) };
  const markup = data['text/html'];
  if (typeof markup === 'string') {
    const note = count > 0 ? belowNote(count) : BELOW;
    data['text/html'] = markup.replace(/<span class="nbr-below">[\s\S]*?<\/span>/, note);
  }
  return { ...output, data } as nbformat.IOutput;
}

/**
 * Run the fixed cell; when it passes, run the failing cell `then_run` names, if any (the fix
 * was written into the cell that defines what failed), so that its outputs become those of a
 * run with the fix; then put the kernel's one-line summary (`fixed_output`, a display_data)
 * above the fixed cell's outputs, with the cells below that did not run.
 */
export async function runFixed(
  panel: NotebookPanel,
  cell: ICellModel,
  data: JSONObject
): Promise<void> {
  const widget = widgetOf(panel, cell);
  if (widget === undefined) {
    return;
  }
  let ok = await run(panel, [widget]);
  const next = data['then_run'];
  const failing = panel.content.widgets.find(w => typeof next === 'string' && w.model.id === next);
  if (ok && failing !== undefined && failing !== widget) {
    ok = await run(panel, [failing]);
  }
  const line = data['fixed_output'];
  if (!ok || !line || typeof line !== 'object' || cell.type !== 'code') {
    return;
  }
  const outputs = (cell as ICodeCellModel).outputs;
  const count = notRunBelow(panel, cell).length;
  outputs.fromJSON([withBelow(line as nbformat.IOutput, count), ...outputs.toJSON()]);
}

export function isFixedLine(output: nbformat.IOutput): boolean {
  const meta = output.metadata as JSONObject | undefined;
  const mine = meta?.['nbrefine'] as JSONObject | undefined;
  return !!mine && mine['fixed'] === true;
}

/** "Run them": the cells below that did not run, in order; then the note goes. */
async function runBelow(panel: NotebookPanel, cell: ICodeCellModel): Promise<void> {
  const below = notRunBelow(panel, cell);
  if (below.length) {
    await run(panel, below);
  }
  const index = cell.outputs.toJSON().findIndex(isFixedLine);
  if (index >= 0) {
    cell.outputs.set(index, withBelow(cell.outputs.get(index).toJSON(), notRunBelow(panel, cell).length));
  }
}

/**
 * "undo": the cell's original code back (one undo step, as the write was), and its outputs
 * cleared: they came from the fixed code. The kernel keeps what the fixed run did.
 */
function undo(
  cell: ICodeCellModel,
  replaceSource: (cell: ICellModel, source: string, provenance: JSONObject | undefined) => void
): void {
  const provenance = cell.getMetadata('nbrefine') as JSONObject | undefined;
  const original = provenance?.['original_source'];
  if (typeof original !== 'string') {
    return;
  }
  replaceSource(cell, original, { ...provenance, undone_at: new Date().toISOString() });
  markUndone(cell);
}

/** The outputs came from the fixed code: they go, and one line says so. */
export function markUndone(cell: ICodeCellModel): void {
  cell.sharedModel.transact(() => {
    cell.clearExecution();
  }, false);
  cell.outputs.add({
    output_type: 'display_data',
    data: {
      'text/plain':
        'nbrefine: undone — this is the cell as it was; the kernel keeps what the fixed run did',
      'text/html':
        '<div class="nbr-undone">↶ Undone — this is the cell as it was. The kernel keeps what the ' +
        'fixed run did; run the cell to see it fail again.</div>'
    },
    metadata: { nbrefine: { undone: true } }
  });
}

const listening = new WeakSet<NotebookPanel>();

/** The fixed line's buttons (its HTML has no script: one listener per notebook handles them). */
export function handleActions(
  panel: NotebookPanel,
  replaceSource: (cell: ICellModel, source: string, provenance: JSONObject | undefined) => void,
  undoTogether?: (panel: NotebookPanel, cell: ICellModel) => boolean
): void {
  if (listening.has(panel)) {
    return;
  }
  listening.add(panel);
  panel.content.node.addEventListener('click', event => {
    const button = (event.target as HTMLElement | null)?.closest?.('[data-nbrefine-action]');
    if (!button) {
      return;
    }
    const widget = panel.content.widgets.find(w => w.node.contains(button));
    if (!widget || widget.model.type !== 'code') {
      return;
    }
    event.preventDefault();
    event.stopPropagation();
    const action = button.getAttribute('data-nbrefine-action');
    const cell = widget.model as ICodeCellModel;
    if (action === 'details') {
      const details = button.closest('.nbr-fixed')?.querySelector('.nbr-fixed-details');
      if (details) {
        const open = details.hasAttribute('hidden');
        details.toggleAttribute('hidden', !open);
        button.setAttribute('aria-expanded', String(open));
      }
    } else if (action === 'undo') {
      // a fix of several cells (write_cells, cells.ts) is undone in all of them at once
      if (!undoTogether?.(panel, cell)) {
        undo(cell, replaceSource);
      }
    } else if (action === 'run-below') {
      runBelow(panel, cell).catch(err => console.warn('nbrefine: could not run the cells below', err));
    }
  });
}
