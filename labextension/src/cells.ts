/**
 * A fix of several cells at once (`write_cells`): the kernel sends edits (cell, the source it
 * must have now, the new source, provenance) and moves (cell, the cell to put it just above),
 * and the cells to run afterwards, in order. Everything is checked first: if one cell is
 * missing, not editable or not as expected, nothing is written. Then all moves and edits go in
 * as ONE transaction of the notebook's shared model, whose origin is the notebook:
 *
 *   - the notebook's undo manager records it as one step: "Z" in command mode (Undo Cell
 *     Operation) puts every cell back (source, position, metadata); with the notebook-wide
 *     undo history (`documentWideUndoRedo`) so does Ctrl+Z, as the cells share that manager.
 *     That step is tagged (its `meta`), so that when it is undone or redone the provenance
 *     follows: JupyterLab rewrites a cell's whole metadata, outside the undo history, the
 *     first time it clears a cell's outputs ("trusted"), which would leave the provenance;
 *   - each edited cell's own undo manager (JupyterLab 4's default, one history per cell) is
 *     made to record its part too, so Ctrl+Z in that cell's editor restores its source, as it
 *     does after a `write_cell`;
 *   - an explicit undo restores all from a snapshot taken before the write: the "undo" button
 *     of the fixed line in any of the changed cells, or the kernel's `{action: "undo",
 *     request_id}` (the request_id of the write). It refuses when one of the edited cells was
 *     changed since (its source is not what was written). It is a step of the notebook's undo
 *     history too ("Z" then brings the fix back). The snapshot lives in the page: after a
 *     reload only the notebook's undo history (and each cell's provenance) is left.
 *
 * "Metadata" is what the write set: `metadata.nbrefine`. A move is a delete and an insert of the
 * cell's JSON (the id, outputs and metadata go with it), as JupyterLab's own move does; the cell
 * gets a new model and widget.
 */
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import type { ISharedCell } from '@jupyter/ydoc';
import type { JSONObject, JSONValue } from '@lumino/coreutils';
import type * as nbformat from '@jupyterlab/nbformat';
import { isFixedLine, markUndone, notRunBelow, ranAs, run, withBelow } from './apply';

export type CellsReply = { ok: boolean; reason?: string; runs?: boolean };

/** What answering a request leads to: the reply, and what to do once it is sent. */
export interface IOutcome {
  reply: CellsReply;
  after?: () => Promise<void>;
}

export const NOTHING_CHANGED = 'nothing was changed';

interface IEdit {
  cellId: string;
  expected: string;
  source: string;
  provenance: JSONValue | undefined;
}

interface IMove {
  cellId: string;
  above: string;
}

/** Where a cell goes: just above a cell, just below one, or at the end. */
type Place = { above: string } | { below: string } | { end: true };

/** Metadata keys and their values (undefined: absent). */
type Metadata = Array<[string, JSONValue | undefined]>;

/** The cells as they were before one write, to put them back. */
interface IWrite {
  requestId: string;
  /** edited cells: their source and metadata before, and the source and metadata written */
  edited: Map<string, { source: string; metadata: Metadata; written: string; wrote: Metadata }>;
  /** the moves done, in order, with the cell's neighbours before each */
  moved: Array<{ cellId: string; prev: string | null; next: string | null }>;
  /** edited or moved, in the request's order */
  changed: string[];
  undone: boolean;
}

/** The writes of each notebook (this page only). */
const writes = new WeakMap<NotebookPanel, Map<string, IWrite>>();
const MAX_WRITES = 50;

/** A cell by its nbformat id, and its position. */
export function locate(
  panel: NotebookPanel,
  cellId: string
): { cell: ICellModel; index: number } | undefined {
  const model = panel.content.model;
  if (!model || panel.isDisposed) {
    return undefined;
  }
  for (let i = 0; i < model.cells.length; i++) {
    const cell = model.cells.get(i);
    if (cell.id === cellId) {
      return { cell, index: i };
    }
  }
  return undefined;
}

function isObject(value: unknown): value is JSONObject {
  return !!value && typeof value === 'object' && !Array.isArray(value);
}

function isReadOnly(panel: NotebookPanel): boolean {
  const model = panel.content.model as unknown as { readOnly?: boolean } | null;
  return Boolean(model?.readOnly);
}

const MALFORMED =
  'malformed request: edits must be a list of {cell_id, expected_source, source, metadata?}, ' +
  'moves of {cell_id, above}, run of cell ids';

