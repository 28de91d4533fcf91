/**
 * The kernel's copy of the notebook's cells (`watch_cells`): when nbrefine loads in a kernel it
 * opens a comm to the target `nbrefine` with `{action: "watch_cells"}` (nbrefine/ipython/watched_cells.py).
 * The extension keeps that comm open (one per notebook: the latest the kernel opened) and sends
 *
 *   {cells: [{id, source, metadata: {nbgrader?, editable?}}, ...]}   (the code cells, in order)
 *
 * at once, and again before each cell of that notebook runs: on `NotebookActions.
 * executionScheduled`, which JupyterLab emits synchronously just before `CodeCell.execute` sends
 * the execute request (cellexecutor.ts), so the list goes out first. That is how the kernel knows,
 * when a cell fails, a cell below that defines a name it needs, though that cell never ran and
 * the notebook was not saved.
 *
 * Order. The list must reach the kernel before the execute request does. Both travel on the
 * shell channel of the same websocket, and the kernel handles its main shell's messages in
 * order; but JupyterLab ≥ 4.4 sends a comm's messages to a kernel *subshell* where the kernel
 * has them (ipykernel 7: `commsOverSubshells`, "perCommTarget" by default), and a subshell runs
 * alongside the main shell, in another thread: no order. So the list is sent as a `comm_msg`
 * built here, on the main shell (or the subshell the notebook's execute requests use), never
 * through `comm.send`.
 *
 * Cheap: nothing is sent when the list is what this notebook last sent to that kernel (a hash of
 * it); a notebook sharing its kernel with another one sends whenever the other one sent last.
 * The comm is never closed from here: the kernel ends it (or a restart does).
 */
import { KernelMessage } from '@jupyterlab/services';
import type { Kernel } from '@jupyterlab/services';
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { JSONObject, JSONValue } from '@lumino/coreutils';

/** The request's action. */
export const WATCH_CELLS = 'watch_cells';

interface IWatch {
  comm: Kernel.IComm;
  kernel: Kernel.IKernelConnection;
}

/** The watch comm of each notebook. */
const watches = new WeakMap<NotebookPanel, IWatch>();
/** Per kernel id: which notebook sent the last list, and the list's hash. */
const lastSent = new Map<string, string>();

/** The metadata keys the kernel reads (nbgrader's lock, JupyterLab's "editable"). */
const KEYS = ['nbgrader', 'editable'];

/** The notebook's code cells in order, as the kernel reads them. */
export function cellList(panel: NotebookPanel): JSONObject[] {
  const model = panel.content.model;
  if (!model) {
    return [];
  }
  const out: JSONObject[] = [];
  for (let i = 0; i < model.cells.length; i++) {
    const cell = model.cells.get(i);
    if (cell.type !== 'code') {
      continue;
    }
    const metadata: JSONObject = {};
    for (const key of KEYS) {
      const value = cell.getMetadata(key) as JSONValue | undefined;
      if (value !== undefined) {
        metadata[key] = value;
      }
    }
    out.push({ id: cell.id, source: cell.sharedModel.getSource(), metadata });
  }
  return out;
}

/** A 53-bit hash of a string (cyrb53): equal lists, equal hashes; a collision is 1 in 2^53. */
export function hash(text: string): string {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(36);
}

/** Whether this notebook's watch is still live: its comm open, on the notebook's kernel now. */
function live(panel: NotebookPanel, watch: IWatch): boolean {
  return (
    !panel.isDisposed &&
    !watch.comm.isDisposed &&
    !watch.kernel.isDisposed &&
    panel.sessionContext.session?.kernel === watch.kernel
  );
}

/**
 * Send the notebook's cells on its watch comm, unless the kernel has them already (`force`:
 * send anyway). A comm_msg on the shell channel the execute requests use (see the top).
 */
export function sendCells(panel: NotebookPanel, force = false): boolean {
  const watch = watches.get(panel);
  if (!watch) {
    return false;
  }
  if (!live(panel, watch)) {
    watches.delete(panel);
    return false;
  }
  const data: JSONObject = { cells: cellList(panel) };
  const text = JSON.stringify(data);
  const key = `${panel.id}:${text.length}:${hash(text)}`;
  const kernel = watch.kernel;
  if (!force && lastSent.get(kernel.id) === key) {
    return false;
  }
  const subshellId = (kernel as { subshellId?: string | null }).subshellId ?? null;
  const msg = KernelMessage.createMessage({
    msgType: 'comm_msg',
    channel: 'shell',
    username: kernel.username,
    session: kernel.clientId,
    ...(subshellId ? { subshellId } : {}),
    content: { comm_id: watch.comm.commId, data }
  });
  kernel.sendShellMessage(msg, false, true);
  lastSent.set(kernel.id, key);
  return true;
}

/**
 * The kernel opened a watch comm for this notebook: keep it (it replaces an earlier one, which
 * a restart or a second `%load_ext` left behind) and send the cells at once.
 */
export function watchCells(
  panel: NotebookPanel,
  kernel: Kernel.IKernelConnection,
  comm: Kernel.IComm
): void {
  watches.set(panel, { comm, kernel });
  comm.onClose = () => {
    if (watches.get(panel)?.comm === comm) {
      watches.delete(panel);
    }
  };
  comm.onMsg = () => undefined; // the kernel sends nothing on it
  try {
    sendCells(panel, true);
  } catch (err) {
    console.warn('nbrefine: could not send the notebook cells to the kernel', err);
  }
}

/** Before a cell of `panel` runs: the kernel gets the cells first (when they changed). */
export function beforeExecution(panel: NotebookPanel | undefined): void {
  if (!panel) {
    return;
  }
  try {
    sendCells(panel);
  } catch (err) {
    console.warn('nbrefine: could not send the notebook cells to the kernel', err);
  }
}
