/**
 * nbrefine's frontend half: the kernel asks, through a comm, to write an accepted fix
 * into the cell that failed; this extension finds that cell (by its nbformat id, in the
 * notebook bound to the kernel that asked), checks that the user has not edited it since
 * it ran, replaces its source as one undoable step and acknowledges.
 *
 * Protocol (the kernel opens a comm to the target `nbrefine`; the open message's data is
 * the request; the frontend answers with exactly one comm message, then closes the comm):
 *
 *   {action: "write_cell", request_id, cell_id, expected_source, source, metadata?,
 *    execute_request?, run?, fixed_output?, then_run?}
 *     -> {request_id, ok: true}
 *     -> {request_id, ok: true, runs: true}   (with run: the frontend then runs the cell: see apply.ts)
 *     -> {request_id, ok: false, reason: "the cell is no longer in the notebook"}
 *     -> {request_id, ok: false, reason: "the cell was edited since it ran; nothing was changed"}
 *   {action: "write_cells", request_id, edits: [{cell_id, expected_source, source, metadata?}],
 *    moves: [{cell_id, above}], run: [cell_id, ...], fixed_output?, execute_request?}
 *     -> {request_id, ok: true, runs: true}   (then runs the cells of `run`, in order: see cells.ts)
 *     -> {request_id, ok: true}               (nothing to run, or no kernel)
 *     -> {request_id, ok: false, reason: 'the cell "<id>" (cell 3) was edited since it ran; nothing was changed'}
 *        (or is no longer in the notebook, is not editable, the notebook is read-only, malformed)
 *   {action: "undo", request_id}   (the request_id of a write_cells request)
 *     -> {request_id, ok: true}               (every cell it changed is back: source, position, metadata)
 *     -> {request_id, ok: false, reason}      (a cell was changed since; already undone; unknown write)
 *   {action: "ping", request_id?} -> {request_id?, ok: true, version}
 *   {action: "watch_cells"}       -> the comm stays open; the frontend sends on it, at once and
 *                                    again before each cell of the notebook runs (when they
 *                                    changed): {cells: [{id, source, metadata}, ...]} (watch.ts)
 *   anything else                 -> {request_id?, ok: false, reason: "unknown action"}
 *
 * The teaching policy: when a notebook whose metadata has an `nbrefine` object (an
 * instructor's policy, e.g. {"mode": "hint", "max_hints": 3, "lock": true}) is open and its
 * kernel is idle, the extension calls `open_notebook` of the in-kernel API
 * (nbrefine/ipython/kernel_api.py, the one `nbrefine fix` calls too) by name, silently (no
 * output, no execution count, no history), and again after each restart or kernel change:
 *
 *   __import__("nbrefine.ipython.kernel_api", fromlist=["_"]).call('{"name": "open_notebook", "args": [<the object>]}')
 *
 * A failure comes back as the reply's error (ename `KernelCallError`, one line).
 * An execute request, not a comm: nothing of nbrefine is loaded in a fresh kernel to receive
 * one, and the comm protocol above stays as it was.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import type { ICellModel } from '@jupyterlab/cells';
import type { Kernel, KernelMessage } from '@jupyterlab/services';
import type { JSONObject, JSONValue } from '@lumino/coreutils';
import { canRun, handleActions, runFixed, target, trackExecutions } from './apply';
import { holdsWrite, type IOutcome, locate, undoCells, undoTogether, writeCells } from './cells';
import { beforeExecution, WATCH_CELLS, watchCells } from './watch';

/** The notebook metadata key of an instructor's teaching policy. */
export const POLICY_KEY = 'nbrefine';

/** The comm target name the kernel opens comms to. */
export const COMM_TARGET = 'nbrefine';

/** This extension's version (keep equal to package.json's "version"; the browser tests check it). */
export const VERSION = '0.1.0';

export const PLUGIN_ID = 'nbrefine-labextension:plugin';

export const REASON_MISSING = 'the cell is no longer in the notebook';
export const REASON_EDITED =
  'the cell was edited since it ran; nothing was changed';
export const REASON_UNKNOWN = 'unknown action';
export const REASON_READ_ONLY =
  'the notebook is read-only; nothing was changed';
export const REASON_CELL_READ_ONLY =
  'the cell is not editable (metadata "editable": false); nothing was changed';

type Reply = { ok: boolean; reason?: string; version?: string; runs?: boolean };

/** What a Yjs undo manager offers that we use (present on the shared cell models of JupyterLab 4). */
interface IUndoCapture {
  stopCapturing(): void;
}

/** Find a cell model by its nbformat id in one notebook. */
function findCell(
  panel: NotebookPanel,
  cellId: string
): ICellModel | undefined {
  return locate(panel, cellId)?.cell;
}

