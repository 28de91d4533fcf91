"""The review panel's stylesheet: every colour from JupyterLab's theme variables (``--jp-*``), so
the panel reads the same in the light, dark and high-contrast themes; VS Code's variables and
fixed colours are only the last fallbacks.

It is shipped inside the panel (an HTML widget holding a ``<style>``), so it works without the
labextension, and it is gone with the panel's output. Two rules reach outside the panel, in
JupyterLab and Notebook 7 only (their output-area classes): the panel is shown first among its
cell's outputs, and once it offers a fix the error outputs before it fold away until the user
opens "the full traceback" (the panel itself shows the user's own frames).

May import: nothing (a string constant).
"""

from __future__ import annotations

__all__ = ["STYLE"]

# Syntax colours follow the editor theme (CodeMirror's variables), mixed with the text colour
# so every token keeps 4.5:1 on the tinted diff rows (the browser tests compute it).
_TOKENS = {
    "keyword": ".k,.kn,.kd,.kc,.kr,.kp,.ow",
    "string": ".s,.s1,.s2,.sd,.sa,.sb,.sc,.sh,.si,.sx,.se,.sr,.ss",
    "number": ".m,.mi,.mf,.mh,.mo,.mb,.il",
    "comment": ".c,.c1,.cm,.ch,.cs,.cp,.cpf",
    "builtin": ".nb,.bp",
    "def": ".nf,.nc,.fm",
    "operator": ".o",
    "punctuation": ".p",
    "variable": ".n,.nn,.nv,.vc,.vg,.vi,.nd,.ne,.nx",
}


# How much of the theme's colour each token keeps: the editor themes' comment colours are too
# faint on tinted rows (#408080 is 3.6:1 on JupyterLab Dark's background), so they keep less.
_KEEP = {"comment": 50}


def _token_rules() -> str:
    rules = []
    for token, classes in _TOKENS.items():
        selector = ",".join(f".nbr-panel .nbr-code {c}" for c in classes.split(","))
        keep = _KEEP.get(token, 80)
        theme = f"var(--jp-mirror-editor-{token}-color, var(--nbr-fg))"
        mix = f"color-mix(in srgb, {theme} {keep}%, var(--nbr-fg))"
        rules.append(f"{selector}{{color:{mix}}}")
    return "\n".join(rules)