/** The request's edits, moves and runs, or why it is malformed. */
function parse(data: JSONObject): { edits: IEdit[]; moves: IMove[]; run: string[] } | string {
  const rawEdits = data['edits'] ?? [];
  const rawMoves = data['moves'] ?? [];
  const rawRun = data['run'] ?? [];
  if (!Array.isArray(rawEdits) || !Array.isArray(rawMoves) || !Array.isArray(rawRun)) {
    return MALFORMED;
  }
  const edits: IEdit[] = [];
  for (const edit of rawEdits) {
    if (!isObject(edit)) {
      return MALFORMED;
    }
    const { cellId, expected } = ranAs(
      data['execute_request'],
      edit['cell_id'],
      edit['expected_source']
    );
    const source = edit['source'];
    if (typeof cellId !== 'string' || typeof expected !== 'string' || typeof source !== 'string') {
      return MALFORMED;
    }
    if (edits.some(e => e.cellId === cellId)) {
      return `malformed request: the cell "${cellId}" is edited twice`;
    }
    const metadata = edit['metadata'];
    const provenance = isObject(metadata) ? metadata['nbrefine'] : undefined;
    edits.push({ cellId, expected, source, provenance });
  }
  const moves: IMove[] = [];
  for (const move of rawMoves) {
    if (!isObject(move) || typeof move['cell_id'] !== 'string' || typeof move['above'] !== 'string') {
      return MALFORMED;
    }
    const cellId = move['cell_id'];
    if (cellId === move['above']) {
      return `malformed request: the cell "${cellId}" cannot move above itself`;
    }
    if (moves.some(m => m.cellId === cellId)) {
      return `malformed request: the cell "${cellId}" is moved twice`;
    }
    moves.push({ cellId, above: move['above'] });
  }
  if (!rawRun.every(id => typeof id === 'string')) {
    return MALFORMED;
  }
  if (!edits.length && !moves.length) {
    return 'malformed request: no edits and no moves';
  }
  return { edits, moves, run: rawRun as string[] };
}

/** Why nothing can be written, naming the first cell at fault; undefined when all is well. */
function check(panel: NotebookPanel, edits: IEdit[], ids: string[]): string | undefined {
  for (const id of ids) {
    if (!locate(panel, id)) {
      return `the cell "${id}" is no longer in the notebook; ${NOTHING_CHANGED}`;
    }
  }
  if (isReadOnly(panel)) {
    return `the notebook is read-only; ${NOTHING_CHANGED}`;
  }
  for (const edit of edits) {
    const { cell, index } = locate(panel, edit.cellId)!;
    const named = `the cell "${edit.cellId}" (cell ${index + 1})`;
    if (cell.getMetadata('editable') === false) {
      return `${named} is not editable (metadata "editable": false); ${NOTHING_CHANGED}`;
    }
    if (cell.sharedModel.getSource() !== edit.expected) {
      return `${named} was edited since it ran; ${NOTHING_CHANGED}`;
    }
  }
  return undefined;
}

/** What a Yjs undo manager offers that we use (the shared models of JupyterLab 4 have them). */
interface IUndoManager {
  stopCapturing(): void;
  trackedOrigins: Set<unknown>;
}

function undoManagerOf(shared: unknown): IUndoManager | null {
  return (shared as { undoManager?: IUndoManager | null }).undoManager ?? null;
}

/** And what the notebook's offers besides (Yjs's UndoManager: its stacks and events). */
interface IStackItem {
  meta: Map<unknown, unknown>;
}
interface INotebookUndo extends IUndoManager {
  undoStack: IStackItem[];
  redoStack: IStackItem[];
  on(
    name: 'stack-item-popped',
    handler: (event: { stackItem: IStackItem; type: 'undo' | 'redo' }) => void
  ): void;
}

/** The tag of a step of the notebook's undo history: a write_cells request, or its undo. */
const TAG = 'nbrefine:write_cells';
interface ITag {
  requestId: string;
  kind: 'write' | 'undo';
}

function setMetadata(shared: ISharedCell, metadata: Metadata): void {
  for (const [key, value] of metadata) {
    if (value === undefined) {
      shared.deleteMetadata(key);
    } else {
      shared.setMetadata(key, value);
    }
  }
}

const watched = new WeakSet<INotebookUndo>();

