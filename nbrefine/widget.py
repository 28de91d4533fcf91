"""A first review panel (core ipywidgets only: renders in JupyterLab, Notebook 7 and VS Code)."""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets
from IPython.display import display

from .session import RefineSession, SessionStateError

__all__ = ["ReviewPanel"]

_DIFF_STYLE = {
    "+": "color:#116329;background:#dafbe1",
    "-": "color:#82071e;background:#ffebe9",
    "@": "color:#0550ae",
}


def diff_html(diff: str) -> str:
    rows = []
    for line in diff.splitlines():
        style = "font-weight:bold" if line.startswith(("+++", "---")) else _DIFF_STYLE.get(line[:1], "")
        rows.append(f'<span style="{style}">{html.escape(line) or " "}</span>')
    body = "\n".join(rows)
    return f'<pre style="font-size:12px;line-height:1.35;padding:6px;border:1px solid #ddd">{body}</pre>'


class ReviewPanel:
    """Shows a session: headline, attempts, explanation, diff, and Accept / Reject."""

    def __init__(self, session: RefineSession) -> None:
        self.session = session
        fixed = session.fixed_code is not None
        self.header = widgets.HTML(f"<b>{html.escape(session.headline())}</b>")
        self.attempts = widgets.HTML(self._attempts_html())
        self.explanation = widgets.HTML(
            f"<div><i>{html.escape(session.explanation)}</i></div>" if session.explanation else ""
        )
        self.diff = widgets.HTML(diff_html(session.diff()) if fixed else "")
        self.accept_button = widgets.Button(description="Accept", button_style="success", disabled=not fixed)
        self.reject_button = widgets.Button(description="Reject", disabled=not fixed)
        self.status = widgets.HTML("")
        self.output = widgets.Output()
        self.accept_button.on_click(self._on_accept)
        self.reject_button.on_click(self._on_reject)
        buttons = widgets.HBox([self.accept_button, self.reject_button, self.status])
        children = [self.header, self.attempts, self.explanation, self.diff]
        if fixed:
            children.append(buttons)
        children.append(self.output)
        self.widget = widgets.VBox(children)

    def _attempts_html(self) -> str:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in self.session.attempt_lines())
        failure = self.session.failure
        first = f"<div>original failure: {html.escape(failure.one_line())}</div>" if failure else ""
        return first + (f"<ol style='margin:2px 0'>{items}</ol>" if items else "")

    def _finish(self, text: str) -> None:
        self.accept_button.disabled = True
        self.reject_button.disabled = True
        self.status.value = html.escape(text)

    def _on_accept(self, _button: Any = None) -> None:
        with self.output:
            try:
                ok = self.session.accept()
            except SessionStateError as err:
                self._finish(str(err))
                return
        self._finish(
            "Accepted: the fix ran in the kernel." if ok else "Accepted, but the fix raised when run."
        )

    def _on_reject(self, _button: Any = None) -> None:
        try:
            self.session.reject()
        except SessionStateError as err:
            self._finish(str(err))
            return
        self._finish("Rejected: nothing was changed.")

    def display(self) -> None:
        """Display the panel, with the text view as the plain-text fallback (nbclient, consoles)."""
        bundle = self.widget._repr_mimebundle_()
        bundle["text/plain"] = self.session.render_text()
        display(bundle, raw=True)  # type: ignore[no-untyped-call]