_CSS = """
.nbr-panel {
  --nbr-fg: var(--jp-content-font-color1, var(--vscode-editor-foreground, #1f2328));
  --nbr-muted: var(--jp-content-font-color2, var(--vscode-descriptionForeground, #59636e));
  --nbr-border: var(--jp-border-color2, rgba(127, 127, 127, 0.35));
  --nbr-add: rgba(46, 160, 67, 0.14);
  --nbr-del: rgba(248, 81, 73, 0.14);
  --nbr-add-mark: var(--jp-success-color1, #2e7d32);
  --nbr-del-mark: var(--jp-error-color1, #c62828);
  --nbr-accent: var(--nbr-border);
  --nbr-focus: var(--jp-ui-font-color0, var(--vscode-focusBorder, currentColor));
  container-type: inline-size;
  box-sizing: border-box;
  max-width: 100%;
  color: var(--nbr-fg);
  font-family: var(--jp-ui-font-family, system-ui, sans-serif);
  font-size: var(--jp-ui-font-size1, 13px);
  line-height: 1.45;
  border: 1px solid var(--nbr-border);
  border-left: 4px solid var(--nbr-accent);
  border-radius: 4px;
  padding: 8px 10px;
  gap: 6px;
}
.nbr-panel.nbr-ok { --nbr-accent: var(--jp-success-color1, #2e7d32); }
.nbr-panel.nbr-warn { --nbr-accent: var(--jp-warn-color1, #b26a00); }
.nbr-panel.nbr-bad { --nbr-accent: var(--jp-error-color1, #c62828); }
.nbr-panel.nbr-busy { --nbr-accent: var(--jp-brand-color1, #1976d2); }
.nbr-panel.nbr-info { --nbr-accent: var(--jp-brand-color1, #1976d2); }
.nbr-panel .widget-html, .nbr-panel .widget-html-content { color: inherit; font: inherit;
  line-height: inherit; max-width: 100%; min-width: 0; }
.nbr-panel .widget-html-content { white-space: normal; }
.nbr-panel .nbr-head { align-items: center; gap: 8px; flex-wrap: wrap; }
.nbr-panel .nbr-head > .widget-html { flex: 1 1 16em; }
.nbr-panel .nbr-summary { font-size: var(--jp-ui-font-size2, 15px); font-weight: 600; }
.nbr-panel .nbr-icon { display: inline-block; width: 1.3em; color: var(--nbr-accent); }
.nbr-panel .nbr-sub, .nbr-panel .nbr-progress { color: var(--nbr-muted); }
.nbr-panel .nbr-sub code, .nbr-panel .nbr-md code, .nbr-panel .nbr-frames code {
  font-family: var(--jp-code-font-family, monospace); font-size: 0.95em; color: var(--nbr-fg);
  background: var(--jp-layout-color2, rgba(127, 127, 127, 0.15)); padding: 0 3px; border-radius: 3px; }
.nbr-panel .nbr-progress ul, .nbr-panel .nbr-list { margin: 2px 0 0; padding-left: 1.2em; list-style: none; }
.nbr-panel .nbr-timer { font-variant-numeric: tabular-nums; }
.nbr-panel .nbr-actions { flex-wrap: wrap; gap: 6px; align-items: center; }
.nbr-panel .nbr-actions > .jupyter-button, .nbr-panel .nbr-head > .jupyter-button {
  width: auto; max-width: none; flex: 0 0 auto; overflow: visible; padding: 0 12px; margin: 0; }
.nbr-panel .nbr-actions > .widget-text { flex: 1 1 14em; min-width: 10em; width: auto; margin: 0; }
.nbr-panel .nbr-actions > .widget-text input { width: 100%; }
/* The brand colour darkened, under white: >= 5:1 in every JupyterLab theme (the high-contrast
   theme's own inverse font colour is white on its light blue, 3:1). */
.nbr-panel .jupyter-button.nbr-primary, .nbr-offer > .jupyter-button.nbr-primary {
  background: color-mix(in srgb, var(--jp-brand-color1, #1976d2) 72%, #000); color: #fff; font-weight: 600; }
.nbr-panel .jupyter-button.nbr-caution { background: transparent; color: var(--nbr-fg);
  border: 1px solid var(--jp-warn-color1, #b26a00); }
.nbr-panel .jupyter-button.nbr-plain { background: var(--jp-layout-color2, #eee); color: var(--nbr-fg); }
.nbr-panel .jupyter-button:focus { outline: none; }
.nbr-panel .jupyter-button:focus-visible, .nbr-panel input:focus-visible, .nbr-panel summary:focus-visible,
.nbr-panel .nbr-code:focus-visible, .nbr-panel .widget-toggle-button:focus-visible {
  outline: 2px solid var(--nbr-focus) !important; outline-offset: 2px; }
.nbr-panel .widget-toggle-buttons .widget-toggle-button { width: auto; padding: 0 10px; height: 24px;
  background: transparent; color: var(--nbr-muted); border: 1px solid var(--nbr-border); box-shadow: none; }
.nbr-panel .widget-toggle-buttons .widget-toggle-button.mod-active { color: var(--nbr-fg);
  border-color: var(--nbr-fg); font-weight: 600; }
.nbr-panel .nbr-verdict { border-left: 3px solid var(--jp-warn-color1, #b26a00); padding-left: 8px; }
.nbr-panel .nbr-label { color: var(--nbr-muted); font-size: var(--jp-ui-font-size0, 11px);
  text-transform: uppercase; letter-spacing: 0.04em; margin: 2px 0; }
.nbr-panel .nbr-code { font-family: var(--jp-code-font-family, monospace);
  font-size: var(--jp-code-font-size, 13px); line-height: 1.45; margin: 0; padding: 4px 0;
  white-space: pre; overflow-x: auto; color: var(--nbr-fg);
  background: var(--jp-cell-editor-background, transparent); border: 1px solid var(--nbr-border);
  border-radius: 3px; }
.nbr-panel .nbr-code .nbr-line { display: flex; min-width: max-content; min-height: 1.45em; }
.nbr-panel .nbr-code .nbr-line > .nbr-sign { flex: 0 0 1.6em; text-align: center; user-select: none;
  color: var(--nbr-fg); }
.nbr-panel .nbr-code .nbr-line > code { font: inherit; white-space: pre; padding-right: 10px;
  background: none; color: inherit; }
.nbr-panel .nbr-code .nbr-add { background: var(--nbr-add); box-shadow: inset 3px 0 var(--nbr-add-mark); }
.nbr-panel .nbr-code .nbr-del { background: var(--nbr-del); box-shadow: inset 3px 0 var(--nbr-del-mark); }
.nbr-panel .nbr-code .nbr-gap { color: var(--nbr-muted); font-style: italic; }
.nbr-panel .nbr-code .nbr-blank { min-height: 1.45em; }
.nbr-panel .nbr-sbs { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 8px; }
.nbr-panel .nbr-sbs > div { min-width: 0; }
@container (max-width: 640px) { .nbr-panel .nbr-sbs { grid-template-columns: minmax(0, 1fr); } }
.nbr-panel details { margin: 2px 0; }
.nbr-panel details > summary { cursor: pointer; color: var(--nbr-fg); padding: 2px 0; }
.nbr-panel details.nbr-more > summary { color: var(--nbr-muted); }
.nbr-panel details .nbr-body { padding: 2px 0 4px 1.2em; }
.nbr-panel .nbr-md p { margin: 0 0 6px; }
.nbr-panel .nbr-md ul, .nbr-panel .nbr-md ol { margin: 0 0 6px; padding-left: 1.4em; }
.nbr-panel .nbr-hint { border-left: 3px solid var(--jp-brand-color1, #1976d2); padding: 2px 0 2px 10px;
  margin: 4px 0; }
.nbr-panel .nbr-hint h4 { margin: 0 0 4px; font-size: var(--jp-ui-font-size1, 13px); }
.nbr-panel .nbr-note { color: var(--nbr-muted); font-style: italic; }
/* A fix that spans cells: each changed cell's label above its diff, a move as a step. */
.nbr-panel .nbr-cell-label { font-weight: 600; margin: 8px 0 2px; overflow-wrap: anywhere; }
.nbr-panel .nbr-plan > .nbr-cell-label:first-child { margin-top: 0; }
.nbr-panel .nbr-step { font-weight: 600; margin: 2px 0 4px; overflow-wrap: anywhere; }
.nbr-panel .nbr-plan > .nbr-note { margin-top: 6px; }
.nbr-panel .nbr-frames { margin: 0; padding-left: 1.2em; }
.nbr-panel textarea { font-family: var(--jp-code-font-family, monospace); }
/* The line that replaces the panel once the fixed cell ran (the extension adds it). */
.nbr-panel.nbr-fixed { border: none; padding: 2px 0; }
.nbr-panel .nbr-fixed-line { font-weight: 600; }
.nbr-panel .nbr-link { background: none; border: none; padding: 0; margin: 0; font: inherit; font-weight: 400;
  color: var(--jp-content-link-color, var(--jp-brand-color1, #1565c0)); text-decoration: underline;
  cursor: pointer; }
.nbr-panel .nbr-link:focus-visible { outline: 2px solid var(--nbr-focus); outline-offset: 2px; }
.nbr-panel .nbr-below { font-weight: 400; color: var(--nbr-muted); }
.nbr-panel .nbr-fixed-details { margin-top: 6px; font-weight: 400; }
/* JupyterLab / Notebook 7: the panel first among its cell's outputs (the traceback comes after
   it, not 60 frames before it)... */
.jp-OutputArea:has(> .jp-OutputArea-child :is(.nbr-panel, .nbr-offer)) { display: flex;
  flex-direction: column; }
.jp-OutputArea-child:has(:is(.nbr-panel, .nbr-offer)) { order: -1; }
.nbr-offer > .jupyter-button.nbr-primary { width: auto; padding: 0 12px; }
.nbr-offer > .jupyter-button:focus-visible { outline: 2px solid var(--jp-ui-font-color0, currentColor);
  outline-offset: 2px; }
.nbr-offer:has(.nbr-panel) > .jupyter-button { display: none; }
/* ...and once a fix is offered, the error outputs above it fold until "the full traceback" is open. */
.jp-OutputArea-child:has(> .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]):has(
  ~ .jp-OutputArea-child .nbr-panel.nbr-fold details.nbr-tb:not([open])) { display: none; }
"""

STYLE = f"<style>{_CSS}\n{_token_rules()}\n</style>"