/**
 * When "Z" (or Ctrl+Z with the notebook-wide history) undoes or redoes a tagged step, the write
 * is undone or in place again: say so, and set the provenance accordingly, outside the undo
 * history (see the top of this file). The step that replaces it on the other stack gets the tag.
 */
function watchUndo(panel: NotebookPanel, undo: INotebookUndo): void {
  if (watched.has(undo)) {
    return;
  }
  watched.add(undo);
  undo.on('stack-item-popped', ({ stackItem, type }) => {
    const tag = stackItem.meta.get(TAG) as ITag | undefined;
    if (!tag) {
      return;
    }
    const other = type === 'undo' ? undo.redoStack : undo.undoStack;
    other[other.length - 1]?.meta.set(TAG, tag);
    const write = writes.get(panel)?.get(tag.requestId);
    const notebook = panel.content.model?.sharedModel;
    if (!write || !notebook) {
      return;
    }
    const inPlace = (tag.kind === 'write') === (type === 'redo');
    write.undone = !inPlace;
    notebook.transact(() => {
      for (const [cellId, edited] of write.edited) {
        const cell = locate(panel, cellId)?.cell;
        if (cell) {
          setMetadata(cell.sharedModel, inPlace ? edited.wrote : edited.metadata);
        }
      }
    }, false);
  });
}

/**
 * Apply the moves (in order), then the edits, as one transaction of the notebook's shared
 * model: one step of the notebook's undo history. Each edited cell that is not moved also
 * records its part in its own history (see the top of this file). Returns the moves done,
 * each with the cell's neighbours before it.
 */
function apply(
  panel: NotebookPanel,
  moves: Array<{ cellId: string; place: Place }>,
  edits: Array<{ cellId: string; source: string; metadata: Metadata }>,
  tag: ITag
): Array<{ cellId: string; prev: string | null; next: string | null }> {
  const model = panel.content.model!;
  const notebook = model.sharedModel;
  // The order and the shared cells as the transaction changes them (the models follow only
  // once it ends).
  const order: string[] = [];
  const current = new Map<string, ISharedCell>();
  for (let i = 0; i < model.cells.length; i++) {
    const cell = model.cells.get(i);
    order.push(cell.id);
    if (!current.has(cell.id)) {
      current.set(cell.id, cell.sharedModel);
    }
  }
  const notebookUndo = undoManagerOf(notebook) as INotebookUndo | null;
  if (notebookUndo) {
    watchUndo(panel, notebookUndo);
  }
  const steps = notebookUndo?.undoStack.length ?? 0;
  const moving = new Set(moves.map(m => m.cellId));
  const cellUndos: IUndoManager[] = [];
  for (const edit of edits) {
    const own = moving.has(edit.cellId) ? null : undoManagerOf(current.get(edit.cellId));
    if (own && own !== notebookUndo && !own.trackedOrigins.has(notebook)) {
      cellUndos.push(own);
    }
  }
  const done: Array<{ cellId: string; prev: string | null; next: string | null }> = [];
  notebookUndo?.stopCapturing();
  for (const own of cellUndos) {
    own.stopCapturing();
    own.trackedOrigins.add(notebook);
  }
  try {
    notebook.transact(() => {
      for (const move of moves) {
        const from = order.indexOf(move.cellId);
        const shared = current.get(move.cellId);
        if (from < 0 || !shared) {
          continue;
        }
        const prev = from > 0 ? order[from - 1] : null;
        const next = from + 1 < order.length ? order[from + 1] : null;
        order.splice(from, 1);
        const place = move.place;
        let to = order.length;
        if ('above' in place && order.includes(place.above)) {
          to = order.indexOf(place.above);
        } else if ('below' in place && order.includes(place.below)) {
          to = order.indexOf(place.below) + 1;
        }
        order.splice(to, 0, move.cellId);
        if (to === from) {
          continue; // already there
        }
        const json = shared.toJSON() as unknown as Parameters<typeof notebook.insertCell>[1];
        notebook.deleteCell(from);
        current.set(move.cellId, notebook.insertCell(to, json));
        done.push({ cellId: move.cellId, prev, next });
      }
      for (const edit of edits) {
        const shared = current.get(edit.cellId);
        if (!shared) {
          continue;
        }
        if (shared.getSource() !== edit.source) {
          shared.setSource(edit.source);
        }
        setMetadata(shared, edit.metadata);
      }
    });
  } finally {
    if (notebookUndo && notebookUndo.undoStack.length > steps) {
      notebookUndo.undoStack[notebookUndo.undoStack.length - 1].meta.set(TAG, tag);
    }
    notebookUndo?.stopCapturing();
    for (const own of cellUndos) {
      own.trackedOrigins.delete(notebook);
      own.stopCapturing();
    }
  }
  return done;
}