/** The panels whose session is connected to a kernel with this id (other than `panel`). */
function otherPanelsOnKernel(
  tracker: INotebookTracker,
  panel: NotebookPanel,
  kernelId: string
): NotebookPanel[] {
  return tracker.filter(
    p =>
      p !== panel &&
      !p.isDisposed &&
      p.sessionContext.session?.kernel?.id === kernelId
  );
}

/**
 * Replace the source as a single undo step: close the step the user's typing may still be
 * in, write, close again (so the next keystroke starts a new step). The cell keeps its id.
 */
export function replaceSource(
  cell: ICellModel,
  source: string,
  provenance: JSONValue | undefined
): void {
  const shared = cell.sharedModel as unknown as {
    undoManager?: IUndoCapture | null;
    setSource(value: string): void;
  };
  const undo = shared.undoManager ?? null;
  undo?.stopCapturing();
  shared.setSource(source);
  if (provenance !== undefined) {
    cell.setMetadata('nbrefine', provenance);
  }
  undo?.stopCapturing();
}

function isReadOnly(panel: NotebookPanel): boolean {
  const model = panel.content.model as unknown as { readOnly?: boolean } | null;
  return Boolean(model?.readOnly);
}

/**
 * Answer one request. Returns undefined when another notebook on the same kernel holds the
 * cell: that notebook's own kernel connection answers then (every connection to a kernel
 * sees every comm_open).
 */
export function answer(
  tracker: INotebookTracker,
  panel: NotebookPanel,
  kernelId: string,
  data: JSONObject
): Reply | undefined {
  const action = data['action'];
  if (action === 'ping') {
    return { ok: true, version: VERSION };
  }
  if (action !== 'write_cell') {
    return { ok: false, reason: REASON_UNKNOWN };
  }
  const { cellId, expected } = target(data); // by the execute request that ran it, if known
  const source = data['source'];
  if (
    typeof cellId !== 'string' ||
    typeof expected !== 'string' ||
    typeof source !== 'string'
  ) {
    return {
      ok: false,
      reason:
        'malformed request: cell_id, expected_source and source must be strings'
    };
  }
  const cell = findCell(panel, cellId);
  if (!cell) {
    const elsewhere = otherPanelsOnKernel(tracker, panel, kernelId).some(
      p => findCell(p, cellId) !== undefined
    );
    return elsewhere ? undefined : { ok: false, reason: REASON_MISSING };
  }
  if (isReadOnly(panel)) {
    return { ok: false, reason: REASON_READ_ONLY };
  }
  if (cell.getMetadata('editable') === false) {
    return { ok: false, reason: REASON_CELL_READ_ONLY };
  }
  if (cell.sharedModel.getSource() !== expected) {
    return { ok: false, reason: REASON_EDITED };
  }
  const metadata = data['metadata'];
  let provenance: JSONValue | undefined = undefined;
  if (metadata && typeof metadata === 'object' && !Array.isArray(metadata)) {
    provenance = (metadata as JSONObject)['nbrefine'];
  }
  replaceSource(cell, source, provenance);
  return canRun(panel, cell, data) ? { ok: true, runs: true } : { ok: true };
}

/**
 * Answer one request, and say what to do once the answer is sent. `write_cells` and `undo` are
 * answered by cells.ts; the rest by `answer`.
 */
function respond(
  tracker: INotebookTracker,
  panel: NotebookPanel,
  kernelId: string,
  data: JSONObject
): IOutcome | undefined {
  const others = (): NotebookPanel[] => otherPanelsOnKernel(tracker, panel, kernelId);
  const action = data['action'];
  if (action === 'write_cells') {
    return writeCells(panel, data, ids =>
      others().some(p => ids.every(id => findCell(p, id) !== undefined))
    );
  }
  if (action === 'undo') {
    return undoCells(panel, data, id => others().some(p => holdsWrite(p, id)));
  }
  const reply = answer(tracker, panel, kernelId, data);
  if (reply === undefined) {
    return undefined;
  }
  const cell = reply.runs ? findCell(panel, String(target(data).cellId)) : undefined;
  return {
    reply,
    // after the answer: the kernel reads it (and does Accept's first step) before this runs
    after: cell ? () => runFixed(panel, cell, data) : undefined
  };
}

/**
 * The Python line that calls `name(...args)` of the in-kernel API (nbrefine/ipython/kernel_api.py),
 * as `call_code` of nbrefine/headless/kernel.py builds it. The call goes in as JSON text in a
 * string literal: a JSON string literal is also a Python one.
 */
export function kernelCall(name: string, ...args: JSONValue[]): string {
  const text = JSON.stringify(JSON.stringify({ name, args }));
  return `__import__("nbrefine.ipython.kernel_api", fromlist=["_"]).call(${text})`;
}

/** The Python line that applies a notebook's policy in its kernel. */
export function policyCode(policy: JSONValue): string {
  return kernelCall('open_notebook', policy);
}