function remember(panel: NotebookPanel, write: IWrite): void {
  let mine = writes.get(panel);
  if (!mine) {
    mine = new Map();
    writes.set(panel, mine);
  }
  mine.set(write.requestId, write);
  if (mine.size > MAX_WRITES) {
    const oldest = mine.keys().next().value;
    if (oldest !== undefined) {
      mine.delete(oldest);
    }
  }
}

/** Whether this notebook holds the write `requestId` (not undone). */
export function holdsWrite(panel: NotebookPanel, requestId: string): boolean {
  const write = writes.get(panel)?.get(requestId);
  return !!write && !write.undone;
}

/**
 * Answer a `write_cells` request. Undefined: this notebook holds none of the cells and another
 * one on the same kernel holds them all (its connection answers).
 */
export function writeCells(
  panel: NotebookPanel,
  data: JSONObject,
  heldElsewhere: (ids: string[]) => boolean
): IOutcome | undefined {
  const parsed = parse(data);
  if (typeof parsed === 'string') {
    return { reply: { ok: false, reason: parsed } };
  }
  const { edits, moves } = parsed;
  const ids = [
    ...new Set([
      ...edits.map(e => e.cellId),
      ...moves.map(m => m.cellId),
      ...moves.map(m => m.above),
      ...parsed.run
    ])
  ];
  if (!ids.some(id => locate(panel, id)) && heldElsewhere(ids)) {
    return undefined;
  }
  const refused = check(panel, edits, ids);
  if (refused !== undefined) {
    return { reply: { ok: false, reason: refused } };
  }
  const requestId = typeof data['request_id'] === 'string' ? data['request_id'] : '';
  const write: IWrite = {
    requestId,
    edited: new Map(),
    moved: [],
    changed: [...new Set([...moves.map(m => m.cellId), ...edits.map(e => e.cellId)])],
    undone: false
  };
  for (const edit of edits) {
    const { cell } = locate(panel, edit.cellId)!;
    const wrote: Metadata = edit.provenance === undefined ? [] : [['nbrefine', edit.provenance]];
    write.edited.set(edit.cellId, {
      source: cell.sharedModel.getSource(),
      metadata: wrote.map(([key]) => [key, cell.getMetadata(key) as JSONValue | undefined]),
      written: edit.source,
      wrote
    });
  }
  if (requestId) {
    remember(panel, write);
  }
  write.moved = apply(
    panel,
    moves.map(m => ({ cellId: m.cellId, place: { above: m.above } })),
    [...write.edited].map(([cellId, e]) => ({ cellId, source: e.written, metadata: e.wrote })),
    { requestId, kind: 'write' }
  );
  const runs = parsed.run.length > 0 && !!panel.sessionContext.session?.kernel;
  if (!runs) {
    return { reply: { ok: true } };
  }
  return {
    reply: { ok: true, runs: true },
    after: () => runInOrder(panel, parsed.run, write.changed, data['fixed_output'])
  };
}

/**
 * Run the cells, in order, each once the previous one finished; stop at the first that fails.
 * When all passed, put the kernel's line (`fixed_output`) above the outputs of each changed cell
 * that ran, the lowest one with "N cells below did not run".
 */
async function runInOrder(
  panel: NotebookPanel,
  ids: string[],
  changed: string[],
  line: unknown
): Promise<void> {
  for (const id of ids) {
    const widget = panel.content.widgets.find(w => w.model.id === id);
    if (!widget || !(await run(panel, [widget]))) {
      return;
    }
  }
  if (!isObject(line)) {
    return;
  }
  const fixed = panel.content.widgets
    .map(w => w.model)
    .filter(cell => cell.type === 'code' && changed.includes(cell.id) && ids.includes(cell.id));
  fixed.forEach((cell, i) => {
    const outputs = (cell as ICodeCellModel).outputs;
    const count = i === fixed.length - 1 ? notRunBelow(panel, cell).length : 0;
    outputs.fromJSON([withBelow(line as unknown as nbformat.IOutput, count), ...outputs.toJSON()]);
  });
}