/** Apply the notebook's metadata policy in the kernel, silently; say in the console how it went. */
async function applyPolicy(
  panel: NotebookPanel,
  kernel: Kernel.IKernelConnection
): Promise<void> {
  const policy = panel.content.model?.getMetadata(POLICY_KEY) as
    | JSONValue
    | undefined;
  if (policy === undefined || kernel.isDisposed) {
    return;
  }
  const info = await kernel.info;
  if (info.language_info?.name !== 'python') {
    return;
  }
  const future = kernel.requestExecute({
    code: policyCode(policy),
    silent: true,
    store_history: false,
    allow_stdin: false,
    stop_on_error: false
  });
  const reply = (await future.done).content;
  const path = panel.context.path;
  if (reply.status === 'ok') {
    console.log(`nbrefine: applied the teaching policy of ${path}`);
  } else if (reply.status === 'error') {
    console.warn(
      `nbrefine: the teaching policy of ${path} was not applied: ${reply.ename}: ${reply.evalue}`
    );
  }
}

/**
 * Apply the policy once per kernel process: when the notebook is loaded and the kernel first
 * idle, and again after each restart (a new process, which forgot it). The connection stays
 * the same across restarts, so this watches its status.
 */
function watchPolicy(
  panel: NotebookPanel,
  kernel: Kernel.IKernelConnection
): void {
  let pending = true;
  const maybeApply = (): void => {
    if (!pending || kernel.isDisposed || panel.isDisposed) {
      return;
    }
    if (!panel.context.isReady || kernel.connectionStatus !== 'connected') {
      return;
    }
    if (kernel.status !== 'idle') {
      return;
    }
    pending = false;
    applyPolicy(panel, kernel).catch(err =>
      console.warn('nbrefine: could not apply the teaching policy', err)
    );
  };
  kernel.statusChanged.connect((_, status) => {
    if (status === 'restarting' || status === 'autorestarting') {
      pending = true;
    }
    maybeApply();
  });
  kernel.connectionStatusChanged.connect(maybeApply);
  void panel.context.ready.then(maybeApply).catch(() => undefined);
  maybeApply();
}

function onCommOpen(
  tracker: INotebookTracker,
  panel: NotebookPanel,
  kernel: Kernel.IKernelConnection,
  comm: Kernel.IComm,
  msg: KernelMessage.ICommOpenMsg
): void {
  const data = (msg.content.data ?? {}) as JSONObject;
  if (data['action'] === WATCH_CELLS) {
    watchCells(panel, kernel, comm); // kept open: no answer, no close
    return;
  }
  const requestId = data['request_id'];
  let outcome: IOutcome | undefined;
  try {
    outcome = respond(tracker, panel, kernel.id, data);
  } catch (err) {
    console.error('nbrefine: could not write the cell', err);
    outcome = { reply: { ok: false, reason: `the frontend failed: ${String(err)}` } };
  }
  if (outcome === undefined) {
    return; // another notebook bound to this kernel answers
  }
  const content: JSONObject = { ...outcome.reply } as JSONObject;
  if (requestId !== undefined) {
    content['request_id'] = requestId;
  }
  try {
    comm.send(content);
  } catch (err) {
    console.warn('nbrefine: could not answer the kernel', err);
  }
  try {
    comm.close();
  } catch {
    // the kernel went away meanwhile
  }
  outcome.after?.().catch(err => console.warn('nbrefine: could not run the fixed cells', err));
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description:
    "Writes nbrefine's accepted fixes into the notebook cell that failed (comm target 'nbrefine'), " +
    "tells the kernel the notebook's cells, and applies a notebook's metadata teaching policy in its kernel.",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    // Connections we registered on. registerCommTarget replaces an earlier callback for the
    // same name, so a second registration would be harmless too; this just avoids the work.
    const registered = new WeakSet<Kernel.IKernelConnection>();

    const watch = (panel: NotebookPanel): void => {
      const context = panel.sessionContext;
      const register = (): void => {
        const kernel = context.session?.kernel;
        if (!kernel || kernel.isDisposed || registered.has(kernel)) {
          return;
        }
        registered.add(kernel);
        kernel.registerCommTarget(COMM_TARGET, (comm, msg) =>
          onCommOpen(tracker, panel, kernel, comm, msg)
        );
        watchPolicy(panel, kernel);
        trackExecutions(kernel);
      };
      handleActions(panel, replaceSource, undoTogether);
      context.kernelChanged.connect(register);
      context.sessionChanged.connect(register);
      void context.ready.then(register).catch(() => undefined);
      register();
    };

    tracker.forEach(watch);
    tracker.widgetAdded.connect((_, panel) => watch(panel));
    // Emitted just before the execute request goes out: the kernel gets the cells first.
    NotebookActions.executionScheduled.connect((_, { notebook }) =>
      beforeExecution(tracker.find(p => p.content === notebook))
    );
    console.log(
      `nbrefine-labextension ${VERSION} is activated (${app.name}); comm target '${COMM_TARGET}'`
    );
  }
};

export default plugin;