/** Why `write` cannot be undone now; undefined when it can. */
function checkUndo(panel: NotebookPanel, write: IWrite): string | undefined {
  if (write.undone) {
    return 'that fix was already undone';
  }
  if (isReadOnly(panel)) {
    return 'the notebook is read-only; nothing was undone';
  }
  for (const id of write.changed) {
    const found = locate(panel, id);
    if (!found) {
      return `the cell "${id}" is no longer in the notebook; nothing was undone`;
    }
    const edited = write.edited.get(id);
    if (edited && found.cell.sharedModel.getSource() !== edited.written) {
      return `the cell "${id}" (cell ${found.index + 1}) was changed since the fix; nothing was undone`;
    }
  }
  return undefined;
}

/**
 * Put back every cell of `write`: the moves undone in reverse order (each cell back above the
 * cell that followed it, or below the one before it), the edited cells' sources and metadata
 * as they were; the changed code cells' outputs cleared with the "Undone" line. One step of the
 * notebook's undo history too.
 */
function undoWrite(panel: NotebookPanel, write: IWrite): string | undefined {
  const refused = checkUndo(panel, write);
  if (refused !== undefined) {
    return refused;
  }
  const back = [...write.moved].reverse().map(({ cellId, prev, next }) => {
    let place: Place = { end: true };
    if (next !== null && next !== cellId && locate(panel, next)) {
      place = { above: next };
    } else if (prev !== null && prev !== cellId && locate(panel, prev)) {
      place = { below: prev };
    }
    return { cellId, place };
  });
  const edits = [...write.edited].map(([cellId, before]) => ({
    cellId,
    source: before.source,
    metadata: before.metadata
  }));
  apply(panel, back, edits, { requestId: write.requestId, kind: 'undo' });
  write.undone = true;
  for (const id of write.changed) {
    const cell = locate(panel, id)?.cell;
    if (cell?.type !== 'code') {
      continue;
    }
    const code = cell as ICodeCellModel;
    if (write.edited.has(id)) {
      markUndone(code); // its outputs came from the fixed code
    } else {
      // moved only: its outputs are its own, but the "Fixed by nbrefine" line no longer holds
      const outputs = code.outputs.toJSON();
      if (outputs.some(isFixedLine)) {
        code.outputs.fromJSON(outputs.filter(o => !isFixedLine(o)));
      }
    }
  }
  return undefined;
}

/**
 * Answer `{action: "undo", request_id}`: undo the write_cells request of that id. Undefined:
 * another notebook on the same kernel holds it.
 */
export function undoCells(
  panel: NotebookPanel,
  data: JSONObject,
  heldElsewhere: (requestId: string) => boolean
): IOutcome | undefined {
  const requestId = data['request_id'];
  if (typeof requestId !== 'string') {
    return { reply: { ok: false, reason: 'malformed request: request_id must be a string' } };
  }
  const write = writes.get(panel)?.get(requestId);
  if (!write) {
    if (heldElsewhere(requestId)) {
      return undefined;
    }
    return {
      reply: {
        ok: false,
        reason:
          'this page wrote no such fix (reloaded since?); nothing was undone (Undo Cell Operation, ' +
          '"Z" in command mode, may still undo it)'
      }
    };
  }
  const refused = undoWrite(panel, write);
  return { reply: refused === undefined ? { ok: true } : { ok: false, reason: refused } };
}

/**
 * The fixed line's "undo" button in `cell`: when the cell was changed by a write_cells request
 * of this page (the latest that changed it, not undone), undo that whole write and return true;
 * false leaves the button to the one-cell undo.
 */
export function undoTogether(panel: NotebookPanel, cell: ICellModel): boolean {
  const mine = [...(writes.get(panel)?.values() ?? [])].reverse();
  const write = mine.find(w => w.changed.includes(cell.id));
  if (!write || write.undone) {
    return false;
  }
  const refused = undoWrite(panel, write);
  if (refused !== undefined && cell.type === 'code') {
    (cell as ICodeCellModel).outputs.add({
      output_type: 'display_data',
      data: {
        'text/plain': `nbrefine: not undone — ${refused}`,
        'text/html': `<div class="nbr-undone">Not undone — ${escapeHtml(refused)}.</div>`
      },
      metadata: { nbrefine: { undone: false } }
    });
  }
  return true;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, c => `&#${c.charCodeAt(0)};`);
}
